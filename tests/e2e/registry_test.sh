#!/usr/bin/env bash
# The replica registry on a real redis-server or nats-server (issue 15,
# item 5): two daemons with --claim-ttl 5s run `tick` every second; a third
# started with --claim-ttl 7s (Redis) or --max-clock-skew 1s (NATS, whose
# claim bucket already refuses another TTL at start, checked too) refuses
# to claim and says which setting differs, while the fleet runs on. Once the first two stop (cleanly, so
# their records go at once), its settings are the fleet's and it runs tick.
# No fire key ever runs twice.
#
#   registry_test.sh FLEETCRON_BINARY redis|nats
set -euo pipefail
binary=$1 backend=$2
name=registry bucket=REGISTRY_CLAIMS   # NATS: the fleet bucket is REGISTRY_STATE
source "$(dirname "$0")/../support/e2e_fleet.sh"

{
  echo '# fleetcron: key=tick'
  echo "* * * * * *  echo \"\$FLEETCRON_FIRE_KEY \$REPLICA\" >> $journal"
} >"$work/jobs.cron"

start_replica() {  # index claim-ttl [flag value]
  REPLICA=$1 "$binary" run --seconds "$work/jobs.cron" --coordinator "$coordinator" --claim-ttl "$2" "${@:3}" \
    --shutdown-grace 5s >"$work/replica-$1.log" 2>&1 &
  daemon_pids[$1]=$!
}
runs_by() { grep -c " $1\$" "$journal" || true; }
lines() { wc -l <"$journal"; }
at_least() { (($(lines) >= $1)); }
ran_by_2() { (($(runs_by 2) >= 2)); }

start_replica 0 5s
start_replica 1 5s
wait_until "tick to run twice" at_least 2
if [[ $backend != nats ]]; then
  start_replica 2 7s
  refusal='claim_ttl is 7s here, 5s in the fleet'
else
  if "$binary" run --seconds "$work/jobs.cron" --coordinator "$coordinator" --claim-ttl 7s >"$work/other-ttl.out" 2>&1; then
    fail "a NATS replica with another claim TTL started"
  fi
  grep -q 'bucket REGISTRY_CLAIMS exists with TTL 5s' "$work/other-ttl.out" || fail "no bucket message: $(cat "$work/other-ttl.out")"
  start_replica 2 5s --max-clock-skew 1s
  refusal='max_clock_skew is 1s here, 1.25s in the fleet'
fi
wait_until "replica 2 to refuse" grep -q "$refusal" "$work/replica-2.log"
from=$(lines)
wait_until "tick to run 5 more times" at_least $((from + 5))
(($(runs_by 2) == 0)) || fail "replica 2 ran tick $(runs_by 2) times with another claim TTL"
grep -q 'fleet-settings' "$work/replica-2.log" || fail "replica 2 logged no fleet-settings skip"

# The fleet's replicas stop cleanly: their records go, replica 2's settings
# become the fleet's at its next announcement (within 5 s), and it runs tick.
for r in 0 1; do kill -TERM "${daemon_pids[$r]}"; done
for r in 0 1; do wait "${daemon_pids[$r]}" || fail "replica $r exited non-zero on SIGTERM"; done
wait_until "replica 2 to be accepted" grep -q "settings are the fleet's" "$work/replica-2.log"
wait_until "replica 2 to run tick" ran_by_2

# A replica named with --replica-id is listed, and leaves its name in the
# ledger; a second live daemon given the same name refuses to start (exit 2).
same_as_2=(--claim-ttl 7s)  # replica 2's settings, now the fleet's
[[ $backend == nats ]] && same_as_2=(--claim-ttl 5s --max-clock-skew 1s)
REPLICA=named "$binary" run --seconds "$work/jobs.cron" --coordinator "$coordinator" "${same_as_2[@]}" \
  --replica-id web-1 --shutdown-grace 5s >"$work/replica-named.log" 2>&1 &
daemon_pids[3]=$!
listed_as_web_1() { "$binary" status --coordinator "$coordinator" --json | jq -e '[.replicas[].id] | index("web-1")' >/dev/null; }
wait_until "web-1 to be listed" listed_as_web_1
ran_on_web_1() { "$binary" history tick -n 50 --coordinator "$coordinator" | grep -qE 'succeeded +on web-1 '; }
wait_until "a run on web-1 in the ledger" ran_on_web_1
status=0
timeout 60 "$binary" run --seconds "$work/jobs.cron" --coordinator "$coordinator" "${same_as_2[@]}" --replica-id web-1 \
  >"$work/replica-twin.log" 2>&1 || status=$?
((status == 2)) || fail "a second web-1 exited $status"
grep -q 'replica id web-1 is in use by a live replica' "$work/replica-twin.log" || fail "no in-use line: $(tail -2 "$work/replica-twin.log")"
kill -TERM "${daemon_pids[3]}"
wait "${daemon_pids[3]}" || fail "web-1 exited non-zero on SIGTERM"

duplicates=$(awk '{print $1}' "$journal" | sort | uniq -d)
[[ -z $duplicates ]] || fail "fires run twice: $duplicates"
echo "ok ($backend): a replica with other settings refused while the 5s fleet ran $((from + 5 - 2)) ticks; accepted after" \
  "the fleet stopped; --replica-id web-1 listed and in the ledger, its twin refused; $(lines) runs, no duplicates"
