#!/usr/bin/env bash
# The main job: installs what the build needs (not the test tools), builds fleetcron (Release) and runs
# the daemon on examples/demo.cron with the embedded in-memory coordinator,
# printing runs as they happen (Ctrl-C drains and stops it). With arguments
# they go to the program instead (e.g. `next '0 9 * * mon-fri'`, `validate FILE`).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh build   # the build and runtime packages only; the test tools come with scripts/test.sh
cmake -S . -B build/release -DCMAKE_BUILD_TYPE=Release -DFLEETCRON_TESTS=OFF -DFLEETCRON_BENCH=OFF \
  -DFLEETCRON_EXAMPLES=OFF >/dev/null
cmake --build build/release --target fleetcron -j"$(nproc)" >/dev/null
bin=build/release/src/daemon/fleetcron

if (($# > 0)); then
  exec "$bin" "$@"
fi

echo "\$ fleetcron validate --seconds examples/demo.cron -n 1"
"$bin" validate --seconds examples/demo.cron -n 1
echo
http=${FLEETCRON_HTTP:-127.0.0.1:9464}
echo "\$ fleetcron run --seconds --http $http examples/demo.cron    (status page: http://$http/; Ctrl-C to stop)"
exec "$bin" run --seconds --http "$http" examples/demo.cron
