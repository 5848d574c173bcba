#!/usr/bin/env bash
# Fleet-wide controls on a real redis-server or nats-server (issue 15,
# item 6): three daemons run `held` and `tick` every second. `fleetcron
# pause held` stops held on every replica, a replica restarted meanwhile
# starts with it paused, `fleetcron trigger held` runs it once across the
# fleet (paused or not), and `fleetcron resume held` brings it back. No
# fire key ever runs twice; the ledger shows the triggered run. A control
# or history of a job the fleet does not know is refused (exit 2).
#
#   controls_test.sh FLEETCRON_BINARY redis|nats
set -euo pipefail
binary=$1 backend=$2
name=controls bucket=CONTROLS_CLAIMS   # NATS: the fleet bucket is CONTROLS_STATE
source "$(dirname "$0")/../support/e2e_fleet.sh"

{
  echo '# fleetcron: key=held'
  echo "* * * * * *  echo \"\$FLEETCRON_FIRE_KEY \$REPLICA\" >> $journal"
  echo '# fleetcron: key=tick'
  echo "* * * * * *  echo \"\$FLEETCRON_FIRE_KEY \$REPLICA\" >> $journal"
} >"$work/jobs.cron"

start_replica() {  # index generation
  REPLICA=$1-$2 "$binary" run --seconds "$work/jobs.cron" --coordinator "$coordinator" --claim-ttl 5s \
    --shutdown-grace 5s >"$work/replica-$1-$2.log" 2>&1 &
  daemon_pids[$1]=$!
}
control() { "$binary" "$@" --coordinator "$coordinator"; }
runs_of() { grep -c "^$1@" "$journal" || true; }
at_least() { (($(runs_of "$1") >= $2)); }
logged_by_all() {  # pattern: every running replica's log has it
  local r
  for r in 0 1 2; do grep -q "$1" "$work"/replica-$r-*.log || return 1; done
}
# Waits for `tick` to run `n` more times: the fleet has scheduled past
# whatever was in flight.
tick_on() { local target=$(($(runs_of tick) + $1)); wait_until "tick to run $1 more times" at_least tick "$target"; }

# A configuration the store refuses for good (a password, a database) is
# a start that fails at once, exit 2, not a daemon skipping every fire.
refused=
case $backend in
  redis) refused=${coordinator/redis:\/\//redis://:wrong-password@} ;;
  postgres) refused=${coordinator%/*}/no_such_database ;;
esac
if [[ -n $refused ]]; then
  status=0
  timeout 30 "$binary" run --seconds "$work/jobs.cron" --coordinator "$refused" >"$work/refused.out" 2>&1 || status=$?
  ((status == 2)) || fail "a refused configuration exited $status: $(tail -3 "$work/refused.out")"
  grep -q 'store-refused.*not an outage' "$work/refused.out" || fail "no store-refused line: $(tail -3 "$work/refused.out")"
fi

for r in 0 1 2; do start_replica $r 1; done
wait_until "held to run twice" at_least held 2

# A typo is refused with the keys meant, and creates no phantom job.
for action in trigger pause history; do
  if out=$(control "$action" helt 2>&1); then fail "$action of an unknown job exited 0: $out"; fi
  [[ $out == *'no job "helt" in the fleet'*'the nearest: "held", "tick"'* ]] || fail "$action helt: $out"
done
[[ $out != *--force* ]] || fail "history offers --force: $out"
if control status | grep -q helt; then fail "a refused control left a phantom job: $(control status)"; fi

answer=$(control pause held --json)
[[ $answer == '{"job":"held","action":"pause","changed":true}' ]] || fail "pause answered $answer"
[[ $(control pause held) == 'job "held": already paused' ]] || fail "a second pause changed something"
wait_until "every replica to pause held" logged_by_all 'entry "held": paused fleet-wide by cli@'
tick_on 1
held_paused=$(runs_of held)
tick_on 3
(($(runs_of held) == held_paused)) || fail "held ran while paused: $held_paused then $(runs_of held)"

# A replica restarted while the job is paused starts with it paused.
kill -TERM "${daemon_pids[1]}"
wait "${daemon_pids[1]}" || fail "replica 1 exited non-zero on SIGTERM"
start_replica 1 2
wait_until "the restarted replica to read the pause" grep -q 'entry "held": paused fleet-wide' "$work/replica-1-2.log"
tick_on 3
(($(runs_of held) == held_paused)) || fail "held ran after a restart while paused"

# A trigger runs once across the fleet, paused or not; sent again with its
# request id (a retry), it runs nothing more.
answer=$(control trigger held --request-id "e2e-$$" --json)
trigger_id=$(sed -nE 's/.*"trigger_id":"([0-9a-f]{16})".*/\1/p' <<<"$answer")
[[ -n $trigger_id ]] || fail "trigger answered $answer"
wait_until "the trigger to run" at_least held $((held_paused + 1))
tick_on 2
retried=$(control trigger held --request-id "e2e-$$" --json)
[[ $retried == *'"changed":false'*"\"trigger_id\":\"$trigger_id\""* ]] || fail "the retry was not known as taken: $retried"
tick_on 3
(($(runs_of held) == held_paused + 1)) || fail "the trigger ran $(($(runs_of held) - held_paused)) times"
takers=$(cat "$work"/replica-*.log | grep -c "trigger $trigger_id by cli@.* taken" || true)
((takers == 1)) || fail "$takers replicas took trigger $trigger_id"
control history held -n 100 | grep ' succeeded  manual ' >/dev/null || fail "the ledger has no manual run of held"

answer=$(control resume held --json)
[[ $answer == '{"job":"held","action":"resume","changed":true}' ]] || fail "resume answered $answer"
wait_until "held to run again" at_least held $((held_paused + 3))

duplicates=$(awk '{print $1}' "$journal" | sort | uniq -d)
[[ -z $duplicates ]] || fail "fires run twice: $duplicates"
echo "ok ($backend): pause held on 3 replicas and across a restart, $(runs_of tick) tick runs meanwhile; trigger $trigger_id ran once; resumed; $(wc -l <"$journal") runs, no duplicates"
