// Parses a spec through the installed headers and library and prints the
// next fire; the install test compares the output. A bad spec's ParseError
// is caught here, across the (maybe shared) library's boundary: its type
// information is exported.
#include <fleetcron/fleetcron.h>

#include <iostream>

int main() {
  const auto schedule = fleetcron::parse_schedule("TZ=America/New_York 30 2 * * *");
  const auto from = fleetcron::parse_rfc3339("2026-03-07T12:00:00Z");
  const auto next = schedule->next(from);
  if (!next) return 1;
  try {
    (void)fleetcron::parse_schedule("61 * * * *");
    return 1;
  } catch (const fleetcron::ParseError& e) {
    if (e.field() != "minute") return 1;
  }
  std::cout << fleetcron::format_rfc3339(*next, schedule->zone()) << ' ' << FLEETCRON_VERSION_STRING << '\n';
  return 0;
}
