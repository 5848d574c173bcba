// The CLI's lookup of a job it is asked to control or show (daemon/observe/job_lookup.h).
#include <gtest/gtest.h>

#include "daemon/observe/job_lookup.h"
#include "fleetcron/clock.h"
#include "fleetcron/memory_fleet_state.h"
#include "fleetcron/rfc3339.h"

namespace fleetcron::daemon {
namespace {

using namespace std::chrono_literals;

TEST(JobLookup, AnUnknownKeyIsRefusedWithTheNearestKnownOnes) {
  auto clock = std::make_shared<VirtualClock>(Instant{std::chrono::hours{24 * 20000}});
  MemoryFleetState state(clock);
  const Instant now = clock->now();
  EXPECT_NE(look_up_job(state, now, "held", false).refusal.find("which is empty: no replica has announced its jobs"),
            std::string::npos);
  std::vector<CataloguedJob> jobs;
  for (const char* key : {"held", "tick", "nightly-backup", "weekly-report"}) {
    CataloguedJob job;
    job.job_key = key;
    job.spec = "* * * * *";
    job.seen = now;
    job.seen_by = "replica-1";
    jobs.push_back(job);
  }
  ASSERT_EQ(state.catalogue_jobs(jobs, now).status, ControlChange::Status::changed);
  EXPECT_TRUE(look_up_job(state, now, "held", false).known);
  const JobLookup typo = look_up_job(state, now, "nightly-bakup", false);
  EXPECT_FALSE(typo.known);
  EXPECT_EQ(typo.refusal,
            "no job \"nightly-bakup\" in the fleet's catalogue (4 job(s)); the nearest: \"nightly-backup\", \"held\", "
            "\"tick\". A job no replica has announced yet, or whose replicas could not write the catalogue (they log "
            "\"job catalogue: this replica's jobs were not written\"), needs --force");
  // A job a reload removed: refused, saying so, unless a control names it.
  ASSERT_EQ(state.catalogue_jobs(std::span(jobs).first(3), now + 1s, "replica-1").status, ControlChange::Status::changed);
  EXPECT_EQ(look_up_job(state, now + 1s, "weekly-report", false).refusal,
            "job \"weekly-report\" was removed from the jobs of replica-1 at " + format_rfc3339(now + 1s) +
                " (a reload) and no replica runs it now; --force acts on it anyway");
  EXPECT_TRUE(look_up_job(state, now + 1s, "held", false).known);
  EXPECT_TRUE(look_up_job(state, now + 1s, "weekly-report", false, false).known) << "its history is still there";
  EXPECT_EQ(look_up_job(state, now, "nightly-bakup", false, false).refusal,
            "no job \"nightly-bakup\" in the fleet's catalogue (4 job(s)); the nearest: \"nightly-backup\", \"held\", "
            "\"tick\"") << "history offers no --force";
  // A paused job no replica runs any more: known to a resume only.
  ASSERT_EQ(state.set_paused("retired", true, "cli", now).status, ControlChange::Status::changed);
  EXPECT_FALSE(look_up_job(state, now, "retired", false).known);
  EXPECT_TRUE(look_up_job(state, now, "retired", true).known);
  EXPECT_EQ(nearest_keys("a", {"abc", "ab", "xyz"}, 2), (std::vector<std::string>{"ab", "abc"}));
}

}  // namespace
}  // namespace fleetcron::daemon
