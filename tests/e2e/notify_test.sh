#!/usr/bin/env bash
# Notifications once per fire across a fleet of three daemons on a real
# redis-server or nats-server: a job failing every second has on-failure=
# (a command), notify= (a webhook) and ping= (healthchecks.io pings); a job
# succeeding every second has ping=. A loopback HTTP receiver records what
# arrives, and its first answers are errors, so retries are exercised.
# Every failed run gives exactly one command, one webhook POST of its
# record and one /start and one /fail ping; every success /start and URL.
#
#   notify_test.sh FLEETCRON_BINARY redis|nats
set -euo pipefail
binary=$1 backend=$2
name=notify bucket=NOTIFY_CLAIMS
source "$(dirname "$0")/../support/e2e_fleet.sh"
receiver_pid=
e2e_cleanup() { [[ -n $receiver_pid ]] && kill "$receiver_pid" 2>/dev/null; return 0; }
python3 "$root/tests/support/http_receiver.py" "$work/receiver.port" "$work/received" --fail-first 3 &
receiver_pid=$!
wait_until "the receiver to listen" test -s "$work/receiver.port"
url="http://127.0.0.1:$(cat "$work/receiver.port")"
notes=$work/notes
{
  echo "# fleetcron: key=fails notify=$url/hook ping=$url/ping/fails on-failure='echo \"\$FLEETCRON_FIRE_KEY \$FLEETCRON_OUTCOME \$FLEETCRON_EXIT_STATUS \$FLEETCRON_REPLICA\" >> $notes'"
  echo '* * * * * *  echo "disk full"; exit 3'
  echo "# fleetcron: key=ok ping=$url/ping/ok"
  echo "* * * * * *  echo \"\$FLEETCRON_FIRE_KEY \$REPLICA\" >> $journal"
} >"$work/jobs.cron"
"$binary" validate --seconds "$work/jobs.cron" >/dev/null || fail "the jobs file does not validate"
for r in 0 1 2; do
  REPLICA=$r "$binary" run --seconds "$work/jobs.cron" --coordinator "$coordinator" --claim-ttl 10s \
    --shutdown-grace 3s >"$work/replica-$r.log" 2>&1 &
  daemon_pids[$r]=$!
done
enough() { (($(grep -c . "$journal") >= 8)); }
wait_up_to 40 "8 runs of ok" enough
for r in 0 1 2; do kill -TERM "${daemon_pids[$r]}"; done
for r in 0 1 2; do wait "${daemon_pids[$r]}" || fail "replica $r exited non-zero"; done

failed=$(grep -h 'run-finished job=fails' "$work"/replica-*.log | grep -c ' failed: exit 3' || true)
succeeded=$(grep -h 'run-finished job=ok' "$work"/replica-*.log | grep -c ' succeeded' || true)
((failed >= 3 && succeeded >= 8)) || fail "too few runs: $failed failed, $succeeded succeeded"
delivered() { jq -r "select(.answered == 200 and .path == \"$1\") | .path" "$work/received" | wc -l; }
hook_keys=$(jq -r 'select(.answered == 200 and .path == "/hook") | .body | fromjson | .record.fire_key' "$work/received" | sort)
unique_hooks=$(sort -u <<<"$hook_keys" | grep -c . || true)
[[ $(grep -c . <<<"$hook_keys") == "$unique_hooks" ]] || fail "a webhook came twice for one fire: $(uniq -d <<<"$hook_keys")"
((unique_hooks == failed)) || fail "$failed failed runs but $unique_hooks webhooks"
event=$(jq -r 'select(.path == "/hook") | .body | fromjson | "\(.event) \(.record.fate) \(.record.exit_status) \(.record.output_tail)"' "$work/received" | head -1)
[[ $event == "failed failed 3 disk full" ]] || fail "webhook body: $event"
notes_keys=$(awk '{print $1}' "$notes" | sort)
[[ $(sort -u <<<"$notes_keys" | grep -c .) == "$failed" && $(grep -c . <<<"$notes_keys") == "$failed" ]] ||
  fail "$failed failed runs but on-failure ran for: $(tr '\n' ' ' <<<"$notes_keys")"
awk '$2 != "failed" || $3 != 3 {bad = 1} END {exit bad}' "$notes" || fail "on-failure variables: $(head -3 "$notes")"
[[ $(delivered /ping/fails/fail) == "$failed" && $(delivered /ping/fails/start) == "$failed" ]] ||
  fail "pings of fails: $(delivered /ping/fails/start) start, $(delivered /ping/fails/fail) fail for $failed runs"
[[ $(delivered /ping/ok) == "$succeeded" && $(delivered /ping/ok/start) == "$succeeded" ]] ||
  fail "pings of ok: $(delivered /ping/ok/start) start, $(delivered /ping/ok) success for $succeeded runs"
retried=$(jq -r 'select(.answered == 500) | .path' "$work/received" | wc -l)
((retried == 3)) || fail "the receiver refused $retried requests, expected 3 (each then retried)"
if grep -h 'notify-failed\|notify-dropped' "$work"/replica-*.log; then fail "a notification was not delivered"; fi
echo "ok: $failed failed runs, each one on-failure command, one webhook and /start + /fail pings; $succeeded successes pinged; 3 refused deliveries retried"
