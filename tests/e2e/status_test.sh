#!/usr/bin/env bash
# `fleetcron status` and `history` over the fleet state, on a real
# redis-server or nats-server (issue 15, item 7): three daemons run `tick`
# every second and `nightly` at 03:00, and nightly is paused. While they
# run, status lists the three replicas, accepted, and each job's spec,
# next fire and pause; once they stopped (cleanly), it lists none, and its
# last run and last success of tick, and history's runs of tick, are
# exactly what the journal of the commands says ran; zz-brief's history=2
# bounds its own ledger to its newest 2 records.
#
#   status_test.sh FLEETCRON_BINARY redis|nats
set -euo pipefail
binary=$1 backend=$2
name=status bucket=STATUS_CLAIMS   # NATS: the fleet bucket is STATUS_STATE
source "$(dirname "$0")/../support/e2e_fleet.sh"

{
  echo '# fleetcron: key=tick'
  echo "* * * * * *  echo \"\$FLEETCRON_FIRE_KEY \$REPLICA\" >> $journal"
  echo '# fleetcron: key=nightly'
  echo "0 0 3 * * *  echo \"\$FLEETCRON_FIRE_KEY \$REPLICA\" >> $journal"
  echo '# fleetcron: key=zlocal scope=replica'   # every replica runs it: status says so
  echo "0 0 4 * * *  true"
  echo '# fleetcron: key=zz-brief history=2'   # its own ledger bound: the newest 2 records
  echo "* * * * * *  echo \"\$FLEETCRON_FIRE_KEY \$REPLICA\" >> $journal"
} >"$work/jobs.cron"

metrics_port=$(pick_port) failing_port=$(pick_port) none_port=$(pick_port)
for r in 0 1 2; do
  extra=()
  ((r == 0)) && extra=(--metrics "127.0.0.1:$metrics_port")
  ((r == 1)) && extra=(--metrics "127.0.0.1:$failing_port" --job-metrics failing)
  ((r == 2)) && extra=(--metrics "127.0.0.1:$none_port" --job-metrics none)
  REPLICA=$r "$binary" run --seconds "$work/jobs.cron" --coordinator "$coordinator" --claim-ttl 5s \
    --shutdown-grace 5s "${extra[@]}" >"$work/replica-$r.log" 2>&1 &
  daemon_pids[$r]=$!
done
control() { "$binary" "$@" --coordinator "$coordinator"; }
ticks() { grep -c '^tick@' "$journal" || true; }
ticked() { (($(ticks) >= 5)); }
three_accepted() { [[ $(control status --json | jq '[.replicas[] | select(.accepted)] | length') == 3 ]]; }

wait_until "tick to run 5 times" ticked
control pause nightly >/dev/null
wait_until "three accepted replicas in status" three_accepted
status=$(control status --json)
jq -e '.jobs | map(.job) == ["nightly", "tick", "zlocal", "zz-brief"]' <<<"$status" >/dev/null || fail "jobs: $(jq -c '.jobs | map(.job)' <<<"$status")"
jq -e '.jobs[2].every_replica and (.jobs[1].every_replica | not)' <<<"$status" >/dev/null ||
  fail "scope in status --json: $(jq -c '.jobs | map({job, every_replica})' <<<"$status")"
[[ $(control status) == *'"0 0 4 * * *" UTC  scope=replica (every replica runs it)'* ]] || fail "status does not show zlocal's scope: $(control status)"
jq -e '.jobs[1].spec == "* * * * * *" and .jobs[1].zone == "UTC" and (.jobs[1].paused | not)' <<<"$status" >/dev/null ||
  fail "tick: $(jq -c '.jobs[1]' <<<"$status")"
next_nightly=$(date -u -d "$(date -u +%F) 03:00" +%s)
(($(date -u +%s) < next_nightly)) || next_nightly=$((next_nightly + 86400))
want_next=$(date -u -d "@$next_nightly" +%Y-%m-%dT%H:%M:%SZ)
jq -e --arg next "$want_next" '.jobs[0].next_fire == $next and .jobs[0].paused and (.jobs[0].paused_by | startswith("cli@"))' \
  <<<"$status" >/dev/null || fail "nightly: $(jq -c '.jobs[0]' <<<"$status"), want next $want_next"
jq -e '[.replicas[].settings.claim_ttl] == ["5s", "5s", "5s"]' <<<"$status" >/dev/null || fail "replicas: $status"
control status | grep '^    paused        yes, by cli@' >/dev/null || fail "the text status shows no pause"

# history=2: a job's own ledger bound, whatever --history says.
brief_bounded() {
  (($(grep -c '^zz-brief@' "$journal") >= 4)) && [[ $(control history zz-brief --json | jq '.records | length') == 2 ]]
}
wait_until "zz-brief's ledger to hold its newest 2 records after 4 runs" brief_bounded

# The per-job metrics: read from the fleet state (every 15 s), so any replica shows the fleet's.
metrics() { curl -sf "http://127.0.0.1:$metrics_port/metrics" >"$work/metrics" && grep -q '^fleetcron_job_paused{job="nightly"} 1$' "$work/metrics"; }
deadline=$((SECONDS + 25))
until metrics; do ((SECONDS < deadline)) || fail "no fleetcron_job_paused 1 for nightly: $(grep job_ "$work/metrics")"; sleep 0.5; done
grep -q '^fleetcron_job_last_outcome{job="tick",outcome="succeeded"} 1$' "$work/metrics" || fail "metrics: $(grep job_ "$work/metrics")"
grep -q '^fleetcron_job_interval_seconds{job="tick"} 1$' "$work/metrics" || fail "metrics: $(grep job_interval "$work/metrics")"
grep -q '^fleetcron_job_interval_seconds{job="nightly"} 86400$' "$work/metrics" || fail "metrics: $(grep job_interval "$work/metrics")"
success=$(sed -n 's/^fleetcron_job_last_success_timestamp_seconds{job="tick"} //p' "$work/metrics")
(( ${success%.*} > $(date +%s) - 30 )) || fail "tick's last success at $success"
# --job-metrics failing: the paused job, not the succeeding one; none: no job at all.
failing_metrics() { curl -sf "http://127.0.0.1:$failing_port/metrics" >"$work/failing" && grep -q '^fleetcron_job_paused{job="nightly"} 1$' "$work/failing"; }
deadline=$((SECONDS + 25))
until failing_metrics; do ((SECONDS < deadline)) || fail "--job-metrics failing: $(grep job_ "$work/failing")"; sleep 0.5; done
! grep -q 'job="tick"' "$work/failing" || fail "--job-metrics failing lists tick: $(grep 'job="tick"' "$work/failing")"
curl -sf "http://127.0.0.1:$none_port/metrics" >"$work/none" || fail "no /metrics on replica 2"
! grep -q '^fleetcron_job_.*{job=' "$work/none" || fail "--job-metrics none: $(grep '{job=' "$work/none")"
! grep -q '^fleetcron_job_metrics_refreshed_timestamp_seconds ' "$work/none" || fail "--job-metrics none read the fleet state"

for r in 0 1 2; do kill -TERM "${daemon_pids[$r]}"; done
for r in 0 1 2; do wait "${daemon_pids[$r]}" || fail "replica $r exited non-zero on SIGTERM"; done

# Stopped: no replica left, and the ledger holds exactly what ran.
status=$(control status --json)
jq -e '.replicas == []' <<<"$status" >/dev/null || fail "replicas after a clean stop: $(jq -c .replicas <<<"$status")"
last_ran=$(grep '^tick@' "$journal" | awk '{print $1}' | sort | tail -1)
jq -e --arg key "$last_ran" '.jobs[1].last_run.fire_key == $key and .jobs[1].last_success.fire_key == $key and
  .jobs[1].last_run.fate == "succeeded" and .jobs[1].running == []' <<<"$status" >/dev/null ||
  fail "tick's last run: $(jq -c '.jobs[1] | {last_run: .last_run.fire_key, last_success: .last_success.fire_key}' <<<"$status"), journal: $last_ran"
control history tick -n 10000 --json | jq -r '.records[] | select(.fate == "succeeded") | .fire_key' | sort >"$work/ledger"
grep '^tick@' "$journal" | awk '{print $1}' | sort >"$work/ran"
diff "$work/ran" "$work/ledger" >"$work/diff.log" || fail "history and the journal differ: $(head -5 "$work/diff.log")"
all=$(control history -n 3 --json)
jq -e '.job == null and (.records | length) == 3 and ([.records[].scheduled_at] | . == (sort | reverse))' <<<"$all" \
  >/dev/null || fail "history of every job: $all"
control history -n 1 | grep '^tick  ' >/dev/null || fail "the text history of every job names no job"

duplicates=$(awk '{print $1}' "$journal" | sort | uniq -d)
[[ -z $duplicates ]] || fail "fires run twice: $duplicates"
echo "ok ($backend): status showed 3 accepted replicas, nightly paused with next fire $want_next; after a clean stop" \
  "no replicas, and tick's last run, last success and $(wc -l <"$work/ran") runs in history match the journal"
