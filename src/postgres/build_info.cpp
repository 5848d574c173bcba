#include "fleetcron/postgres/build_info.h"

#include <fmt/format.h>
#include <libpq-fe.h>

namespace fleetcron::postgres {

std::string build_info() {
  const int version = PQlibVersion();  // e.g. 150014: 15.14
  return fmt::format("postgres (libpq {}.{})", version / 10000, version % 10000);
}

}  // namespace fleetcron::postgres
