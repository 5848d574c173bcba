// The controls document's text (job_controls.h): what the stores keep.
#include <gtest/gtest.h>

#include <stdexcept>

#include "fleetcron/job_controls.h"
#include "fleetcron/backend/record_formats.h"

namespace fleetcron {
namespace {

using namespace std::chrono_literals;

JobControl sample() {
  JobControl job;
  job.job_key = "nightly report\nwith % and -";
  job.paused = true;
  job.changed_at = Instant{1767322800123456us};
  job.changed_by = "ops@host";
  job.triggers.push_back(TriggerRequest{"0123456789abcdef", Instant{1767322800000000us}, Instant{1767323400000000us}, "cli"});
  job.triggers.push_back(TriggerRequest{"fedcba9876543210", Instant{1767322801000000us}, Instant{1767323401000000us}, "-"});
  return job;
}

TEST(JobControls, TheTextRoundTripsEveryField) {
  const std::vector<JobControl> jobs{sample(), JobControl{.job_key = "plain"}};
  const std::string text = format_job_controls(jobs);
  EXPECT_EQ(text.find('\n'), text.rfind('\n')) << "one line per job: " << text;
  const auto parsed = parse_job_controls(text);
  ASSERT_TRUE(parsed);
  EXPECT_EQ(*parsed, jobs);
  EXPECT_EQ(text.substr(text.find('\n') + 1), "1 plain 0 - - 0");
}

TEST(JobControls, AnEmptyDocumentHoldsNoJobs) {
  const auto parsed = parse_job_controls("");
  ASSERT_TRUE(parsed);
  EXPECT_TRUE(parsed->empty());
  EXPECT_EQ(format_job_controls({}), "");
}

TEST(JobControls, MalformedDocumentsAreRefused) {
  const std::string good = format_job_controls(std::vector<JobControl>{sample()});
  for (const std::string& bad : {
           std::string("2") + good.substr(1),                       // another version
           good + " extra",                                          // a field too many
           good.substr(0, good.rfind(' ')),                          // a field too few
           std::string("1 job 2 - - 0"),                             // paused neither 0 nor 1
           std::string("1 job 0 - - 1 0123 1 2 cli"),                // a short trigger id
           std::string("1 job 0 - - 1 0123456789abcdef x 2 cli"),    // an instant that is not one
           std::string("1 job 0 - - 1 0123456789abcdef - 2 cli"),    // a trigger without its instant
           std::string("1 job 0 - - 17") ,                           // more triggers than the bound
           std::string("1 job%zz 0 - - 0"),                          // a bad escape
           std::string("1 - 0 - - 0"),                               // no job key
           std::string("not a document"),
       }) {
    EXPECT_FALSE(parse_job_controls(bad)) << bad;
  }
}

TEST(JobControls, AuthorsAreNamedWithoutWhitespace) {
  EXPECT_NO_THROW(check_control_author("replica-1"));
  EXPECT_NO_THROW(check_control_author(std::string(64, 'a')));
  EXPECT_THROW(check_control_author(std::string(65, 'a')), std::invalid_argument);
  EXPECT_THROW(check_control_author("two words"), std::invalid_argument);
  EXPECT_THROW(check_control_author(""), std::invalid_argument);
}

}  // namespace
}  // namespace fleetcron
