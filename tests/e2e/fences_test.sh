#!/usr/bin/env bash
# Fences never go back for a job (issue 13, item 5): one daemon runs the
# same job through every transition an operator can make — claim, leader
# and both on Redis, then both, claim and leader on NATS, then claim on
# Redis again after FLUSHALL — and every fence a run receives must be
# above every fence before it (docs/fencing.md: each backend's fence is at
# least the store's clock in µs at the grant).
#
#   fences_test.sh FLEETCRON_BINARY
set -euo pipefail
binary=$1
root=$(cd "$(dirname "$0")/../.." && pwd)
source "$root/scripts/servers.sh"   # its EXIT trap stops the servers
source "$root/tests/support/cleanup.sh"
work=$(mktemp -d /tmp/fleetcron-fences.XXXXXX)
export STATE_DIRECTORY=$work/state  # the daemons keep their runs' output under it (not /var/lib)
daemon_pid=0
cleanup() {
  stop_daemons "$daemon_pid"
  stop_servers
  remove_work "$work"
}
trap cleanup EXIT
trap 'echo "FAIL: line $LINENO: $BASH_COMMAND exited $?"' ERR
fail() { echo "FAIL: $*"; tail -n 5 "$work/daemon.log"; exit 1; }
start_redis
start_nats
journal=$work/journal
: >"$journal"
printf '* * * * * *  echo "$FLEETCRON_FENCE %s" >> %s\n' '$PHASE' "$journal" >"$work/jobs.cron"

phase() {  # name coordinator mode: runs until the phase has 3 runs (bounded)
  local name=$1 coordinator=$2 mode=$3 deadline
  PHASE=$name "$binary" run --seconds "$work/jobs.cron" --coordinator "$coordinator" --coordination "$mode" \
    --claim-ttl 10s --leader-ttl 10s >"$work/daemon.log" 2>&1 &
  daemon_pid=$!
  deadline=$((SECONDS + 25))   # NATS leadership: up to a campaign interval before the first run
  while (($(grep -c " $name\$" "$journal" || true) < 3)) && ((SECONDS < deadline)); do sleep 0.2; done
  kill -TERM "$daemon_pid"; wait "$daemon_pid" || true
  daemon_pid=0
  (($(grep -c " $name\$" "$journal" || true) >= 3)) || fail "phase $name ($mode on $coordinator) ran fewer than 3 times"
}
phase redis-claim "$FLEETCRON_TEST_REDIS_URL" claim
phase redis-leader "$FLEETCRON_TEST_REDIS_URL" leader
phase redis-both "$FLEETCRON_TEST_REDIS_URL" both
phase nats-both "$FLEETCRON_TEST_NATS_URL" both
phase nats-claim "$FLEETCRON_TEST_NATS_URL" claim
phase nats-leader "$FLEETCRON_TEST_NATS_URL" leader
redis-cli -u "$FLEETCRON_TEST_REDIS_URL" FLUSHALL >/dev/null
phase redis-after-flush "$FLEETCRON_TEST_REDIS_URL" claim

# Within a phase in leader mode every run of a term has that term's fence;
# across runs, a fence never falls below an earlier one.
awk '{ if ($1 + 0 < max) { print "fence " $1 " (" $2 ") below an earlier " max " (" maxphase ")"; bad = 1 }
       if ($1 + 0 > max) { max = $1 + 0; maxphase = $2 } }
     END { exit bad }' "$journal" || fail "a fence went back"
echo "ok: $(wc -l <"$journal") runs over $(awk '{print $2}' "$journal" | uniq | wc -l) phases; fences never went back"
awk '{print $2}' "$journal" | uniq -c | sed 's/^/  /'
