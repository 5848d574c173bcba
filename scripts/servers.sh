# Sourced by scripts/test.sh: starts the servers the integration tests share
# on free loopback ports and stops them by PID when the shell exits.
# Each start fails loudly (the tests must not run without their server).

source "$(dirname "${BASH_SOURCE[0]}")/ports.sh"

server_pids=()
server_dir=$(mktemp -d /tmp/fleetcron-servers.XXXXXX)

postgres_pids=()
postgres_dir=

stop_servers() {
  local pid
  for pid in "${postgres_pids[@]}"; do
    kill -CONT "$pid" 2>/dev/null || true
    kill -INT "$pid" 2>/dev/null || true  # fast shutdown: TERM would wait for every client to leave
  done
  for pid in "${postgres_pids[@]}"; do
    for _ in $(seq 200); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
    kill -KILL "$pid" 2>/dev/null || true
  done
  postgres_pids=()
  [[ -n $postgres_dir ]] && rm -rf "$postgres_dir"
  for pid in "${server_pids[@]}"; do
    kill -CONT "$pid" 2>/dev/null || true
    kill -TERM "$pid" 2>/dev/null || true
  done
  for pid in "${server_pids[@]}"; do
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
    kill -KILL "$pid" 2>/dev/null || true
  done
  server_pids=()
  rm -rf "$server_dir"
  release_ports
}
trap stop_servers EXIT

# Starts redis-server (also on REDIS_EXTRA_BIND's addresses, if set); sets
# FLEETCRON_TEST_REDIS_URL. Its directory is
# the servers' own: a replica's full sync writes dump.rdb there, and a
# server started later in the same directory would load it.
start_redis() {
  local attempt port pid
  for attempt in 1 2 3 4 5; do
    port=$(pick_port)
    # REDIS_EXTRA_BIND: more addresses, space-separated (partition tests,
    # on veth pairs of their own: protected mode would refuse them).
    # shellcheck disable=SC2086
    redis-server --port "$port" --bind 127.0.0.1 ${REDIS_EXTRA_BIND:-} \
      --protected-mode "$([[ -n ${REDIS_EXTRA_BIND:-} ]] && echo no || echo yes)" --dir "$server_dir" --dbfilename "redis-$port.rdb" --save '' \
      --appendonly no --daemonize no \
      --logfile "$server_dir/redis-$port.log" &
    pid=$!
    for _ in $(seq 200); do
      # Ready, and the server on that port is the one we started.
      if redis-cli -p "$port" INFO server 2>/dev/null | tr -d '\r' | grep -qx "process_id:$pid"; then
        server_pids+=("$pid")
        export FLEETCRON_TEST_REDIS_URL="redis://127.0.0.1:$port/0"
        echo "redis-server $(redis-server --version | grep -o 'v=[0-9.]*') pid $pid on 127.0.0.1:$port"
        return 0
      fi
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.05
    done
    kill -KILL "$pid" 2>/dev/null || true
  done
  echo "redis-server did not start; log:" >&2
  cat "$server_dir"/redis-*.log >&2 || true
  return 1
}

# Starts redis-server serving TLS only (--port 0 --tls-port), with the
# certificates of tests/support/tls_certificates.sh in $server_dir/tls;
# sets FLEETCRON_TEST_REDIS_TLS_URL (rediss://…?tls_ca_file=…) and
# FLEETCRON_TEST_TLS_DIR. redis-cli --tls proves the server is ours.
start_redis_tls() {
  local attempt port pid tls=$server_dir/tls
  bash "$(dirname "${BASH_SOURCE[0]}")/../tests/support/tls_certificates.sh" "$tls" || return 1
  for attempt in 1 2 3 4 5; do
    port=$(pick_port)
    redis-server --port 0 --tls-port "$port" --bind 127.0.0.1 --tls-cert-file "$tls/server.pem" \
      --tls-key-file "$tls/server.key" --tls-ca-cert-file "$tls/ca.pem" --tls-auth-clients optional \
      --dir "$server_dir" --dbfilename "redis-$port.rdb" --save '' --appendonly no --daemonize no \
      --logfile "$server_dir/redis-$port.log" &
    pid=$!
    for _ in $(seq 200); do
      if redis-cli --tls --cacert "$tls/ca.pem" -h 127.0.0.1 -p "$port" INFO server 2>/dev/null | tr -d '\r' |
        grep -qx "process_id:$pid"; then
        server_pids+=("$pid")
        export FLEETCRON_TEST_TLS_DIR=$tls
        export FLEETCRON_TEST_REDIS_TLS_URL="rediss://127.0.0.1:$port/0?tls_ca_file=$tls/ca.pem"
        echo "redis-server (TLS) pid $pid on 127.0.0.1:$port"
        return 0
      fi
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.05
    done
    kill -KILL "$pid" 2>/dev/null || true
  done
  echo "redis-server with TLS did not start; log:" >&2
  cat "$server_dir"/redis-*.log >&2 || true
  return 1
}

# Starts nats-server with JetStream and its own store directory on a random
# port; sets FLEETCRON_TEST_NATS_URL. The server writes its port to a file
# named after its PID, which proves the port is ours. NATS_MONITOR=1: also
# its monitoring endpoint, on loopback port $nats_monitor_port.
start_nats() {
  local pid ports_file url monitor=()
  mkdir -p "$server_dir/nats-ports" "$server_dir/nats-store"
  if [[ ${NATS_MONITOR:-} == 1 ]]; then
    nats_monitor_port=$(pick_port)
    monitor=(-m "$nats_monitor_port")
  fi
  nats-server -js -a 127.0.0.1 -p -1 "${monitor[@]}" -sd "$server_dir/nats-store" --ports_file_dir "$server_dir/nats-ports" \
    >"$server_dir/nats.log" 2>&1 &
  pid=$!
  ports_file="$server_dir/nats-ports/nats-server_$pid.ports"
  for _ in $(seq 300); do
    if [[ -s $ports_file ]]; then
      url=$(grep -o 'nats://127\.0\.0\.1:[0-9]*' "$ports_file" | head -1)
      if [[ -n $url ]]; then
        server_pids+=("$pid")
        nats_pid=$pid
        export FLEETCRON_TEST_NATS_URL="$url"
        echo "nats-server $(nats-server --version | grep -o 'v[0-9][0-9.]*') pid $pid on ${url#nats://}"
        return 0
      fi
    fi
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.05
  done
  kill -KILL "$pid" 2>/dev/null || true
  echo "nats-server did not start; log:" >&2
  cat "$server_dir/nats.log" >&2 || true
  return 1
}

# A three-node nats-server cluster with JetStream (nodes n0, n1, n2; each
# with its own store directory and monitoring port); sets
# FLEETCRON_TEST_NATS_CLUSTER_URL (every node, comma-separated). Ready once
# JetStream's meta group has a leader. nats_node_down/nats_node_up kill and
# restart one node on its ports and store; nats_stream_leader names the node
# leading a stream. A caller may set nats_node_hosts (each node's address,
# default 127.0.0.1) and nats_node_netns (a network namespace to run each
# node in) first: the partition runs put each node behind a link of its own.
nats_node_pids=() nats_node_ports=() nats_node_routes=() nats_node_monitors=()
nats_node_hosts=(${nats_node_hosts[@]+"${nats_node_hosts[@]}"}) nats_node_netns=(${nats_node_netns[@]+"${nats_node_netns[@]}"})
nats_node_host() { echo "${nats_node_hosts[$1]:-127.0.0.1}"; }
start_nats_node() {  # index
  local i=$1 routes="" j host run=()
  host=$(nats_node_host "$i")
  [[ -z ${nats_node_netns[$i]:-} ]] || run=(ip netns exec "${nats_node_netns[$i]}")
  for j in 0 1 2; do ((j == i)) || routes+="${routes:+,}nats://$(nats_node_host "$j"):${nats_node_routes[$j]}"; done
  mkdir -p "$server_dir/nats-n$i"
  # ip netns exec execs nats-server: the PID is the server's.
  "${run[@]}" nats-server -js -a "$host" -p "${nats_node_ports[$i]}" -n "n$i" -sd "$server_dir/nats-n$i" \
    -m "${nats_node_monitors[$i]}" --cluster_name fleetcron --cluster "nats://$host:${nats_node_routes[$i]}" \
    --routes "$routes" >>"$server_dir/nats-n$i.log" 2>&1 &
  nats_node_pids[$i]=$!
  server_pids+=("$!")
}
nats_monitor() {  # index, path: the node's monitoring endpoint
  curl -sf "http://$(nats_node_host "$1"):${nats_node_monitors[$1]}$2" 2>/dev/null
}
nats_meta_leader() {  # the meta group's leader as node i says it, or nothing
  nats_monitor "$1" /jsz | jq -r '.meta_cluster.leader // empty' 2>/dev/null
}
start_nats_cluster() {
  local i ready url=""
  for i in 0 1 2; do
    nats_node_ports[$i]=$(pick_port); nats_node_routes[$i]=$(pick_port); nats_node_monitors[$i]=$(pick_port)
  done
  for i in 0 1 2; do start_nats_node "$i"; done
  for _ in $(seq 400); do
    ready=0
    for i in 0 1 2; do [[ -n $(nats_meta_leader "$i") ]] && ready=$((ready + 1)); done
    if ((ready == 3)); then
      for i in 0 1 2; do url+="${url:+,}$(nats_node_host "$i"):${nats_node_ports[$i]}"; done
      export FLEETCRON_TEST_NATS_CLUSTER_URL="nats://$url"
      echo "nats-server cluster n0 n1 n2 on ports ${nats_node_ports[*]} (meta leader $(nats_meta_leader 0))"
      return 0
    fi
    sleep 0.05
  done
  echo "the nats-server cluster did not elect a JetStream meta leader; logs:" >&2
  tail -n 20 "$server_dir"/nats-n*.log >&2 || true
  return 1
}
nats_node_down() {  # index: SIGKILL
  kill_and_reap "${nats_node_pids[$1]}" || return 1
  forget_pid "${nats_node_pids[$1]}"
}
nats_node_up() {  # index: the same ports and store; back once it answers on its monitoring port
  start_nats_node "$1"
  for _ in $(seq 300); do
    nats_monitor "$1" /varz >/dev/null && return 0
    sleep 0.05
  done
  echo "nats node n$1 did not come back" >&2
  return 1
}
nats_stream_leader() {  # stream → the index of the node leading it, asked of every live node
  local i leader
  for i in 0 1 2; do
    leader=$(nats_monitor "$i" '/jsz?accounts=true&streams=true' |
      jq -r --arg s "$1" '[.account_details[]?.stream_detail[]? | select(.name == $s) | .cluster.leader // empty][0] // empty' \
        2>/dev/null)
    if [[ $leader == n[0-2] ]]; then echo "${leader#n}"; return 0; fi
  done
  return 1
}

# Starts a private PostgreSQL cluster (scripts/postgres_cluster.sh: initdb
# and pg_ctl as the postgres user when root); sets FLEETCRON_TEST_POSTGRES_URL.
# Its postmaster is stopped by PID with the other servers (a fast shutdown).
start_postgres() {
  local attempt port pid
  postgres_dir=$(mktemp -d /tmp/fleetcron-postgres.XXXXXX)
  for attempt in 1 2 3; do
    port=$(pick_port)
    if pid=$(bash "$(dirname "${BASH_SOURCE[0]}")/postgres_cluster.sh" start "$postgres_dir" "$port"); then
      postgres_pids+=("$pid")
      postgres_port=$port
      export FLEETCRON_TEST_POSTGRES_URL="postgres://fleetcron:fleetcron-test@127.0.0.1:$port/postgres"
      echo "postgres $(psql --version | grep -o '[0-9][0-9.]*' | head -1) pid $pid on 127.0.0.1:$port"
      return 0
    fi
  done
  echo "PostgreSQL did not start" >&2
  return 1
}

# Chaos runs: kill a server (SIGKILL, no goodbye) and start it again on the
# same port. Redis comes back empty (no persistence: the harsh case);
# nats-server keeps its JetStream store directory. Every wait is bounded.
forget_pid() {  # removes exactly this PID from server_pids
  local kept=() pid
  for pid in "${server_pids[@]}"; do [[ $pid == "$1" ]] || kept+=("$pid"); done
  server_pids=("${kept[@]}")
}
kill_and_reap() {  # pid: SIGKILL, then wait up to 5 s for it to be gone
  kill -KILL "$1" 2>/dev/null || true
  for _ in $(seq 100); do kill -0 "$1" 2>/dev/null || return 0; sleep 0.05; done
  echo "process $1 survived SIGKILL for 5 s" >&2
  return 1
}

restart_redis() {  # port
  local port=$1 old pid
  old=$(redis-cli -p "$port" INFO server 2>/dev/null | tr -d '\r' | awk -F: '$1 == "process_id" {print $2}')
  [[ -n $old ]] || { echo "no redis-server answers on port $port" >&2; return 1; }
  kill_and_reap "$old" || return 1
  forget_pid "$old"
  redis-server --port "$port" --bind 127.0.0.1 --dir "$server_dir" --dbfilename "redis-$port.rdb" --save '' \
    --appendonly no --daemonize no \
    --logfile "$server_dir/redis-$port.log" &
  pid=$!
  server_pids+=("$pid")   # tracked at once: stop_servers stops it even if it never answers
  for _ in $(seq 200); do
    if redis-cli -p "$port" INFO server 2>/dev/null | tr -d '\r' | grep -qx "process_id:$pid"; then return 0; fi
    sleep 0.05
  done
  echo "redis-server did not restart on port $port" >&2
  return 1
}

restart_postgres() {  # the cluster started by start_postgres: a crash (immediate shutdown), then a start
  local old=${postgres_pids[0]} pid
  kill -QUIT "$old" 2>/dev/null || true   # immediate: no checkpoint, crash recovery at the start
  for _ in $(seq 200); do kill -0 "$old" 2>/dev/null || break; sleep 0.05; done
  kill -0 "$old" 2>/dev/null && { echo "postgres $old survived an immediate shutdown for 10 s" >&2; return 1; }
  pid=$(bash "$(dirname "${BASH_SOURCE[0]}")/postgres_cluster.sh" start "$postgres_dir" "$postgres_port") || return 1
  postgres_pids=("$pid")
}

# Ends every connection fleetcron holds (pg_terminate_backend): each
# client finds its connection closed at its next statement.
terminate_postgres_clients() {
  psql -X -q -t -A "$FLEETCRON_TEST_POSTGRES_URL" \
    -c "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = 'fleetcron'"
}

restart_nats() {  # port [lose-store]: the nats-server started by start_nats
  local port=$1 pid
  kill_and_reap "$nats_pid" || return 1
  forget_pid "$nats_pid"
  # lose-store: the volume is lost with the pod; JetStream starts empty.
  if [[ ${2:-} == lose-store ]]; then rm -rf "$server_dir/nats-store" && mkdir -p "$server_dir/nats-store"; fi
  nats-server -js -a 127.0.0.1 -p "$port" -sd "$server_dir/nats-store" >>"$server_dir/nats.log" 2>&1 &
  pid=$!
  server_pids+=("$pid")
  nats_pid=$pid
  for _ in $(seq 300); do
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then return 0; fi
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.05
  done
  echo "nats-server did not restart on port $port" >&2
  return 1
}
