// The output of past runs kept on disk: names, attempts, pruning by count
// and age, and what a missing run's message says.
#include "daemon/run/run_output.h"

#include <gtest/gtest.h>

#include "support/scratch_directory.h"

namespace fleetcron::daemon {
namespace {

namespace fs = std::filesystem;
using test::ScratchDirectory;

void run_once(RunOutputs& outputs, const std::string& job, const std::string& fire, bool succeeded,
              const std::string& text = "out") {
  auto writer = outputs.open(job, fire, 1);
  writer->line(text);
  writer->finish(succeeded);
  ASSERT_EQ(writer->error(), "");
}

TEST(RunOutput, NamesEncodeEveryByteAFileNameCannotHoldAndStayShort) {
  EXPECT_EQ(output_file_name("backup@2026-12-06T11:00:00Z"), "backup%402026-12-06T11%3A00%3A00Z");
  EXPECT_EQ(output_file_name("../etc"), "%2E.%2Fetc");
  EXPECT_EQ(output_file_name("a b/c"), "a%20b%2Fc");
  const std::string long_key(300, '/');
  const std::string name = output_file_name(long_key);
  EXPECT_LE(name.size(), 200u);
  EXPECT_NE(name, output_file_name(std::string(301, '/'))) << "a hash tells long keys apart";
}

TEST(RunOutput, AttemptsAppendToOneFileNamedByTheLastOutcome) {
  ScratchDirectory dir;
  RunOutputs outputs(dir.path(), "web-1");
  const std::string fire = "job@2026-12-06T11:00:00Z";
  auto first = outputs.open("job", fire, 1);
  first->line("first");
  // While it runs the file is listed as running, with what it wrote so far.
  std::vector<KeptRun> runs = kept_runs(dir.path(), "job");
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].state, KeptState::running);
  EXPECT_EQ(runs[0].fire_key, fire);
  EXPECT_EQ(runs[0].replica_id, "web-1");
  first->finish(false);
  auto second = outputs.open("job", fire, 2);
  second->line("second");
  second->finish(true);
  runs = kept_runs(dir.path(), "job");
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].state, KeptState::succeeded);
  EXPECT_EQ(read_kept_output(runs[0], 1 << 20), "first\n--- fleetcron: attempt 2 ---\nsecond\n");
  EXPECT_EQ(read_kept_output(runs[0], 5), "first\n[fleetcron: the rest of this file (42 bytes in all) is not shown]\n");
}

TEST(RunOutput, PruningKeepsTheNewestOfEachOutcomeAndNothingTooOld) {
  ScratchDirectory dir;
  RunOutputs outputs(dir.path(), "web-1");
  for (int i = 0; i < 5; ++i) run_once(outputs, "job", "job@" + std::to_string(i), true);
  for (int i = 5; i < 8; ++i) run_once(outputs, "job", "job@" + std::to_string(i), false);
  run_once(outputs, "other", "other@1", true);
  // Distinct times, oldest first: file times have a coarse grain.
  const auto now = fs::file_time_type::clock::now();
  for (const auto& run : kept_runs(dir.path(), "job")) {
    const int n = std::stoi(run.fire_key.substr(4));
    fs::last_write_time(run.path, now - std::chrono::minutes{10 - n});
  }
  EXPECT_EQ(outputs.prune("job", OutputRetention{2, 1, std::chrono::hours{1}}), 5u);
  std::vector<std::string> kept;
  for (const auto& run : kept_runs(dir.path(), "job")) kept.push_back(run.fire_key);
  EXPECT_EQ(kept, (std::vector<std::string>{"job@7", "job@4", "job@3"}));
  EXPECT_EQ(kept_runs(dir.path(), "other").size(), 1u) << "another job's runs are its own";
  // By age: older than keep_for goes whatever the counts.
  EXPECT_EQ(outputs.prune("job", OutputRetention{10, 10, std::chrono::minutes{5}}), 2u);
  ASSERT_EQ(kept_runs(dir.path(), "job").size(), 1u);
  EXPECT_EQ(kept_runs(dir.path(), "job")[0].fire_key, "job@7");
}

TEST(RunOutput, ARunIsChosenByFireKeyOrInstantAndTheNewestByDefault) {
  ScratchDirectory dir;
  RunOutputs outputs(dir.path(), "web-1");
  run_once(outputs, "job", "job@2026-12-06T10:00:00Z", true);
  run_once(outputs, "job", "job@2026-12-06T11:00:00Z", true);
  const auto runs = kept_runs(dir.path(), "job");
  fs::last_write_time(runs[1].path, fs::file_time_type::clock::now() - std::chrono::minutes{1});
  const auto sorted = kept_runs(dir.path(), "job");
  EXPECT_EQ(select_kept_run(sorted, "job", "")->fire_key, sorted[0].fire_key);
  EXPECT_EQ(select_kept_run(sorted, "job", "2026-12-06T10:00:00Z")->fire_key, "job@2026-12-06T10:00:00Z");
  EXPECT_EQ(select_kept_run(sorted, "job", "job@2026-12-06T11:00:00Z")->fire_key, "job@2026-12-06T11:00:00Z");
  EXPECT_FALSE(select_kept_run(sorted, "job", "2026-12-06T12:00:00Z"));
}

TEST(RunOutput, AMissingRunSaysWhereItRanOrThatItWasPruned) {
  ScratchDirectory dir;
  RunOutputs outputs(dir.path(), "web-1");
  FireRecord here;
  here.job_key = "job";
  here.fire_key = "job@2026-12-06T10:00:00Z";
  here.replica_id = "web-1";
  here.started_at = Instant{};
  FireRecord elsewhere = here;
  elsewhere.fire_key = "job@2026-12-06T11:00:00Z";
  elsewhere.replica_id = "web-2";
  const std::vector<FireRecord> ledger{elsewhere, here};  // newest first
  EXPECT_NE(explain_missing_output(dir.path(), "job", "", ledger)
                .find("is kept on replica web-2, which ran it, not on this host"),
            std::string::npos);
  EXPECT_NE(explain_missing_output(dir.path(), "job", "2026-12-06T10:00:00Z", ledger)
                .find("ran on replica web-1 on this host and is kept no more"),
            std::string::npos);
  EXPECT_NE(explain_missing_output(dir.path(), "job", "2020-01-01T00:00:00Z", ledger)
                .find("has no record of such a run"),
            std::string::npos);
}

// One process per replica folder; at start the host's folders are pruned:
// the bound holds across restarts that each get a new replica id, and a
// run whose daemon died mid-way (left .running) goes once it is too old.
TEST(RunOutput, AFolderIsOneProcesssAndTheHostIsPrunedAtStart) {
  ScratchDirectory dir;
  const auto old = fs::file_time_type::clock::now() - std::chrono::hours{2};
  {
    RunOutputs earlier(dir.path(), "web-1-100");
    EXPECT_THROW(RunOutputs(dir.path(), "web-1-100"), std::runtime_error) << "a twin under one id";
    for (int i = 0; i < 4; ++i) run_once(earlier, "job", "job@" + std::to_string(i), true);
    auto died = earlier.open("job", "job@9", 1);  // its daemon dies before the end
    died->line("half");
  }
  for (const auto& run : kept_runs(dir.path(), "job")) fs::last_write_time(run.path, old);
  RunOutputs now(dir.path(), "web-1-200");
  run_once(now, "job", "job@10", true);
  EXPECT_EQ(now.prune_host(OutputRetention{10, 10, std::chrono::hours{1}}), 5u);
  const auto left = kept_runs(dir.path(), "job");
  ASSERT_EQ(left.size(), 1u);
  EXPECT_EQ(left[0].fire_key, "job@10");
  EXPECT_FALSE(fs::exists(fs::path(dir.path()) / "web-1-100")) << "a dead replica's emptied folder goes";
  EXPECT_TRUE(fs::exists(fs::path(dir.path()) / "web-1-200"));
  // Counts are the host's: another replica's runs of the job count too.
  {
    RunOutputs other(dir.path(), "web-2");
    run_once(other, "job", "job@11", true);
    run_once(other, "job", "job@12", true);
  }
  EXPECT_EQ(now.prune("job", OutputRetention{2, 10, std::chrono::hours{1}}), 1u);
  EXPECT_EQ(kept_runs(dir.path(), "job").size(), 2u);
}

TEST(RunOutput, ADirectoryThatCannotBeMadeIsAnErrorNamingIt) {
  ScratchDirectory dir;
  const std::string file = dir.write("a-file", "x");
  try {
    RunOutputs outputs(file, "web-1");
    FAIL() << "made a directory under a file";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(file + "/web-1"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace fleetcron::daemon
