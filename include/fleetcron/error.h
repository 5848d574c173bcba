// fleetcron — the root of every error the library throws.
#pragma once

#include "fleetcron/api.h"

namespace fleetcron {

/// fleetcron's own error types derive from Error, so one
///   catch (const fleetcron::Error& e)
/// catches every one: ParseError, DurationError, UriError (input that is
/// refused; also std::invalid_argument), BackendError and its kinds, and
/// SchedulerError (failures; also std::runtime_error). An argument a
/// function's contract refuses (an unknown zone, bad options, a null job)
/// is a plain std::invalid_argument naming it, as the standard library's
/// would be. Error itself is not a std::exception: one object has one
/// std::exception base, so `catch (const std::exception&)` still catches
/// everything.
class FLEETCRON_API Error {
 public:
  virtual ~Error();
  /// The message, as the standard base's what() gives it.
  [[nodiscard]] virtual const char* what() const noexcept = 0;

 protected:
  Error() = default;
  Error(const Error&) = default;
  Error& operator=(const Error&) = default;
};

}  // namespace fleetcron
