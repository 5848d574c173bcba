// fleetcron — the root of every error the library throws.
#pragma once

#include "fleetcron/api.h"

namespace fleetcron {

/// Every error type fleetcron throws derives from Error, so one
///   catch (const fleetcron::Error& e)
/// catches them all; each also derives from the standard exception that
/// says its kind — std::invalid_argument for input that is refused
/// (ParseError, DurationError, UriError), std::runtime_error for a failure
/// (BackendError and its kinds, SchedulerError) — so `catch (const
/// std::exception&)` and the existing catch clauses keep working. Error
/// itself is not a std::exception: one object has one std::exception base.
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
