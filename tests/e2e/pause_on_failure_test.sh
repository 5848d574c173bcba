#!/usr/bin/env bash
# Pause on failure on a real store: three daemons run `flaky` and `tick`
# every second; flaky has pause-on-failure=yes and fails once a marker
# file exists. Its first failing run pauses it for the whole fleet: every
# replica logs the pause by on-failure@REPLICA, flaky runs no more while
# tick goes on, `status` names who paused it, and the failure's on-failure
# command was told the job is paused (FLEETCRON_JOB_PAUSED=1). `fleetcron
# resume flaky` runs it again; no fire key runs twice.
#
#   pause_on_failure_test.sh FLEETCRON_BINARY redis|nats|postgres
set -euo pipefail
binary=$1 backend=$2
name=pause_on_failure bucket=PAUSE_ON_FAILURE_CLAIMS
source "$(dirname "$0")/../support/e2e_fleet.sh"

broken=$work/broken notified=$work/notified
cat >"$work/jobs.cron" <<EOF
# fleetcron: key=flaky pause-on-failure=yes on-failure='echo "\$FLEETCRON_FIRE_KEY \$FLEETCRON_JOB_PAUSED" >> $notified'
* * * * * *  echo "\$FLEETCRON_FIRE_KEY \$REPLICA" >> $journal; test ! -e $broken
# fleetcron: key=tick
* * * * * *  echo "\$FLEETCRON_FIRE_KEY \$REPLICA" >> $journal
EOF

for r in 0 1 2; do
  REPLICA=$r "$binary" run --seconds "$work/jobs.cron" --coordinator "$coordinator" --claim-ttl 5s \
    --shutdown-grace 5s >"$work/replica-$r.log" 2>&1 &
  daemon_pids[$r]=$!
done
control() { "$binary" "$@" --coordinator "$coordinator"; }
runs_of() { grep -c "^$1@" "$journal" || true; }
at_least() { (($(runs_of "$1") >= $2)); }
logged_by_all() {  # pattern: every replica's log has it
  local r
  for r in 0 1 2; do grep -q "$1" "$work/replica-$r.log" || return 1; done
}
tick_on() { local target=$(($(runs_of tick) + $1)); wait_until "tick to run $1 more times" at_least tick "$target"; }
lines_of() { if [[ -e $1 ]]; then wc -l <"$1"; else echo 0; fi; }

wait_until "flaky to run twice" at_least flaky 2
[[ $(lines_of "$notified") == 0 ]] || fail "a success was notified: $(cat "$notified")"
touch "$broken"
wait_until "every replica to apply the pause" logged_by_all 'entry "flaky": paused fleet-wide by on-failure@'
grep -q 'entry "flaky": paused here, and the fleet-wide pause is being written, after its run flaky@.* failed (pause-on-failure)' "$work"/replica-*.log ||
  fail "no replica logged the pause it made"
tick_on 1
paused_at=$(runs_of flaky)
tick_on 3
(($(runs_of flaky) == paused_at)) || fail "flaky ran while paused: $paused_at then $(runs_of flaky)"
status_text=$(control status)
grep -q 'paused *yes, by on-failure@' <<<"$status_text" || fail "status does not say who paused flaky: $status_text"
# Each failed run was notified once (one on each replica that ran one
# before it saw the pause), each saying the job is paused; no success was.
failed_runs=$(cat "$work"/replica-*.log | grep -c 'run-finished.*flaky@.*the job is paused (pause-on-failure)' || true)
((failed_runs >= 1)) || fail "no run-finished line says the job is paused"
notified_all() { (($(lines_of "$notified") >= failed_runs)); }
wait_until "$failed_runs failure notification(s)" notified_all
(($(lines_of "$notified") == failed_runs)) || fail "$failed_runs failed runs, notified: $(cat "$notified")"
if grep -qv ' 1$' "$notified"; then fail "a notification did not say the job is paused: $(cat "$notified")"; fi

rm -f "$broken"
answer=$(control resume flaky --json)
[[ $answer == '{"job":"flaky","action":"resume","changed":true}' ]] || fail "resume answered $answer"
wait_until "flaky to run again" at_least flaky $((paused_at + 2))
notified_after=$(lines_of "$notified")
tick_on 2
(($(lines_of "$notified") == notified_after)) || fail "a success after the resume was notified"

duplicates=$(awk '{print $1}' "$journal" | sort | uniq -d)
[[ -z $duplicates ]] || fail "fires run twice: $duplicates"
echo "ok ($backend): flaky paused fleet-wide by its failure after $paused_at runs, $(lines_of "$notified") failure(s) notified; resumed; $(wc -l <"$journal") runs, no duplicates"
