#!/usr/bin/env bash
# Checks what fleetcron's shared libraries export. They are built with
# hidden visibility, so their dynamic symbol tables must hold the public
# API (FLEETCRON_API in include/fleetcron/) and no internals: nothing from
# a detail or anonymous namespace, no pimpl (Impl, State) and none of the
# Redis command API (Reply, Script). A sample of the API, from every
# header family, must be there. Prints each library's count of exported
# fleetcron symbols.
# Usage: check_exports.sh BUILD_DIR (a -DBUILD_SHARED_LIBS=ON build)
set -euo pipefail
build=$1
declare -A required=(
  [core]='fleetcron::Scheduler::add|fleetcron::parse_schedule|fleetcron::VirtualClock::advance|fleetcron::MemoryClaimer::claim|fleetcron::MemoryLease::make_elector|fleetcron::throw_backend_error|typeinfo for fleetcron::ParseError|typeinfo for fleetcron::BackendError|fleetcron::format_rfc3339|fleetcron::TimeZone::locate|fleetcron::MemoryFleetState::claim_catch_up|fleetcron::check_cursor_arguments|fleetcron::memory_diagnostics|fleetcron::Fleet::trigger'
  [redis]='fleetcron::redis::Client::ping|fleetcron::redis::parse_uri|fleetcron::redis::Claimer::claim_batch|fleetcron::redis::Elector::is_leader|fleetcron::redis::read_lease|fleetcron::redis::scan_claims|fleetcron::redis::read_eviction_policy|fleetcron::redis::FleetState::claim_catch_up|fleetcron::redis::make_diagnostics'
  [postgres]='fleetcron::postgres::Connection::ping|fleetcron::postgres::parse_uri|fleetcron::postgres::Claimer::claim_batch|fleetcron::postgres::Elector::is_leader|fleetcron::postgres::migrate|fleetcron::postgres::FleetState::claim_catch_up|fleetcron::postgres::make_diagnostics'
  [nats]='fleetcron::nats::Connection::connect|fleetcron::nats::parse_uri|fleetcron::nats::Claimer::claim|fleetcron::nats::Elector::is_leader|fleetcron::nats::Election::start|fleetcron::nats::check_election_ttl|fleetcron::nats::Bucket::get|fleetcron::nats::make_diagnostics'
)
failed=0
for part in core redis nats postgres; do
  # The file the development symlink names (an older version may linger).
  link=$(find "$build/src" -name "libfleetcron-$part.so" | head -n 1)
  library=${link:+$(readlink -f "$link")}
  [[ -n $library ]] || { echo "FAIL: no libfleetcron-$part.so under $build/src (not a shared build?)"; failed=1; continue; }
  symbols=$(nm -D --defined-only -C "$library" | cut -d' ' -f3-)
  ours=$(grep -c 'fleetcron::' <<<"$symbols" || true)
  echo "$(basename "$library"): $ours exported fleetcron symbols"
  internal=$(grep -E 'fleetcron::([a-z]+::)?detail::|[A-Z][A-Za-z]*::(Impl|State)\b|\(anonymous namespace\)|fleetcron::redis::(Reply|Script)\b' \
             <<<"$symbols" || true)
  if [[ -n $internal ]]; then
    echo "FAIL: $(basename "$library") exports internals:"
    head -20 <<<"$internal"
    failed=1
  fi
  IFS='|' read -ra wanted <<<"${required[$part]}"
  for symbol in "${wanted[@]}"; do
    if ! grep -qF "$symbol" <<<"$symbols"; then
      echo "FAIL: $(basename "$library") does not export $symbol"
      failed=1
    fi
  done
done
exit $failed
