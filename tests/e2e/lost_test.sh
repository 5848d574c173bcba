#!/usr/bin/env bash
# Lost runs on a real redis-server or nats-server (issue 15, item 4): three
# daemons run `long` (sleep 300, recover=rerun) every 5 s. The replica
# running the first fire is killed with SIGKILL in the middle of it; within
# its record's life (15 s) plus one heartbeat (5 s) exactly one surviving
# replica reports that fire lost (a fire-lost log line), and runs it again
# once, with a new fence and FLEETCRON_RECOVERED_FENCE set to the lost
# run's; the ledger holds the killed run as lost until the re-run ends.
#
#   lost_test.sh FLEETCRON_BINARY redis|nats
set -euo pipefail
binary=$1 backend=$2
name=lost bucket=LOST_CLAIMS   # NATS: the fleet bucket is LOST_STATE
marker="sleep 300.$$"   # a unique command line: the killed replica's job lives on
e2e_cleanup() { pkill -KILL -f "$marker"; }
source "$(dirname "$0")/../support/e2e_fleet.sh"

{
  echo '# fleetcron: key=long recover=rerun overlap=allow'
  echo "*/5 * * * * *  echo \"\$FLEETCRON_FIRE_KEY \$REPLICA \${FLEETCRON_RECOVERED_FENCE:--} \$FLEETCRON_FENCE\" >> $journal; $marker"
} >"$work/jobs.cron"
for r in 0 1 2; do
  REPLICA=$r "$binary" run --seconds "$work/jobs.cron" --coordinator "$coordinator" --claim-ttl 5s \
    --metrics "127.0.0.1:0" >"$work/replica-$r.log" 2>&1 &
  daemon_pids[$r]=$!
done
started() { [[ -s $journal ]]; }
wait_up_to 20 "the first run of long" started
read -r fire_key runner _ lost_fence <"$journal"
sleep 2   # listed in the runner's record within a second of its start
killed_pid=${daemon_pids[$runner]}
kill -KILL "$killed_pid"
wait "$killed_pid" 2>/dev/null || true
killed_at=$SECONDS
reports() { cat "$work"/replica-*.log | grep -c "fire-lost.*fire $fire_key: its runner" || true; }
reported() { (($(reports) >= 1)); }
wait_up_to 30 "a survivor to report $fire_key lost" reported
took=$((SECONDS - killed_at))
sleep 6   # one more heartbeat of every survivor: nobody reports it again
(($(reports) == 1)) || fail "$(reports) reports of $fire_key lost"
all_reports=$(cat "$work"/replica-*.log | grep -c 'fire-lost' || true)
((all_reports == 1)) || fail "$all_reports fires reported lost, of which only $fire_key was: $(grep -h fire-lost "$work"/replica-*.log | head -3)"
record=$("$binary" history long --coordinator "$coordinator" -n 1000 --json |
  jq -c --arg key "$fire_key" '.records[] | select(.fire_key == $key)')
jq -e --arg pid "-$killed_pid-" --argjson fence "$lost_fence" \
  '.fate == "lost" and (.replica | contains($pid)) and .fence == $fence' <<<"$record" >/dev/null ||
  fail "the ledger's record of $fire_key: $record (lost fence $lost_fence)"
reruns=$(awk -v key="$fire_key" -v fence="$lost_fence" '$1 == key && $3 == fence' "$journal")
(($(wc -l <<<"$reruns") == 1)) && [[ -n $reruns ]] || fail "re-runs of $fire_key: '$reruns'"
read -r _ rerun_by _ rerun_fence <<<"$reruns"
((rerun_by != runner && rerun_fence > lost_fence)) || fail "the re-run: $reruns (lost: $runner, fence $lost_fence)"
(($(awk -v key="$fire_key" '$1 == key' "$journal" | wc -l) == 2)) || fail "$fire_key ran other than twice"
echo "ok ($backend): $fire_key, run by replica $runner (pid $killed_pid, fence $lost_fence) and killed, reported lost" \
  "once after ${took}s (bound 20 s + the survivors' announcement) and run again once by replica $rerun_by with fence" \
  "$rerun_fence and FLEETCRON_RECOVERED_FENCE=$lost_fence"
