#!/usr/bin/env bash
# The status page in a real browser: three daemons on a real redis-server
# (or nats-server) serve it; headless Chromium from Debian, driven through
# chromedriver (WebDriver, over the DevTools protocol), checks that the
# page shows the jobs and runs the journal says ran, presses trigger and
# sees the run appear, pauses and resumes. Screenshots go to OUT_DIR.
#
#   status_page_test.sh FLEETCRON_BINARY redis|nats OUT_DIR
set -euo pipefail
binary=$1 backend=$2 out_dir=$3
name=browser bucket=BROWSER_CLAIMS
source "$(dirname "$0")/../support/e2e_fleet.sh"
mkdir -p "$out_dir"
chromium=$(command -v chromium) || fail "chromium is not installed (scripts/deps.sh installs it)"
chromedriver=$(command -v chromedriver) || fail "chromedriver is not installed (package chromium-driver)"
driver_pid=
e2e_cleanup() { [[ -n $driver_pid ]] && kill "$driver_pid" 2>/dev/null; return 0; }

{
  echo '# fleetcron: key=tick'
  echo "* * * * * *  echo \"\$FLEETCRON_FIRE_KEY \$REPLICA\" >> $journal"
  echo '# fleetcron: key=fails'
  # A long last line, as real errors have: the page must still fit 1280 px.
  echo '*/2 * * * * *  echo "disk full: /var/lib/fleetcron-browser-test/a/very/long/path/that/goes/on/and/on/for/a/while/before/it/ends/with/the/file/name/that/could/not/be/written/because/the/disk/is/full/report-2026-12-06.csv" >&2; exit 3'
  echo '# fleetcron: key=manual'
  echo "0 0 0 1 1 *  echo \"\$FLEETCRON_FIRE_KEY \$REPLICA\" >> $journal"   # New Year only: runs when triggered
  echo '# fleetcron: key=busy overlap=skip'
  echo "* * * * * *  echo \"\$FLEETCRON_FIRE_KEY \$REPLICA\" >> $journal; sleep 3"   # most fires skipped: no duration
  echo '# fleetcron: key=tokyo'
  echo "TZ=Asia/Tokyo 0 0 9 * * *  echo \"\$FLEETCRON_FIRE_KEY \$REPLICA\" >> $journal"   # times shown in Tokyo's zone
} >"$work/jobs.cron"
# Replica 2 runs one job more (a deploy under way): the page names it; the
# check then drops that job from its file and reloads it (SIGHUP).
cp "$work/jobs.cron" "$work/jobs-2.cron"
printf '# fleetcron: key=extra\n0 0 0 1 1 *  echo "$FLEETCRON_FIRE_KEY" >> %s\n' "$journal" >>"$work/jobs-2.cron"
printf 'browser-test-token\n' >"$work/token"
ports=()
for r in 0 1 2; do
  ports[$r]=$(pick_port)
  jobs_file=$work/jobs.cron
  ((r == 2)) && jobs_file=$work/jobs-2.cron
  REPLICA=$r "$binary" run --seconds "$jobs_file" --replica-id "browser-$r" --coordinator "$coordinator" --coordination both --claim-ttl 10s \
    --http "127.0.0.1:${ports[$r]}" --api-token-file "$work/token" --shutdown-grace 2s >"$work/replica-$r.log" 2>&1 &
  daemon_pids[$r]=$!
done
has_runs() { (($(grep -c '^tick@' "$journal") >= 8)); }
wait_until "the fleet to run tick 8 times" has_runs
page_answers() { curl -sf "http://127.0.0.1:${ports[0]}/" | grep -q '<title>fleetcron</title>'; }
wait_until "the page to be served" page_answers

status_uri=$coordinator
leader_known() { [[ $("$binary" status --coordinator "$status_uri" --json | jq -r '.leader.holder // empty') != "" ]]; }
wait_until "a leader in the store" leader_known
store_leader=$("$binary" status --coordinator "$status_uri" --json | jq -r '.leader.holder')
# `status` names the replica with another jobs file too.
other_jobs_named() { "$binary" status --coordinator "$status_uri" | grep -qE '^  browser-2 .*\(OTHER jobs than 2 replica\(s\)\)$'; }
wait_until "status to name browser-2's other jobs" other_jobs_named
driver_port=$(pick_port)
"$chromedriver" --port="$driver_port" --allowed-ips=127.0.0.1 >"$work/chromedriver.log" 2>&1 &
driver_pid=$!
driver_up() { curl -sf "http://127.0.0.1:$driver_port/status" | grep -q '"ready": *true'; }
wait_until "chromedriver to answer" driver_up
python3 "$root/tests/browser/status_page_check.py" "http://127.0.0.1:$driver_port" "$chromium" \
  "http://127.0.0.1:${ports[0]}/" "$journal" browser-test-token "$out_dir" "$store_leader" \
  "$work/jobs-2.cron" "${daemon_pids[2]}" || fail "the page checks failed"
# After browser-2's reload dropped "extra": `status` says it was removed, and by whom.
"$binary" status --coordinator "$status_uri" | grep -qE '^  extra .*REMOVED from the jobs of browser-2 at ' ||
  fail "status does not show extra removed: $("$binary" status --coordinator "$status_uri" | grep -A2 '^  extra')"
[[ $("$binary" status --coordinator "$status_uri" --json | jq -r '.jobs[] | select(.job == "extra") | .removed_by') == browser-2 ]] ||
  fail "status --json lacks extra's removed_by"

# 100,000 jobs (one daemon, the memory coordinator): the page shows a page
# of them, counts them all, searches and turns pages.
python3 -c '
import sys
with open(sys.argv[1], "w") as f:
    for i in range(100000):
        f.write(f"# fleetcron: key=customer-{i:06}\n0 0 1 1 * true\n")' "$work/many.cron"
many_port=$(pick_port)
"$binary" run "$work/many.cron" --replica-id browser-many --http "127.0.0.1:$many_port" --output-dir none \
  --job-metrics none --shutdown-grace 2s >"$work/many.log" 2>&1 &
daemon_pids+=($!)
many_listed() { [[ $(curl -sf "http://127.0.0.1:$many_port/api/v1/jobs?limit=1" | jq -r .total) == 100000 ]]; }
wait_up_to 60 "the daemon of 100,000 jobs to list them" many_listed
python3 "$root/tests/browser/status_page_scale_check.py" "http://127.0.0.1:$driver_port" "$chromium" \
  "http://127.0.0.1:$many_port/" 100000 || fail "the page checks at 100,000 jobs failed"
echo "screenshots: $out_dir/status_page.png, $out_dir/status_page_after_trigger.png, $out_dir/status_page_phone.png"
