#include "fleetcron/redis/build_info.h"

#include <fmt/format.h>
#include <hiredis/hiredis.h>
#include <openssl/crypto.h>

namespace fleetcron::redis {

std::string build_info() {
  return fmt::format("redis (hiredis {}.{}.{} protocol; TLS with {}; Sentinel)", HIREDIS_MAJOR, HIREDIS_MINOR,
                     HIREDIS_PATCH, OpenSSL_version(OPENSSL_VERSION));
}

}  // namespace fleetcron::redis
