#!/usr/bin/env bash
# The main job: installs what is needed, builds fleetcron (Release) and runs
# it. With arguments they go to the program (e.g. `next '0 9 * * mon-fri'`);
# without, it demonstrates the time engine on specs around DST changes.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
cmake -S . -B build/release -DCMAKE_BUILD_TYPE=Release -DFLEETCRON_TESTS=OFF -DFLEETCRON_BENCH=OFF >/dev/null
cmake --build build/release --target fleetcron -j"$(nproc)" >/dev/null
bin=build/release/src/daemon/fleetcron

if (($# > 0)); then
  exec "$bin" "$@"
fi

demo() {
  echo "\$ fleetcron $*"
  "$bin" "$@"
  echo
}
demo next -n 3 '*/15 * * * *'
demo next --tz America/New_York --from 2026-03-07T12:00:00Z -n 3 '30 2 * * *'
demo next --tz America/New_York --from 2026-03-07T12:00:00Z -n 3 --dst-gap skip '30 2 * * *'
demo next --from 2026-10-31T12:00:00Z -n 3 --dst-overlap both 'TZ=America/New_York 30 1 * * *'
demo next --from 2026-01-01T00:00:00Z -n 3 'CRON_TZ=Europe/Berlin 0 9 ? * FRI#3'
demo next --from 2026-06-15T12:34:56Z -n 3 '@every 90s'
