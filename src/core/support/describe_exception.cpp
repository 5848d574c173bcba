#include "core/support/describe_exception.h"

#include <stdexcept>

namespace fleetcron::detail {

std::string describe_exception(std::exception_ptr error) {
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "non-standard exception";
  }
}

}  // namespace fleetcron::detail
