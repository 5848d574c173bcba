#!/usr/bin/env bash
# What a fleet costs its store as its work grows. Starts a private server,
# R replicas of the real daemon on one jobs file of J jobs with every
# default feature on (ledger, registry, cursors, fleet-wide overlap,
# catch-up), and measures a window in which:
#   - EVERY jobs fire every second (the steady load),
#   - BURST jobs are all due at one instant (start lateness: the instant
#     to each run's `run-started` log line),
#   - the rest are sparse (one fire a day, at spread-out times).
# Every command is `true`. It prints, for the window: fires per second,
# the store's commands (Redis: INFO commandstats, a script's inner calls
# included; PostgreSQL: transactions; NATS: messages the server took,
# requests and publishes, and of them JetStream API calls) and CPU
# microseconds per fire, each daemon's CPU per fire and resident memory
# per job, the burst's lateness p50/p99/max (and the cost of starting
# `true`, measured here, beside it), start, validate and reload times for
# J jobs, duplicates (must be 0), and the reference measured in the same
# run (redis-benchmark -P 16, pgbench, a NATS KV create loop).
#
#   bench/fleet_bench.sh BUILD_DIR redis|postgres|nats [REPLICAS] [JOBS] [SECONDS] [MODE]
#
# Defaults: 3 replicas, 1,000 jobs, a 20 s window, claim mode. EVERY
# (default 100), BURST (default min(JOBS/2, 10000)) and MAX_CONCURRENT
# (each daemon's --max-concurrent, default 64: the daemon's) are environment
# variables. FLEET_BENCH_SWEEP=1 runs R in $SWEEP_REPLICAS (1 3 10) × J in
# $SWEEP_JOBS (1000 10000; a daemon takes up to 100,000) and
# prints one line per point (about 8 minutes per backend). Not in CI; CI
# runs a smoke size (scripts/test.sh's benchmark phase). docs/scale.md.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:?usage: fleet_bench.sh BUILD_DIR redis|postgres|nats [REPLICAS] [JOBS] [SECONDS] [MODE]}
backend=${2:?usage: fleet_bench.sh BUILD_DIR redis|postgres|nats [REPLICAS] [JOBS] [SECONDS] [MODE]}
replicas=${3:-3} jobs=${4:-1000} window=${5:-20} mode=${6:-claim}
build=$(cd "$build" && pwd)
binary=$build/src/daemon/fleetcron
[[ $backend == redis || $backend == postgres || $backend == nats ]] || { echo "backend: redis, postgres or nats, got $backend" >&2; exit 2; }
[[ $mode == claim || $mode == leader || $mode == both ]] || { echo "mode: claim, leader or both, got $mode" >&2; exit 2; }
((replicas >= 1 && replicas <= 32)) || { echo "REPLICAS: 1 to 32, got $replicas" >&2; exit 2; }
((window >= 5 && window <= 3600)) || { echo "SECONDS: 5 to 3600, got $window" >&2; exit 2; }
every=${EVERY:-100}
burst=${BURST:-$((jobs / 2 < 10000 ? jobs / 2 : 10000))}
((every + burst <= jobs)) || { echo "EVERY ($every) + BURST ($burst) exceed JOBS ($jobs)" >&2; exit 2; }

if [[ ${FLEET_BENCH_SWEEP:-} == 1 ]]; then
  for r in ${SWEEP_REPLICAS:-1 3 10}; do
    for j in ${SWEEP_JOBS:-1000 10000}; do
      FLEET_BENCH_SWEEP= FLEET_BENCH_LINE=1 bash "$0" "$build" "$backend" "$r" "$j" "$window" "$mode" | grep '^point'
    done
  done
  exit 0
fi

source "$root/scripts/servers.sh"
source "$root/tests/support/cleanup.sh"
work=$(mktemp -d /tmp/fleetcron-bench.XXXXXX)
export STATE_DIRECTORY=$work/state
daemon_pids=()
cleanup() { stop_daemons "${daemon_pids[@]}"; stop_servers; remove_work "$work" "${KEEP_BENCH:-}"; }
trap cleanup EXIT

case $backend in
  redis) start_redis >/dev/null; uri=$FLEETCRON_TEST_REDIS_URL; store_pid=${server_pids[0]} ;;
  postgres) start_postgres >/dev/null; uri=$FLEETCRON_TEST_POSTGRES_URL; store_pid=${postgres_pids[0]}
    "$binary" migrate --coordinator "$uri" >/dev/null ;;
  nats) NATS_MONITOR=1 start_nats >/dev/null; uri=$FLEETCRON_TEST_NATS_URL; store_pid=$nats_pid ;;
esac
"$binary" init --coordinator "$uri" >/dev/null
# Fires within max_clock_skew (5 s) of a store's creation are refused
# (store-reset, docs/fleet-state.md): the window starts after.
initialised=$(date +%s)

# The burst's instant: far enough ahead for every replica to have started.
start_cost=$(python3 "$root/bench/fleet_report.py" start-cost)
now=$(date +%s)
burst_at=$((now + 20 + jobs / 5000))  # after the window's start (below)
read -r bs bm bh < <(date -u -d "@$burst_at" '+%-S %-M %-H')
{
  echo "# fleet_bench: $jobs jobs, $every every second, $burst at $(date -u -d "@$burst_at" +%FT%TZ)"
  for ((i = 0; i < every; i++)); do echo "# fleetcron: key=every$i"; echo "* * * * * * true"; done
  for ((i = 0; i < burst; i++)); do echo "# fleetcron: key=burst$i"; echo "$bs $bm $bh * * * true"; done
  # Sparse: once a day, at times spread over the 12 hours from 12 hours
  # ahead (none in the window: a sweep lasts less than 12 hours).
  far=$((($(date -u +%-H) + 12) % 24))
  for ((i = every + burst; i < jobs; i++)); do
    echo "# fleetcron: key=sparse$i"
    echo "$((i % 60)) $(((i / 60) % 60)) $(((i / 3600 % 12 + far) % 24)) * * * true"
  done
} >"$work/jobs.cron"

validate_started=$(date +%s%N)
"$binary" validate --seconds "$work/jobs.cron" >/dev/null
validate_ms=$((($(date +%s%N) - validate_started) / 1000000))

for ((r = 0; r < replicas; r++)); do
  "$binary" run --seconds "$work/jobs.cron" --coordinator "$uri" --coordination "$mode" --replica-id "bench$r" \
    --log-format json --max-concurrent "${MAX_CONCURRENT:-64}" --keep-succeeded 0 --output-dir none >"$work/replica$r.log" 2>&1 &
  daemon_pids+=($!)
  echo "$(date +%s%N) $r" >>"$work/spawned"
done
# Every replica started (its `started` line), within 10 min.
for ((r = 0; r < replicas; r++)); do
  for _ in $(seq 6000); do grep -q '"event":"started"' "$work/replica$r.log" && break; sleep 0.1; done
  grep -q '"event":"started"' "$work/replica$r.log" || { echo "replica $r did not start:" >&2; tail "$work/replica$r.log" >&2; exit 1; }
done

# The window: from the next whole second, through the burst.
window_start=$(($(date +%s) + 1))
((window_start >= initialised + 7)) || window_start=$((initialised + 7))
((burst_at >= window_start)) || { echo "the replicas took too long to start: the burst is past" >&2; exit 1; }
((window_start + window > burst_at + 3)) || window=$((burst_at + 3 - window_start))
while (($(date +%s) < window_start)); do sleep 0.05; done
snapshot() {  # file
  {
    echo "time $(date +%s%N)"
    local p
    for p in "${daemon_pids[@]}"; do echo "daemon $p $(awk '{print $14 + $15}' "/proc/$p/stat")"; done
    echo "store_cpu_ticks $(awk '{print $14 + $15}' "/proc/$store_pid/stat")"
    case $backend in
      redis) redis-cli -u "$uri" INFO commandstats | tr -d '\r' | grep '^cmdstat_'
             redis-cli -u "$uri" INFO cpu | tr -d '\r' | grep '^used_cpu_\(sys\|user\):' ;;
      postgres) echo "transactions $(psql "$uri" -Atc "select sum(xact_commit + xact_rollback) from pg_stat_database")"
                # Every backend's CPU: children of the postmaster, living and reaped.
                echo "store_children_ticks $(awk '{print $16 + $17}' "/proc/$store_pid/stat")"
                local child; for child in $(pgrep -P "$store_pid"); do echo "store_child $child $(awk '{print $14 + $15}' "/proc/$child/stat" 2>/dev/null || echo 0)"; done ;;
      nats) echo "jetstream_api $(curl -s "http://127.0.0.1:$nats_monitor_port/jsz" | python3 -c 'import json,sys; print(json.load(sys.stdin)["api"]["total"])')"
            echo "messages_in $(curl -s "http://127.0.0.1:$nats_monitor_port/varz" | python3 -c 'import json,sys; print(json.load(sys.stdin)["in_msgs"])')" ;;
    esac
  } >"$1"
}
snapshot "$work/before"
while (($(date +%s) < window_start + window)); do sleep 0.1; done
# The burst's runs may still be starting (each logged, within 2 min): the
# window then ends 2 s after the last, so that the store's work measured
# is the work of every fire counted (a burst that outlasts the window
# would otherwise leave its later claims and records out).
burst_runs() { cat "$work"/replica*.log | grep '"run-started"' | grep -c '"fire":"burst' || true; }
for _ in $(seq 1200); do (($(burst_runs) >= burst)) && break; sleep 0.1; done
(($(date +%s) + 2 <= window_start + window)) || window=$(($(date +%s) + 2 - window_start))
while (($(date +%s) < window_start + window)); do sleep 0.1; done
snapshot "$work/after"
for p in "${daemon_pids[@]}"; do grep VmRSS "/proc/$p/status" | awk -v p="$p" '{print "rss", p, $2}' >>"$work/after"; done

# Reload time: SIGHUP to replica 0, until its `reloaded` line.
reloads_before=$(grep -c '"event":"reloaded"' "$work/replica0.log" || true)
reload_started=$(date +%s%N)
kill -HUP "${daemon_pids[0]}"
for _ in $(seq 6000); do
  (($(grep -c '"event":"reloaded"' "$work/replica0.log" || true) > reloads_before)) && break; sleep 0.01
done
reload_ms=$((($(date +%s%N) - reload_started) / 1000000))

python3 "$root/bench/fleet_report.py" report --work "$work" --backend "$backend" --replicas "$replicas" \
  --jobs "$jobs" --every "$every" --burst "$burst" --burst-at "$burst_at" --window-start "$window_start" \
  --window "$window" --mode "$mode" --validate-ms "$validate_ms" --reload-ms "$reload_ms" \
  --start-cost-ms "$start_cost" --clock-ticks "$(getconf CLK_TCK)"

# The reference, on the same server, after the fleet stopped.
stop_daemons "${daemon_pids[@]}"; daemon_pids=()
case $backend in
  redis) port=${uri##*:}; port=${port%%/*}
    reference=$(redis-benchmark -p "$port" -t set -n 200000 -P 16 -q | tr '\r' '\n' | grep -o 'SET: [0-9.]* requests' | grep -o '[0-9.]*' | head -1)
    echo "reference: redis-benchmark -t set -n 200000 -P 16: $reference SETs/s"
    claims=$("$build/bench/redis_claims" "$uri" "${CLAIMS:-10000}" 5 | grep -o 'median [0-9]* claims/s' | grep -o '[0-9]*')
    echo "claims: redis_claims batch path with the ledger's records: $claims claims/s"
    awk -v c="$claims" -v r="$reference" 'BEGIN { printf "ratio: claims/s / redis-benchmark -P 16 SETs/s = %.3f\n", c / r }' ;;
  postgres) echo "reference: bench/postgres_bench.sh $build (pgbench running the reference's claim)" ;;
  nats) echo "reference: bench/nats_bench.sh $build" ;;
esac
