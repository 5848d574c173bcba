// fleetcron::Error: every error type the library throws is caught by the
// one root, and still by its standard base, with the same message.
#include "fleetcron/error.h"

#include <gtest/gtest.h>

#include <functional>

#include "fleetcron/backend_error.h"
#include "fleetcron/cron.h"
#include "fleetcron/duration.h"
#include "fleetcron/scheduler.h"
#include "fleetcron/uri_error.h"

namespace fleetcron {
namespace {

/// What `thrower` throws, caught as fleetcron::Error, and whether the same
/// kind is caught as `Standard` with the same what().
template <typename Standard>
std::string caught_as_both(const std::function<void()>& thrower) {
  std::string as_root, as_standard;
  try {
    thrower();
  } catch (const Error& e) {
    as_root = e.what();
  }
  try {
    thrower();
  } catch (const Standard& e) {
    as_standard = e.what();
  }
  EXPECT_EQ(as_root, as_standard);
  return as_root;
}

TEST(Error, EveryErrorTypeIsCaughtByTheRootAndByItsStandardBase) {
  EXPECT_NE(caught_as_both<std::invalid_argument>([] { (void)parse_schedule("61 * * * *"); }).find("61 above maximum 59"),
            std::string::npos);
  EXPECT_NE(caught_as_both<std::invalid_argument>([] { (void)parse_duration("5x"); }).find("unknown unit"),
            std::string::npos);
  EXPECT_EQ(caught_as_both<std::invalid_argument>([] { throw UriError("redis URI \"x\": scheme"); }),
            "redis URI \"x\": scheme");
  EXPECT_EQ(caught_as_both<std::runtime_error>([] { throw TimeoutError("no answer"); }), "no answer");
  EXPECT_EQ(caught_as_both<std::runtime_error>(
                [] { throw SchedulerError(SchedulerError::Code::not_running, "the scheduler is not running"); }),
            "the scheduler is not running");
  // One std::exception base: a catch of std::exception is not ambiguous.
  try {
    throw ConfigError("refused");
  } catch (const std::exception& e) {
    EXPECT_STREQ(e.what(), "refused");
  }
}

}  // namespace
}  // namespace fleetcron
