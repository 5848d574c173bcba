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
# The server's CPU seconds (user + system) so far.
server_cpu() { redis-cli -p "$port" INFO cpu | tr -d '\r' | awk -F: '/^used_cpu_(user|sys):/ { s += $2 } END { printf "%.6f", s }'; }
cpu_before=$(server_cpu)
reference=$(redis-benchmark -p "$port" -t set -n 200000 -P 16 -q | tr '\r' '\n' | grep -o 'SET: [0-9.]* requests' | grep -o '[0-9.]*' | head -1)
cpu_set=$(awk -v a="$cpu_before" -v b="$(server_cpu)" 'BEGIN { printf "%.2f", (b - a) * 1e6 / 200000 }')
echo "reference: redis-benchmark -t set -n 200000 -P 16 (50 clients): $reference SETs/s, $cpu_set us of server CPU per SET"
# A second reference doing a claim's store work without the script: a
# new key each time, SET NX PX (the first reference overwrites one key).
cpu_before=$(server_cpu)
claim_like=$(redis-benchmark -p "$port" -n 200000 -P 16 -r 100000000 -q SET 'claimlike:__rand_int__' 1 NX PX 600000 |
  tr '\r' '\n' | grep -o '[0-9.]* requests per second' | grep -o '^[0-9.]*' | head -1)
cpu_claim_like=$(awk -v a="$cpu_before" -v b="$(server_cpu)" 'BEGIN { printf "%.2f", (b - a) * 1e6 / 200000 }')
echo "reference: redis-benchmark SET claimlike:__rand_int__ 1 NX PX 600000 -r 100000000 -P 16: $claim_like SETs/s, $cpu_claim_like us of server CPU per SET"
# The batch path alone first, for the server's CPU per claim.
cpu_before=$(server_cpu)
"$build/bench/redis_claims" "$FLEETCRON_TEST_REDIS_URL" "$fires" "$rounds" batch >/dev/null
cpu_claim=$(awk -v a="$cpu_before" -v b="$(server_cpu)" -v n="$((fires * rounds))" 'BEGIN { printf "%.2f", (b - a) * 1e6 / n }')
echo "server CPU per claim in the batch path: $cpu_claim us (Lua: the script's SET NX PX, its fence and its share of the checks)"
output=$("$build/bench/redis_claims" "$FLEETCRON_TEST_REDIS_URL" "$fires" "$rounds")
echo "$output"
batch=$(echo "$output" | grep -o 'median [0-9]* claims/s' | grep -o '[0-9]*')
awk -v b="$batch" -v r="$reference" 'BEGIN { printf "ratio: batch-path claims/s / redis-benchmark -P 16 SETs/s = %.3f\n", b / r }'
awk -v c="$cpu_claim" -v s="$cpu_set" 'BEGIN { printf "ratio: server CPU per SET / per claim = %.3f (the bound the server alone sets on the ratio above)\n", s / c }'
awk -v b="$batch" -v r="$claim_like" -v c="$cpu_claim" -v s="$cpu_claim_like" 'BEGIN {
  printf "ratio: batch-path claims/s / new-key SET NX PX -P 16 = %.3f; server CPU per such SET / per claim = %.3f\n", b / r, s / c }'
