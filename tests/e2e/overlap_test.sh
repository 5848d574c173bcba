#!/usr/bin/env bash
# Fleet-wide overlap on a real redis-server or nats-server (issue 15, item
# 4): three daemons run `skipper` (every second, 2.5 s long, overlap=skip)
# and `queuer` (every 4 s, 5 s long, overlap=queue). Each run journals its
# start and end, timed by the same host clock. No two runs of one job may
# overlap anywhere in the fleet; the fires that found the job running on
# another replica are skipped naming it (skip) or wait for it (queue), at
# least once each.
#
#   overlap_test.sh FLEETCRON_BINARY redis|nats
set -euo pipefail
binary=$1 backend=$2
name=overlap bucket=OVERLAP_CLAIMS   # NATS: the fleet bucket is OVERLAP_STATE
source "$(dirname "$0")/../support/e2e_fleet.sh"

span() {  # span JOB SECONDS: the command journaling a run's start and end, in ns
  echo "echo \"start $1 \$FLEETCRON_FIRE_KEY \$REPLICA \$(date +\\%s\\%N)\" >> $journal; sleep $2;" \
    "echo \"end $1 \$FLEETCRON_FIRE_KEY \$REPLICA \$(date +\\%s\\%N)\" >> $journal"
}
{
  echo '# fleetcron: key=skipper overlap=skip'
  echo "* * * * * *  $(span skipper 2.5)"
  echo '# fleetcron: key=queuer overlap=queue'
  echo "*/4 * * * * *  $(span queuer 5)"
} >"$work/jobs.cron"
for r in 0 1 2; do
  REPLICA=$r "$binary" run --seconds "$work/jobs.cron" --coordinator "$coordinator" --claim-ttl 30s \
    --metrics "127.0.0.1:0" >"$work/replica-$r.log" 2>&1 &
  daemon_pids[$r]=$!
done
ends() { grep -c "^end $1 " "$journal" || true; }
enough() { (($(ends skipper) >= 6 && $(ends queuer) >= 4)); }
wait_up_to 60 "6 runs of skipper and 4 of queuer" enough
for r in 0 1 2; do kill -TERM "${daemon_pids[$r]}"; done
for r in 0 1 2; do wait "${daemon_pids[$r]}" || fail "replica $r exited $?"; done
daemon_pids=()

# Each job's runs, by start: each starts after every earlier one ended.
check_job() {  # check_job JOB → "runs replicas"
  awk -v job="$1" '
    $2 != job { next }
    $1 == "start" { start[$3] = $5; where[$3] = $4 }
    $1 == "end" { finish[$3] = $5 }
    END {
      n = 0
      for (k in start) { if (!(k in finish)) { print "unfinished " k; exit 1 } keys[++n] = k }
      for (i = 2; i <= n; i++) {  # insertion sort by start
        k = keys[i]; j = i - 1
        while (j > 0 && start[keys[j]] > start[k]) { keys[j + 1] = keys[j]; j-- }
        keys[j + 1] = k
      }
      last = keys[1]  # the run that ended last so far
      for (i = 2; i <= n; i++) {
        if (start[keys[i]] < finish[last]) {
          printf "overlap: %s (replica %s) started %.3f s before %s (replica %s) ended\n", keys[i], where[keys[i]],
            (finish[last] - start[keys[i]]) / 1e9, last, where[last]
          exit 1
        }
        if (finish[keys[i]] > finish[last]) last = keys[i]
      }
      for (k in where) seen[where[k]] = 1
      r = 0; for (x in seen) r++
      print n, r
    }' "$journal"
}
for job in skipper queuer; do
  result=$(check_job "$job") || fail "$job: $result"
  read -r runs replicas <<<"$result"
  eval "${job}_result='$runs runs on $replicas replicas'"
done
fleet_skips=$(cat "$work"/replica-*.log | grep -c 'fire-skipped.*skipper.*overlap: the previous run still goes on replica' || true)
((fleet_skips >= 1)) || fail "no skipper fire was skipped for a run on another replica"
waits=$(cat "$work"/replica-*.log | grep -c 'queuer.*waits (overlap=queue): the previous run still goes on replica' || true)
((waits >= 1)) || fail "no queuer fire waited for a run on another replica"
errors=$(cat "$work"/replica-*.log | grep -c 'registry-error' || true)
((errors == 0)) || fail "$errors registry-error skips"
echo "ok ($backend): skipper $skipper_result, queuer $queuer_result, none overlapping;" \
  "$fleet_skips skipper fire(s) skipped for a run elsewhere, $waits queuer fire(s) waited for one"
