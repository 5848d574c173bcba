// The HTTP API's routes on an in-memory fleet state: what each answers,
// the token rule of the controls, and errors as JSON naming what is wrong.
// (The listener itself is tested over real HTTP in tests/cli and by the
// browser test, tests/browser.)
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>

#include <atomic>

#include "daemon/http/api_service.h"
#include "daemon/observe/fleet_view.h"
#include "fleetcron/memory_fleet_state.h"
#include "fleetcron/rfc3339.h"
#include "daemon/run/run_output.h"
#include "support/forwarding_fleet_state.h"
#include "support/scratch_directory.h"

namespace fleetcron::daemon {
namespace {

using namespace std::chrono_literals;

struct Fixture {
  std::shared_ptr<MemoryFleetState> state = std::make_shared<MemoryFleetState>(system_clock());
  std::vector<LocalJob> local;
  ApiService api;

  explicit Fixture(std::string token = "s3cret", std::string output_dir = "")
      : api(ApiSources{state, [this] { return local; }, [] { return LeaderView{std::string("replica-a"), {}, {}, {}}; }, [] { return true; },
                       "replica-a", "memory", std::move(token), std::move(output_dir)}) {
    const Instant now = std::chrono::time_point_cast<Instant::duration>(std::chrono::system_clock::now());
    const std::vector<CataloguedJob> jobs{{"backup", "0 3 * * *", "UTC", false, now, "replica-a", false},
                                          {"team/report", "*/5 * * * *", "UTC", false, now, "replica-b", true}};
    EXPECT_EQ(state->catalogue_jobs(jobs, now).status, ControlChange::Status::changed);
    FireRecord run;
    run.job_key = "backup";
    run.scheduled_at = parse_rfc3339("2026-12-03T03:00:00Z");
    run.fire_key = "backup@2026-12-03T03:00:00Z";
    run.fate = FireFate::failed;
    run.replica_id = "replica-b";
    run.started_at = run.scheduled_at;
    run.finished_at = run.scheduled_at + 2s;
    run.duration = 2s;
    run.exit_status = 3;
    run.attempts = 1;
    const std::vector<LedgerWrite> writes{{run, LedgerRetention{}}};
    EXPECT_EQ(state->record_fires(writes).at(0).status, LedgerWriteResult::Status::written);
    local.push_back(LocalJob{"backup", JobScope::fleet, false, parse_schedule("0 3 * * *", {})});
  }
  HttpAnswer get(const std::string& path, std::map<std::string, std::string> query = {}) {
    return api.handle(HttpRequest{"GET", path, std::move(query), "", ""});
  }
  HttpAnswer post(const std::string& path, const std::string& authorization) {
    return api.handle(HttpRequest{"POST", path, {}, authorization, ""});
  }
};

bool has(const HttpAnswer& answer, std::string_view text) { return answer.body.find(text) != std::string::npos; }

/// A run of `job` at `instant` that started and ended in `fate`, written to `state`'s ledger.
FireRecord write_run(FleetState& state, const std::string& job, const std::string& instant, FireFate fate) {
  FireRecord run;
  run.job_key = job;
  run.scheduled_at = parse_rfc3339(instant);
  run.fire_key = job + "@" + instant;
  run.fate = fate;
  run.replica_id = "replica-b";
  run.started_at = run.scheduled_at;
  run.attempts = 1;
  if (fate == FireFate::failed) run.exit_status = 1;
  if (fate == FireFate::lost) run.reason = "its runner stopped announcing itself";
  const std::vector<LedgerWrite> writes{{run, LedgerRetention{}}};
  EXPECT_EQ(state.record_fires(writes).at(0).status, LedgerWriteResult::Status::written);
  return run;
}

// A lost newest run is the job's last run (status, the API, the page's
// red row, the metrics); a re-run beside it, at the same instant, is.
TEST(FleetView, ALostNewestRunIsTheLastRun) {
  Fixture f;
  const FireRecord lost = write_run(*f.state, "backup", "2026-12-04T03:00:00Z", FireFate::lost);
  const Instant now = std::chrono::time_point_cast<Instant::duration>(std::chrono::system_clock::now());
  auto backup = [&] {
    const FleetView view = read_fleet_view(*f.state, now);
    for (const auto& job : view.jobs) {
      if (job.key == "backup") return job;
    }
    ADD_FAILURE() << "no backup job in the view";
    return JobView{};
  };
  JobView job = backup();
  ASSERT_TRUE(job.last_run);
  EXPECT_EQ(job.last_run->fate, FireFate::lost) << "not the older failure";
  EXPECT_EQ(job.lost, 1u);
  FireRecord rerun = lost;
  rerun.fire_key += "#recover1";
  rerun.fate = FireFate::succeeded;
  rerun.finished_at = *rerun.started_at + 1s;
  rerun.duration = 1s;
  const std::vector<LedgerWrite> writes{{rerun, LedgerRetention{}}};
  ASSERT_EQ(f.state->record_fires(writes).at(0).status, LedgerWriteResult::Status::written);
  job = backup();
  ASSERT_TRUE(job.last_run);
  EXPECT_EQ(job.last_run->fire_key, rerun.fire_key);
  EXPECT_EQ(job.lost, 1u) << "the loss stays counted after the re-run";
}

TEST(Api, JobsRunsReplicasLeaderAndTheFleetDocument) {
  Fixture f;
  const auto jobs = f.get("/api/v1/jobs");
  EXPECT_EQ(jobs.status, 200);
  EXPECT_EQ(jobs.content_type, "application/json");
  EXPECT_TRUE(has(jobs, R"("job":"backup","spec":"0 3 * * *")")) << jobs.body;
  EXPECT_TRUE(has(jobs, R"("fate":"failed")")) << jobs.body;
  EXPECT_TRUE(has(jobs, R"("scope":"fleet","on_this_replica":true)")) << jobs.body;
  EXPECT_TRUE(has(jobs, R"("job":"team/report")")) << jobs.body;
  const auto one = f.get("/api/v1/jobs/team/report");  // a key with a '/'
  EXPECT_EQ(one.status, 200) << one.body;
  // Not run here: its scope is the catalogue's (the replica that runs it said so).
  EXPECT_TRUE(has(one, R"("every_replica":true)")) << one.body;
  EXPECT_TRUE(has(one, R"("scope":"replica","on_this_replica":false)")) << one.body;
  const auto runs = f.get("/api/v1/jobs/backup/runs", {{"limit", "5"}});
  EXPECT_EQ(runs.status, 200);
  EXPECT_TRUE(has(runs, R"("fire_key":"backup@2026-12-03T03:00:00Z")")) << runs.body;
  EXPECT_TRUE(has(runs, R"("exit_status":3)")) << runs.body;
  EXPECT_EQ(f.get("/api/v1/leader").body, "{\"leader\":{\"holder\":\"replica-a\",\"term\":null,\"lease_expires_in_ms\":null,\"renewed_revision\":null}}\n");
  EXPECT_EQ(f.get("/api/v1/replicas").body, "{\"replicas\":[]}\n");
  const auto fleet = f.get("/api/v1/fleet");
  EXPECT_EQ(fleet.status, 200);
  EXPECT_TRUE(has(fleet, R"("replica":"replica-a","coordinator":"memory")")) << fleet.body;
  EXPECT_TRUE(has(fleet, R"("writable":true)")) << fleet.body;
  EXPECT_TRUE(has(fleet, R"("recent_runs":[{"job":"backup")")) << fleet.body;
}

/// Counts the ledger reads that reach the store.
class CountingFleetState final : public test::ForwardingFleetState {
 public:
  using ForwardingFleetState::ForwardingFleetState;
  LedgerRead read_fires(std::string_view job, std::size_t limit) override {
    ++reads;
    return ForwardingFleetState::read_fires(job, limit);
  }
  std::atomic<int> reads{0};
};

// The ledger is readable without the token: a client asking for runs in a
// loop costs the store one read per job per api_view_lifetime, not one per
// request; a read that held fewer records than it asked for serves larger
// limits too, and another job is read on its own.
TEST(Api, RunsReadTheLedgerAtMostOncePerJobPerViewLifetime) {
  Fixture f;
  const auto counting = std::make_shared<CountingFleetState>(f.state);
  ApiService api(ApiSources{counting, [] { return std::vector<LocalJob>{}; },
                            [] { return LeaderView{std::string("replica-a"), {}, {}, {}}; }, [] { return true; },
                            "replica-a", "memory", "", ""});
  const auto runs = [&](const std::string& key, const std::string& limit) {
    return api.handle(HttpRequest{"GET", "/api/v1/jobs/" + key + "/runs", {{"limit", limit}}, "", ""});
  };
  for (int i = 0; i < 100; ++i) {
    const auto answer = runs("backup", "5");
    ASSERT_EQ(answer.status, 200);
    ASSERT_TRUE(has(answer, R"("fire_key":"backup@2026-12-03T03:00:00Z")")) << answer.body;
  }
  EXPECT_TRUE(has(runs("backup", "1000"), R"("exit_status":3)"));  // one record of five asked: all of them
  EXPECT_EQ(counting->reads.load(), 1);
  EXPECT_EQ(runs("team/report", "5").status, 200);
  EXPECT_EQ(counting->reads.load(), 2);
}

TEST(Api, ErrorsAreJsonAndNameWhatIsWrong) {
  Fixture f;
  EXPECT_EQ(f.get("/api/v1/jobs/nope").body, "{\"error\":\"no job \\\"nope\\\" in the fleet's catalogue or controls\"}\n");
  EXPECT_EQ(f.get("/api/v1/jobs/nope").status, 404);
  EXPECT_EQ(f.get("/api/v1/colours").status, 404);
  EXPECT_EQ(f.get("/api/v2/jobs").status, 404);
  const auto limit = f.get("/api/v1/jobs/backup/runs", {{"limit", "5000"}});
  EXPECT_EQ(limit.status, 400);
  EXPECT_EQ(limit.body, "{\"error\":\"limit \\\"5000\\\": expected 1 to 1000\"}\n");
  const auto method = f.post("/api/v1/jobs", "");
  EXPECT_EQ(method.status, 405);
  EXPECT_EQ(method.body, "{\"error\":\"POST /api/v1/jobs: use GET\"}\n");
  EXPECT_EQ(f.get("/api/v1/jobs/backup/trigger").status, 405);
  EXPECT_EQ(f.get("/api/v1/jobs", {{"limit", "0"}}).body, "{\"error\":\"limit \\\"0\\\": expected 1 to 1000\"}\n");
  EXPECT_EQ(f.get("/api/v1/fleet", {{"state", "sad"}}).body,
            "{\"error\":\"state \\\"sad\\\": expected paused, removed, running or failing\"}\n");
  const auto typo = f.get("/api/v1/jobs", {{"prefx", "b"}});
  EXPECT_EQ(typo.status, 400);
  EXPECT_EQ(typo.body, "{\"error\":\"unknown parameter \\\"prefx\\\": expected limit, after, prefix or state\"}\n");
}

TEST(Api, ControlsNeedTheTokenAndActThroughTheFleetState) {
  Fixture f;
  const auto missing = f.post("/api/v1/jobs/backup/pause", "");
  EXPECT_EQ(missing.status, 401);
  EXPECT_EQ(missing.www_authenticate, "Bearer realm=\"fleetcron\"");
  EXPECT_EQ(f.post("/api/v1/jobs/backup/pause", "Bearer wrong").status, 401);
  EXPECT_EQ(f.post("/api/v1/jobs/backup/pause", "Bearer s3cre").status, 401);
  const Instant now = std::chrono::time_point_cast<Instant::duration>(std::chrono::system_clock::now());
  EXPECT_TRUE(f.state->read_controls(now).jobs.empty());  // nothing changed by a refused request
  const auto paused = f.post("/api/v1/jobs/backup/pause", "Bearer s3cret");
  EXPECT_EQ(paused.status, 200) << paused.body;
  EXPECT_TRUE(has(paused, R"("changed":true)")) << paused.body;
  EXPECT_TRUE(has(f.get("/api/v1/jobs/backup"), R"("paused":true,"paused_by":"api@replica-a")"));  // seen at once
  EXPECT_TRUE(has(f.post("/api/v1/jobs/backup/pause", "Bearer s3cret"), R"("changed":false)"));
  EXPECT_TRUE(has(f.post("/api/v1/jobs/backup/resume", "Bearer s3cret"), R"("changed":true)"));
  const auto trigger = f.post("/api/v1/jobs/team/report/trigger", "Bearer s3cret");
  EXPECT_EQ(trigger.status, 202) << trigger.body;
  const auto controls = f.state->read_controls(now);
  ASSERT_EQ(controls.jobs.size(), 1u);
  EXPECT_EQ(controls.jobs[0].job_key, "team/report");
  EXPECT_EQ(controls.jobs[0].triggers.size(), 1u);
  EXPECT_EQ(f.post("/api/v1/jobs/ghost/trigger", "Bearer s3cret").status, 404);
}

// ?request_id= makes a trigger idempotent: a retry of a request whose
// answer was lost (a 503 after the write applied) triggers nothing new.
TEST(Api, ATriggerRetriedWithItsRequestIdTriggersNothingNew) {
  Fixture f;
  const auto trigger = [&](std::string id) {
    return f.api.handle(HttpRequest{"POST", "/api/v1/jobs/backup/trigger", {{"request_id", std::move(id)}},
                                    "Bearer s3cret", ""});
  };
  const auto first = trigger("deploy-42");
  EXPECT_EQ(first.status, 202) << first.body;
  EXPECT_TRUE(has(first, R"("changed":true)")) << first.body;
  EXPECT_TRUE(has(first, trigger_id_of("backup", "deploy-42"))) << first.body;
  const auto again = trigger("deploy-42");
  EXPECT_EQ(again.status, 202) << again.body;
  EXPECT_TRUE(has(again, R"("changed":false)")) << again.body;
  EXPECT_TRUE(has(again, trigger_id_of("backup", "deploy-42"))) << again.body;
  const ControlsRead controls = f.state->read_controls(std::chrono::time_point_cast<Instant::duration>(
      std::chrono::system_clock::now()));
  ASSERT_EQ(controls.jobs.size(), 1u);
  EXPECT_EQ(controls.jobs[0].triggers.size(), 1u);
  const auto bad = trigger("has space");
  EXPECT_EQ(bad.status, 400);
  EXPECT_TRUE(has(bad, "request id")) << bad.body;
  const auto pause = f.api.handle(HttpRequest{"POST", "/api/v1/jobs/backup/pause", {{"request_id", "x"}},
                                              "Bearer s3cret", ""});
  EXPECT_EQ(pause.status, 400) << pause.body;
}

TEST(Api, WithoutATokenTheApiIsReadOnly) {
  Fixture f("");
  const auto refused = f.post("/api/v1/jobs/backup/trigger", "Bearer anything");
  EXPECT_EQ(refused.status, 403);
  EXPECT_EQ(refused.body, "{\"error\":\"the API is read-only: the daemon runs without --api-token-file\"}\n");
  EXPECT_TRUE(has(f.get("/api/v1/fleet"), R"("writable":false)"));
}

// A run's output as this host keeps it: with the token, as JSON; a run
// kept on another replica's host is named, with that replica.
TEST(ApiService, ARunsOutputIsServedWithTheTokenOrItsWhereabouts) {
  test::ScratchDirectory dir;
  {
    RunOutputs outputs(dir.path(), "replica-a");
    auto writer = outputs.open("backup", "backup@2026-12-05T03:00:00Z", 1);
    writer->line("dumped 3 tables");
    writer->line("quote \" and \x01 escaped");
    writer->finish(true);
  }
  Fixture f("s3cret", dir.path());
  const HttpAnswer refused = f.get("/api/v1/jobs/backup/output");
  EXPECT_EQ(refused.status, 401) << refused.body;
  const HttpAnswer answer = f.api.handle(HttpRequest{"GET", "/api/v1/jobs/backup/output", {}, "Bearer s3cret", ""});
  EXPECT_EQ(answer.status, 200) << answer.body;
  EXPECT_TRUE(has(answer, R"("fire_key":"backup@2026-12-05T03:00:00Z","replica":"replica-a","state":"succeeded")"))
      << answer.body;
  EXPECT_TRUE(has(answer, R"("output":"dumped 3 tables\nquote \" and \u0001 escaped\n")")) << answer.body;
  // The ledger's run of 2026-12-03 ran on replica-b, elsewhere.
  const HttpAnswer elsewhere = f.api.handle(
      HttpRequest{"GET", "/api/v1/jobs/backup/output", {{"fire", "2026-12-03T03:00:00Z"}}, "Bearer s3cret", ""});
  EXPECT_EQ(elsewhere.status, 404);
  EXPECT_TRUE(has(elsewhere, "is kept on replica replica-b, which ran it, not on this host")) << elsewhere.body;
  Fixture without_output("s3cret", "");
  EXPECT_TRUE(has(without_output.api.handle(HttpRequest{"GET", "/api/v1/jobs/backup/output", {}, "Bearer s3cret", ""}),
                  "this replica keeps no runs' output"));
  Fixture without_token("", dir.path());
  const HttpAnswer open_read = without_token.get("/api/v1/jobs/backup/output");
  EXPECT_EQ(open_read.status, 403) << "a run's output may hold secrets: never without a token";
  EXPECT_TRUE(has(open_read, "needs the API token")) << open_read.body;
  EXPECT_EQ(f.post("/api/v1/jobs/backup/output", "Bearer s3cret").status, 405);
}

// A job a reload removed (no replica runs it): the API refuses to control
// it, as the CLI does without --force.
TEST(ApiService, AJobNoReplicaRunsAnyMoreIsNotControlled) {
  Fixture f;
  const Instant now = std::chrono::time_point_cast<Instant::duration>(std::chrono::system_clock::now());
  // replica-b's list no longer holds team/report.
  ASSERT_EQ(f.state->catalogue_jobs({}, now, "replica-b").status, ControlChange::Status::changed);
  const HttpAnswer refused = f.post("/api/v1/jobs/team/report/trigger", "Bearer s3cret");
  EXPECT_EQ(refused.status, 409) << refused.body;
  EXPECT_TRUE(has(refused, "was removed from the jobs of replica-b")) << refused.body;
  EXPECT_TRUE(has(f.get("/api/v1/jobs/team/report"), "\"removed_by\":\"replica-b\""));
  EXPECT_EQ(f.post("/api/v1/jobs/backup/trigger", "Bearer s3cret").status, 202) << "a job this replica runs";
}

/// Reads a JSON answer's field: enough for "total", "next" and the keys.
std::vector<std::string> keys_of(const std::string& body) {
  std::vector<std::string> keys;
  for (std::size_t at = body.find("{\"job\":\""); at != std::string::npos; at = body.find("{\"job\":\"", at + 1)) {
    const std::size_t from = at + 8;
    const std::string key = body.substr(from, body.find('"', from) - from);
    if (keys.empty() || keys.back() != key) keys.push_back(key);
  }
  return keys;
}

std::string next_of(const std::string& body) {
  const std::size_t at = body.find("\"next\":");
  if (at == std::string::npos || body.compare(at + 7, 4, "null") == 0) return {};
  const std::size_t from = at + 8;
  return body.substr(from, body.find('"', from) - from);
}

// 20,000 jobs (100,000 on real servers: tests/e2e/scale_test.sh; here the
// sanitizer builds must walk them within the test timeout): a page reads
// the fleet's index once and the ledgers of its own jobs alone; `next`
// walks the whole fleet in key order; a prefix narrows it (and `total`
// counts it); a state the index tells (paused) reads no other ledger; one
// the ledger tells (failing) reads at most api_max_ledger_scan ledgers a
// request, and walking on finds every job.
TEST(Api, ManyJobsArePagedFilteredAndReadAPageAtATime) {
  Fixture f;
  const Instant now = std::chrono::time_point_cast<Instant::duration>(std::chrono::system_clock::now());
  std::vector<CataloguedJob> many;
  for (int i = 0; i < 19'998; ++i) {
    many.push_back({fmt::format("customer-{:06}", i), "17 3 * * *", "UTC", false, now, "replica-c"});
  }
  ASSERT_EQ(f.state->catalogue_jobs(many, now, "replica-c").status, ControlChange::Status::changed);
  ASSERT_EQ(f.state->set_paused("customer-015000", true, "ops", now).status, ControlChange::Status::changed);
  (void)write_run(*f.state, "customer-019990", "2026-12-03T03:17:00Z", FireFate::failed);
  const auto counting = std::make_shared<CountingFleetState>(f.state);
  ApiService api(ApiSources{counting, [] { return std::vector<LocalJob>{}; },
                            [] { return LeaderView{std::string("replica-a"), {}, {}, {}}; }, [] { return true; },
                            "replica-a", "memory", "", ""});
  const auto get = [&](const std::string& path, std::map<std::string, std::string> query) {
    const HttpAnswer answer = api.handle(HttpRequest{"GET", path, std::move(query), "", ""});
    EXPECT_EQ(answer.status, 200) << answer.body.substr(0, 200);
    return answer.body;
  };
  std::string body = get("/api/v1/jobs", {});
  EXPECT_EQ(keys_of(body).size(), api_default_page_jobs);
  EXPECT_TRUE(has(HttpAnswer{200, "", body, {}}, "\"total\":20000")) << "with the fixture's two";
  EXPECT_EQ(counting->reads.load(), static_cast<int>(api_default_page_jobs)) << "the page's ledgers alone";
  // Every job, a page after another, in key order, once.
  std::size_t seen = 0;
  std::string after;
  for (int pages = 0; pages < 40; ++pages) {
    std::map<std::string, std::string> query{{"limit", "1000"}};
    if (!after.empty()) query["after"] = after;
    body = get("/api/v1/jobs", query);
    const auto keys = keys_of(body);
    ASSERT_TRUE(std::is_sorted(keys.begin(), keys.end()));
    ASSERT_TRUE(after.empty() || keys.empty() || keys.front() > after);
    seen += keys.size();
    after = next_of(body);
    if (after.empty()) break;
  }
  EXPECT_EQ(seen, 20'000u);
  // A prefix: 100 jobs, counted in total.
  body = get("/api/v1/fleet", {{"prefix", "customer-0121"}});
  EXPECT_EQ(keys_of(body).size(), 100u + 0u) << body.substr(0, 300);
  EXPECT_TRUE(has(HttpAnswer{200, "", body, {}}, "\"jobs_total\":100,\"catalogue_error\":null,\"next\":null"));
  // The index tells who is paused: no ledger read but the answer's.
  int reads = counting->reads.load();
  body = get("/api/v1/jobs", {{"state", "paused"}});
  EXPECT_EQ(keys_of(body), std::vector<std::string>{"customer-015000"});
  EXPECT_EQ(counting->reads.load() - reads, 1);
  // Failing: the ledger tells, api_max_ledger_scan jobs a request at most.
  std::vector<std::string> failing;
  after.clear();
  int requests = 0;
  do {
    std::map<std::string, std::string> query{{"state", "failing"}};
    if (!after.empty()) query["after"] = after;
    reads = counting->reads.load();
    body = get("/api/v1/jobs", query);
    ASSERT_LE(static_cast<std::size_t>(counting->reads.load() - reads), api_max_ledger_scan);
    for (auto& key : keys_of(body)) failing.push_back(key);
    after = next_of(body);
    ++requests;
  } while (!after.empty() && requests < 100);
  EXPECT_EQ(failing, (std::vector<std::string>{"backup", "customer-019990"}));
  EXPECT_EQ(requests, 10) << "20,000 jobs, 2,000 a request";
}

}  // namespace
}  // namespace fleetcron::daemon
