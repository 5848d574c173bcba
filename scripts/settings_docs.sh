#!/usr/bin/env bash
# Rewrites the settings tables of docs/daemon.md and docs/fleetcron.1 from
# the program's own table (`fleetcron settings`), between their markers.
#   bash scripts/settings_docs.sh [BIN]   (default build/gcc/src/daemon/fleetcron)
# tests/cli/daemon_cli_test.sh fails when the docs differ from the table.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-build/gcc/src/daemon/fleetcron}
rewrite() {  # FILE BEGIN-MARKER END-MARKER FORMAT
  python3 - "$1" "$2" "$3" <("$bin" settings --format "$4") <<'PY'
import sys
path, begin, end, generated = sys.argv[1:5]
text = open(path).read()
head, rest = text.split(begin + "\n", 1)
_, tail = rest.split(end + "\n", 1)
open(path, "w").write(head + begin + "\n" + open(generated).read() + end + "\n" + tail)
PY
}
rewrite docs/daemon.md '<!-- settings: made by `fleetcron settings` (scripts/settings_docs.sh) -->' '<!-- settings end -->' markdown
rewrite docs/fleetcron.1 '.\" settings: made by `fleetcron settings --format man` (scripts/settings_docs.sh)' '.\" settings end' man
