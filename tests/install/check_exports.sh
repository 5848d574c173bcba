#!/usr/bin/env bash
# Checks what fleetcron's shared libraries export: they are built with
# hidden visibility, so their dynamic symbol tables hold the public API
# (FLEETCRON_API in include/fleetcron/) and no internals — nothing from a
# detail namespace, no member of a pimpl's Impl, no core/… helper.
# Prints each library's count of exported fleetcron symbols.
# Usage: check_exports.sh BUILD_DIR (a -DBUILD_SHARED_LIBS=ON build)
set -euo pipefail
build=$1
mapfile -t libraries < <(find "$build/src" -name 'libfleetcron-*.so*' -type f | sort)
((${#libraries[@]} > 0)) || { echo "FAIL: no libfleetcron-*.so under $build/src (not a shared build?)"; exit 1; }
failed=0
for library in "${libraries[@]}"; do
  symbols=$(nm -D --defined-only -C "$library" | cut -d' ' -f3-)
  ours=$(grep -c 'fleetcron::' <<<"$symbols" || true)
  internal=$(grep -E 'fleetcron::([a-z]+::)?detail::|::Impl::|::State::|\(anonymous namespace\)' <<<"$symbols" || true)
  echo "$(basename "$library"): $ours exported fleetcron symbols"
  if [[ -n $internal ]]; then
    echo "FAIL: $(basename "$library") exports internals:"
    head -20 <<<"$internal"
    failed=1
  fi
done
exit $failed
