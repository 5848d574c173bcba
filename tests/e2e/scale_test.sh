#!/usr/bin/env bash
# A fleet of 100,000 jobs on a real server (issue 36): one daemon runs them
# (99,999 on New Year's Day at midnight, one failing every second) with
# --job-metrics failing. Checks, and prints the times of:
#   - validate, and the daemon's start (its `started` line) and memory;
#   - `status`: a summary, not 100,000 jobs; --prefix lists 10; --failing
#     reads every job's ledger and names the failing one;
#   - the API: a page of 1,000 of the 100,000, its `next`, and the failing
#     job found by walking state=failing;
#   - /metrics: the failing job's series alone, a few KB.
#
#   scale_test.sh FLEETCRON_BINARY redis|nats|postgres
set -euo pipefail
binary=$1 backend=$2
name=scale bucket=SCALE_CLAIMS   # NATS: the fleet bucket is SCALE_STATE
source "$(dirname "$0")/../support/e2e_fleet.sh"

python3 -c '
import sys
with open(sys.argv[1], "w") as f:
    for i in range(99999):
        f.write(f"# fleetcron: key=customer-{i:06}\n0 0 0 1 1 * true\n")
    f.write("# fleetcron: key=customer-099999\n* * * * * * echo out of quota >&2; exit 3\n")' "$work/jobs.cron"
ms_since() { echo $((($(date +%s%N) - $1) / 1000000)); }

started=$(date +%s%N)
"$binary" validate --seconds -n 1 "$work/jobs.cron" >"$work/validate.out" || fail "validate: $(tail -3 "$work/validate.out")"
echo "validate: $(ms_since "$started") ms"
grep -q '100000 job(s)' "$work/validate.out" || fail "validate does not count 100000 jobs: $(grep 'job(s)' "$work/validate.out")"

port=$(pick_port)
started=$(date +%s%N)
"$binary" run --seconds "$work/jobs.cron" --coordinator "$coordinator" --replica-id scale-0 --log-format json \
  --http "127.0.0.1:$port" --job-metrics failing --output-dir none --shutdown-grace 2s >"$work/daemon.log" 2>&1 &
daemon_pids+=($!)
started_line() { grep -q '"event":"started"' "$work/daemon.log"; }
wait_up_to 60 "the daemon of 100,000 jobs to start" started_line
echo "start: $(ms_since "$started") ms, resident $(awk '/VmRSS/ {print $2}' "/proc/${daemon_pids[0]}/status") KB"

status() { "$binary" status --coordinator "$coordinator" "$@"; }
# The job under "jobs (1):" (Redis lists it among the last hour's claims too).
failing_listed() {
  status --failing >"$work/failing.out" 2>&1 && grep -A1 '^jobs (1):$' "$work/failing.out" | grep -q '^  customer-099999 '
}
started=$(date +%s%N)
wait_up_to 90 "status --failing to name customer-099999" failing_listed
echo "status --failing (100,000 ledger reads): about $(ms_since "$started") ms"
grep -qE '^    last run .* failed on scale-0 .*exit 3$' "$work/failing.out" || fail "no failed last run: $(cat "$work/failing.out")"

started=$(date +%s%N)
status >"$work/summary.out"
echo "status (summary): $(ms_since "$started") ms"
grep -q '^jobs (100000): more than 50, summarised' "$work/summary.out" || fail "no summary: $(grep '^jobs' "$work/summary.out")"
grep -q '^  scope         100000 fleet-wide, 0 on every replica$' "$work/summary.out" || fail "summary: $(cat "$work/summary.out")"
(($(wc -l <"$work/summary.out") < 40)) || fail "the summary has $(wc -l <"$work/summary.out") lines"
status --prefix customer-04217 >"$work/prefix.out"
grep -q '^jobs (10):$' "$work/prefix.out" || fail "status --prefix: $(grep '^jobs' "$work/prefix.out")"
(($(grep -c '^  customer-04217[0-9]  "0 0 0 1 1 \*" UTC$' "$work/prefix.out") == 10)) || fail "status --prefix lists: $(grep '^  customer' "$work/prefix.out")"

api() { curl -sf "http://127.0.0.1:$port/api/v1/$1"; }
started=$(date +%s%N)
api 'jobs?limit=1000' >"$work/page.json"
echo "API, a page of 1,000: $(ms_since "$started") ms, $(wc -c <"$work/page.json") bytes"
[[ $(jq '.jobs | length' "$work/page.json") == 1000 && $(jq .total "$work/page.json") == 100000 &&
   $(jq -r .next "$work/page.json") == customer-000999 ]] || fail "the API's page: $(jq -c '{n: (.jobs|length), total, next}' "$work/page.json")"
after= found= requests=0
started=$(date +%s%N)
while :; do
  api "jobs?state=failing${after:+&after=$after}" >"$work/failing.json"
  requests=$((requests + 1))
  found+=$(jq -r '.jobs[].job' "$work/failing.json")
  after=$(jq -r '.next // empty' "$work/failing.json")
  [[ -n $after ]] || break
done
echo "API, state=failing over 100,000 jobs: $requests requests, $(ms_since "$started") ms"
[[ $found == customer-099999 && $requests == 50 ]] || fail "state=failing found '$found' in $requests requests"

metrics_with_job() { curl -sf "http://127.0.0.1:$port/metrics" >"$work/metrics.txt" && grep -q 'fleetcron_job_last_outcome{job="customer-099999",outcome="failed"} 1' "$work/metrics.txt"; }
wait_up_to 30 "the failing job's series in /metrics" metrics_with_job
size=$(wc -c <"$work/metrics.txt")
echo "/metrics with --job-metrics failing: $size bytes"
((size < 65536)) || fail "/metrics takes $size bytes"
! grep -q 'job="customer-000000"' "$work/metrics.txt" || fail "/metrics has a series of a job that does not fail"
echo "scale test ($backend) passed"
