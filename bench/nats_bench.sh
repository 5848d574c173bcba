#!/usr/bin/env bash
# Starts a nats-server (JetStream, file store) on a free loopback port and
# runs nats_claims against it: claim_batch beside one claim() per fire, in
# the same run. Usage: bench/nats_bench.sh BUILD_DIR [fires] [rounds]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:?usage: nats_bench.sh BUILD_DIR [fires] [rounds]}
source "$root/scripts/servers.sh"
start_nats
"$build/bench/nats_claims" "$FLEETCRON_TEST_NATS_URL" "${2:-10000}" "${3:-5}"
