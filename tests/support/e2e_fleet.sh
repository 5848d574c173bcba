# The shared start of the fleet tests in tests/e2e/: sourced by a test
# after it set `binary`, `backend` (redis, redis-tls, nats or postgres), `name` (its work
# directory's) and `bucket` (its NATS claim bucket: the fleet bucket is the
# same name with STATE for CLAIMS). Starts the backend's server and sets
# `coordinator`, `work`, `journal` (empty) and `daemon_pids`; defines
# fail(), wait_until() and wait_up_to(). On exit the daemons are killed,
# the servers stopped and `work` removed (kept with KEEP_E2E=1); a test may
# define e2e_cleanup() for what it leaves besides.
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
source "$root/scripts/servers.sh"   # its EXIT trap is replaced by ours, which stops the servers
source "$root/tests/support/cleanup.sh"
work=$(mktemp -d "/tmp/fleetcron-$name.XXXXXX")
export STATE_DIRECTORY=$work/state  # the daemons keep their runs' output under it (not /var/lib)
daemon_pids=()
cleanup() {
  stop_daemons "${daemon_pids[@]}"
  if declare -F e2e_cleanup >/dev/null; then e2e_cleanup || true; fi
  stop_servers
  remove_work "$work" "${KEEP_E2E:-}"
}
trap cleanup EXIT
trap 'echo "FAIL: line $LINENO: $BASH_COMMAND exited $?"' ERR
fail() { echo "FAIL: $*"; for f in "$work"/*.log; do echo "--- $f (tail)"; tail -n 8 "$f"; done; exit 1; }
case $backend in
  redis) start_redis; coordinator=$FLEETCRON_TEST_REDIS_URL ;;
  redis-tls) start_redis_tls; coordinator=$FLEETCRON_TEST_REDIS_TLS_URL ;;
  nats) start_nats; coordinator="$FLEETCRON_TEST_NATS_URL?bucket=$bucket" ;;
  postgres)  # the daemons never run DDL: the tables first
    start_postgres; coordinator=$FLEETCRON_TEST_POSTGRES_URL
    "$binary" migrate --coordinator "$coordinator" >"$work/migrate.out" || fail "migrate: $(cat "$work/migrate.out")" ;;
  *) echo "unknown backend $backend"; exit 2 ;;
esac
journal=$work/journal
: >"$journal"

# wait_up_to SECONDS WHAT CONDITION...: polls CONDITION every 0.1 s; fails
# naming WHAT once SECONDS passed.
wait_up_to() {
  local limit=$1 what=$2 deadline=$((SECONDS + $1))
  shift 2
  until "$@"; do
    ((SECONDS < deadline)) || fail "waited $limit s for $what"
    sleep 0.1
  done
}
wait_until() { wait_up_to 20 "$@"; }
