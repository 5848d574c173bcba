// `fleetcron next` as a function: output and exit status.
#include "daemon/cli/next_command.h"

#include <gtest/gtest.h>

#include <sstream>

namespace fleetcron::daemon {
namespace {

struct Result {
  int status;
  std::string out;
  std::string err;
};

Result run(NextCommandOptions options) {
  std::ostringstream out, err;
  const int status = run_next_command(options, out, err);
  return {status, out.str(), err.str()};
}

NextCommandOptions options_for(std::string spec) {
  NextCommandOptions options;
  options.spec = std::move(spec);
  options.from = "2026-03-07T12:00:00Z";
  return options;
}

TEST(NextCommand, PrintsInTheSpecZone) {
  auto options = options_for("30 2 * * *");
  options.zone = "America/New_York";
  options.count = 2;
  const auto r = run(options);
  EXPECT_EQ(r.status, 0);
  EXPECT_EQ(r.out, "2026-03-08T03:00:00-04:00\n2026-03-09T02:30:00-04:00\n");
  EXPECT_EQ(r.err, "");
}

TEST(NextCommand, DstPoliciesApply) {
  auto options = options_for("30 2 * * *");
  options.zone = "America/New_York";
  options.count = 1;
  options.dst_gap = "skip";
  EXPECT_EQ(run(options).out, "2026-03-09T02:30:00-04:00\n");
}

TEST(NextCommand, NoneWhenTheScheduleEnds) {
  auto options = options_for("0 0 30 2 *");
  const auto r = run(options);
  EXPECT_EQ(r.status, 0);
  EXPECT_EQ(r.out, "none\n");
}

TEST(NextCommand, InvalidInputExitsTwoWithTheError) {
  const auto bad_spec = run(options_for("0 0 * * 9"));
  EXPECT_EQ(bad_spec.status, 2);
  EXPECT_EQ(bad_spec.out, "");
  EXPECT_EQ(bad_spec.err, "fleetcron next: parse \"0 0 * * 9\": field day-of-week at offset 8: 9 above maximum 7\n");

  auto bad_overlap = options_for("* * * * *");
  bad_overlap.dst_overlap = "second";
  EXPECT_EQ(run(bad_overlap).err, "fleetcron next: option --dst-overlap: \"second\" is not first, last or both\n");

  auto bad_from = options_for("* * * * *");
  bad_from.from = "2026-13-01T00:00:00Z";
  EXPECT_EQ(run(bad_from).status, 2);
  EXPECT_NE(run(bad_from).err.find("option --from: parse \"2026-13-01T00:00:00Z\": field time at offset 5"),
            std::string::npos);

  auto too_many = options_for("* * * * *");
  too_many.count = next_command_max_count + 1;
  EXPECT_EQ(run(too_many).status, 2);
}

TEST(NextCommand, SecondsFlagAllowsSixFields) {
  auto options = options_for("*/10 * * * * *");
  options.count = 1;
  EXPECT_EQ(run(options).status, 2);
  options.seconds = true;
  EXPECT_EQ(run(options).out, "2026-03-07T12:00:10Z\n");
}

}  // namespace
}  // namespace fleetcron::daemon
