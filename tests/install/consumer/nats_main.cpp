// Uses fleetcron::nats through the installed headers and library, without
// a server: the key encoding and the state names.
#include <fleetcron/nats/coordination.h>

#include <iostream>

int main() {
  std::cout << fleetcron::nats::encode_key("job@2026-01-02T15:04:05Z") << ' '
            << fleetcron::nats::to_string(fleetcron::nats::State::leader) << '\n';
  return 0;
}
