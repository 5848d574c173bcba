#!/usr/bin/env bash
# Starts a redis-server on a free loopback port, measures it with
# redis-benchmark -P 16 (the reference), runs redis_claims against it and
# prints the ratio. Usage: bench/redis_bench.sh BUILD_DIR [fires] [rounds]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:?usage: redis_bench.sh BUILD_DIR [fires] [rounds]}
fires=${2:-10000}
rounds=${3:-10}
source "$root/scripts/servers.sh"
start_redis
port=${FLEETCRON_TEST_REDIS_URL##*:}
port=${port%%/*}
reference=$(redis-benchmark -p "$port" -t set -n 200000 -P 16 -q | tr '\r' '\n' | grep -o 'SET: [0-9.]* requests' | grep -o '[0-9.]*' | head -1)
echo "reference: redis-benchmark -t set -n 200000 -P 16 (50 clients): $reference SETs/s"
output=$("$build/bench/redis_claims" "$FLEETCRON_TEST_REDIS_URL" "$fires" "$rounds")
echo "$output"
batch=$(echo "$output" | grep -o 'median [0-9]* claims/s' | grep -o '[0-9]*')
awk -v b="$batch" -v r="$reference" 'BEGIN { printf "ratio: batch-path claims/s / redis-benchmark -P 16 SETs/s = %.3f\n", b / r }'
