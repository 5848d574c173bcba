#!/usr/bin/env bash
# Starts a private PostgreSQL cluster on a free loopback port, measures the
# reference — pgbench running libtnb/cron's claim (INSERT … ON CONFLICT …
# WHERE expires_at < now()) on a fresh key per transaction, one client —
# runs postgres_claims against the same cluster and prints the ratios.
# Usage: bench/postgres_bench.sh BUILD_DIR [fires] [rounds] [pgbench seconds]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:?usage: postgres_bench.sh BUILD_DIR [fires] [rounds] [pgbench seconds]}
fires=${2:-10000}
rounds=${3:-5}
seconds=${4:-5}
source "$root/scripts/servers.sh"
start_postgres
uri=$FLEETCRON_TEST_POSTGRES_URL
"$build/src/daemon/fleetcron" migrate --coordinator "$uri" >/dev/null
script=$(mktemp /tmp/fleetcron-pgbench.XXXXXX.sql)
trap 'rm -f "$script"; stop_servers' EXIT
cat >"$script" <<'SQL'
\set k random(1, 1000000000000)
INSERT INTO cron_claims (fire_key, holder, expires_at) VALUES ('pgbench-' || :client_id || '-' || :k || '@2026-01-02T15:04:05Z', 'pgbench-0123456789abcdef', now() + (600 * interval '1 second')) ON CONFLICT (fire_key) DO UPDATE SET holder = EXCLUDED.holder, claimed_at = now(), expires_at = EXCLUDED.expires_at WHERE cron_claims.expires_at < now();
SQL
reference=$(pgbench -n -c 1 -j 1 -T "$seconds" -f "$script" "$uri" 2>/dev/null | grep -o 'tps = [0-9.]*' | grep -o '[0-9.]*')
echo "reference: pgbench, the reference's claim, 1 client, ${seconds}s: $reference claims/s"
output=$("$build/bench/postgres_claims" "$uri" "$fires" "$rounds")
echo "$output"
batch=$(echo "$output" | grep -o 'median [0-9]* claims/s' | grep -o '[0-9]*')
sequential=$(echo "$output" | grep -o 'claim() calls: [0-9]* claims/s' | grep -o '[0-9]* claims' | grep -o '[0-9]*')
awk -v b="$batch" -v s="$sequential" -v r="$reference" 'BEGIN {
  printf "ratio: batch-path claims/s / pgbench claims/s = %.2f\n", b / r
  printf "ratio: sequential claim() claims/s / pgbench claims/s = %.2f\n", s / r }'
