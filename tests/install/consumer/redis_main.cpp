// Uses fleetcron::redis through the installed headers and library: parses
// a URI (no server needed) and prints its redacted description.
#include <fleetcron/redis/claimer.h>

#include <iostream>

int main() {
  const auto options = fleetcron::redis::parse_uri("redis://cron:secret@127.0.0.1:6380/2");
  auto client = std::make_shared<fleetcron::redis::Client>(options);
  fleetcron::redis::Claimer claimer(client);  // does not connect
  std::cout << client->describe() << ' ' << claimer.options().claim_prefix << '\n';
  return 0;
}
