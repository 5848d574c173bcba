// Internal: the message of an exception thrown by user code or a backend.
#pragma once

#include <exception>
#include <string>

namespace fleetcron::detail {

/// what() of a std::exception, "non-standard exception" for anything else.
std::string describe_exception(std::exception_ptr error);

}  // namespace fleetcron::detail
