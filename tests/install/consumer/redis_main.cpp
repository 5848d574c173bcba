// Uses fleetcron::redis through the installed headers and library: parses
// a URI (no server needed) and prints its redacted description; a refused
// connection's ConnectError is caught across the library's boundary.
#include <fleetcron/redis/claimer.h>

#include <iostream>

int main() {
  const auto options = fleetcron::redis::parse_uri("redis://cron:secret@127.0.0.1:6380/2").connection;
  auto client = std::make_shared<fleetcron::redis::Client>(options);
  fleetcron::redis::Claimer claimer(client);  // does not connect
  try {
    fleetcron::redis::Client nowhere(fleetcron::redis::parse_uri("redis://127.0.0.1:1").connection);
    nowhere.ping();
    return 1;
  } catch (const fleetcron::ConnectError&) {
  }
  std::cout << client->describe() << ' ' << claimer.options().claim_prefix << '\n';
  return 0;
}
