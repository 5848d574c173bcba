#!/usr/bin/env bash
# A private PostgreSQL cluster for the tests, from Debian's postgresql-15:
#   postgres_cluster.sh start DIR PORT   initdb (once) and start on 127.0.0.1:PORT;
#                                        prints the postmaster's PID
#   postgres_cluster.sh stop DIR         fast shutdown, by the PID in DIR
# initdb refuses to run as root, so as root the cluster runs as the
# `postgres` user the package creates (runuser), its directory owned by it.
# The superuser is `fleetcron`, password `fleetcron-test` (scram-sha-256
# over TCP), so tests can also show what a wrong password does.
set -euo pipefail
bin=${FLEETCRON_PG_BIN:-/usr/lib/postgresql/15/bin}
command=$1 dir=$2

as_owner() {
  if [[ $EUID -eq 0 ]]; then runuser -u postgres -- "$@"; else "$@"; fi
}

case $command in
  start)
    port=$3
    if [[ ! -s $dir/data/PG_VERSION ]]; then
      mkdir -p "$dir"
      [[ $EUID -eq 0 ]] && chown postgres:postgres "$dir"
      printf 'fleetcron-test\n' >"$dir/pwfile"
      [[ $EUID -eq 0 ]] && chown postgres:postgres "$dir/pwfile"
      as_owner "$bin/initdb" -D "$dir/data" -U fleetcron --pwfile="$dir/pwfile" -A scram-sha-256 --no-sync \
        -E UTF8 --locale=C >"$dir/initdb.log" 2>&1 || { cat "$dir/initdb.log" >&2; exit 1; }
    fi
    # POSTGRES_EXTRA_LISTEN: more addresses, comma-separated, each a /24's
    # .1 (partition tests, on veth pairs of their own): listened on, and
    # their /24s allowed in pg_hba.conf.
    listen=127.0.0.1
    if [[ -n ${POSTGRES_EXTRA_LISTEN:-} ]]; then
      listen+=",$POSTGRES_EXTRA_LISTEN"
      IFS=',' read -ra extra <<<"$POSTGRES_EXTRA_LISTEN"
      for address in "${extra[@]}"; do
        line="host all all ${address%.*}.0/24 scram-sha-256"
        grep -qxF "$line" "$dir/data/pg_hba.conf" || as_owner sh -c "echo '$line' >>'$dir/data/pg_hba.conf'"
      done
    fi
    # Durability off: the tests restart and kill it, they never need its data on disk.
    as_owner "$bin/pg_ctl" start -w -t 30 -D "$dir/data" -l "$dir/server.log" \
      -o "-h $listen -p $port -k $dir -c fsync=off -c synchronous_commit=off -c full_page_writes=off \
          -c max_connections=200" >/dev/null || { tail -20 "$dir/server.log" >&2; exit 1; }
    head -1 "$dir/data/postmaster.pid"
    ;;
  stop)
    pid=$(head -1 "$dir/data/postmaster.pid" 2>/dev/null || true)
    [[ -n $pid ]] || exit 0
    kill -INT "$pid" 2>/dev/null || exit 0
    for _ in $(seq 200); do kill -0 "$pid" 2>/dev/null || exit 0; sleep 0.05; done
    kill -KILL "$pid" 2>/dev/null || true
    ;;
  *)
    echo "usage: $0 start DIR PORT | stop DIR" >&2
    exit 2
    ;;
esac
