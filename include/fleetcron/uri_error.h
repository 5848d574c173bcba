// fleetcron — a coordinator URI that cannot be parsed (Redis, NATS).
#pragma once

#include <stdexcept>

#include "fleetcron/api.h"
#include "fleetcron/error.h"

namespace fleetcron {

/// A bad URI: the message names the part and its offset, with every
/// password or token in the URI shown as "***".
class FLEETCRON_API UriError : public std::invalid_argument, public Error {
 public:
  using std::invalid_argument::invalid_argument;
  [[nodiscard]] const char* what() const noexcept override { return std::invalid_argument::what(); }
};

}  // namespace fleetcron
