#!/usr/bin/env bash
# Catch-up across restarts on a real redis-server or nats-server (issue 15,
# item 2): three
# daemons run two jobs every second, the whole fleet stops for longer than
# the claim TTL, and three daemons start again at once. The seconds no
# daemon was up for are caught up once across the fleet, by the job's
# missed-fire policy: each of them for run-all, the newest once for
# run-once. No fire key is ever run twice, before, during or after.
#
#   catch_up_test.sh FLEETCRON_BINARY redis|nats
set -euo pipefail
binary=$1 backend=$2
name=catch-up bucket=CATCH_UP_CLAIMS   # NATS: the fleet bucket is CATCH_UP_STATE
source "$(dirname "$0")/../support/e2e_fleet.sh"

{
  echo '# fleetcron: key=all missed=run-all'
  echo "* * * * * *  echo \"\$FLEETCRON_FIRE_KEY \$REPLICA\" >> $journal"
  echo '# fleetcron: key=once missed=run-once'
  echo "* * * * * *  echo \"\$FLEETCRON_FIRE_KEY \$REPLICA\" >> $journal"
} >"$work/jobs.cron"

start_fleet() {  # phase
  local r
  for r in 0 1 2; do
    REPLICA=$1-$r "$binary" run --seconds "$work/jobs.cron" --coordinator "$coordinator" \
      --claim-ttl 2s --catch-up 1h --catch-up-beyond-claim-ttl --shutdown-grace 5s >"$work/$1-$r.log" 2>&1 &
    daemon_pids[r]=$!
  done
}
stop_fleet() {
  local pid
  for pid in "${daemon_pids[@]}"; do kill -TERM "$pid"; done
  for pid in "${daemon_pids[@]}"; do wait "$pid" || fail "a daemon exited non-zero on SIGTERM"; done
  daemon_pids=()
}
runs_of() { grep -c "^$1@" "$journal" || true; }
wait_for_runs() {  # job count: bounded by 20 s
  local deadline=$((SECONDS + 20))
  while (($(runs_of "$1") < $2)) && ((SECONDS < deadline)); do sleep 0.1; done
  (($(runs_of "$1") >= $2)) || fail "job $1 ran $(runs_of "$1") times, expected at least $2"
}
instant_s() { date -u -d "$(sed -E 's/^[^@]*@//; s/Z$//; s/T/ /' <<<"$1")Z" +%s; }

start_fleet first
wait_for_runs all 3
stop_fleet
down_since=$(date +%s)   # no daemon runs from here: every second after is the fleet's outage
# The outage: longer than the claim TTL (2 s), so no claim of its fires
# survives and only the cursor can keep them once.
while (($(date +%s) < down_since + 6)); do sleep 0.2; done
up_at=$(date +%s)
runs_before=$(runs_of all)
start_fleet second
# The outage's seconds, caught up, then two on time.
wait_for_runs all $((runs_before + up_at - down_since + 2))
stop_fleet

# No fire key twice, ever.
duplicates=$(awk '{print $1}' "$journal" | sort | uniq -d)
[[ -z $duplicates ]] || fail "fires run twice: $duplicates"
# run-all: every second of the outage ran, once.
missing=0
for ((s = down_since + 1; s < up_at; s++)); do
  key="all@$(date -u -d "@$s" +%Y-%m-%dT%H:%M:%SZ)"
  grep -q "^$key " "$journal" || { echo "missing $key"; missing=$((missing + 1)); }
done
((missing == 0)) || fail "$missing second(s) of the outage were not caught up for run-all"
# run-once: of the outage's seconds, exactly one ran (the newest missed).
once_in_outage=0
while read -r key _; do
  s=$(instant_s "$key")
  ((s > down_since && s < up_at)) && once_in_outage=$((once_in_outage + 1))
done < <(grep '^once@' "$journal")
((once_in_outage <= 1)) || fail "run-once ran $once_in_outage of the outage's seconds"
# Each job's catch-up was decided by one replica of the second fleet.
catch_ups=$(cat "$work"/second-*.log | grep -c 'catch-up.*the fleet missed' || true)
((catch_ups == 2)) || fail "expected one catch-up line per job across the fleet, found $catch_ups"
grep -h 'the fleet missed' "$work"/second-*.log | sed 's/^/  /'
grep -q 'job=once .*policy run-once runs 1,' "$work"/second-*.log || fail "run-once did not run one caught-up fire"
# The ledger agrees with the journal: every fire that ran has its
# succeeded record, nothing else succeeded, and the catch-up's decision is
# one missed record (written once, by the replica that won it).
for job in all once; do
  "$binary" history --coordinator "$coordinator" "$job" -n 10000 >"$work/history-$job" 2>&1 ||
    fail "history $job failed: $(cat "$work/history-$job")"
  diff <(grep "^$job@" "$journal" | awk '{print $1}' | sort) \
    <(awk -v job="$job" '$2 == "succeeded" {print job "@" $1}' "$work/history-$job" | sort) >"$work/history-diff" ||
    fail "history of $job disagrees with the journal: $(head -n 20 "$work/history-diff")"
done
grep -q ' missed .*run-once: 1 of .* queued (catch-up)' "$work/history-once" ||
  fail "no catch-up missed record for once: $(grep missed "$work/history-once" || true)"
missed_records=$(grep -c ' missed ' "$work/history-once" || true)
((missed_records == 1)) || fail "expected one missed record for once, found $missed_records"
"$binary" history --coordinator "$coordinator" once -n 1 --json | grep '^{"job":"once","records":\[{"job":"once",' >/dev/null ||
  fail "history --json is not the documented document"
ledger="$(grep -c ' succeeded ' "$work/history-all") + $(grep -c ' succeeded ' "$work/history-once") succeeded records"
cursor="(in $backend)"
if [[ $backend == redis ]]; then
  cursor=$(redis-cli -u "$FLEETCRON_TEST_REDIS_URL" GET 'cron:fleet:cursor:{all}')
  [[ -n $cursor ]] || fail "no cursor under cron:fleet:cursor:{all}"
fi
echo "ok ($backend): outage of $((up_at - down_since - 1)) s caught up: run-all every second once, run-once $once_in_outage; $(wc -l <"$journal") runs, no duplicates; ledger: $ledger, as the journal; cursor $cursor"
