// The JSON API under /api/v1/ (docs/api.md): the fleet's jobs, their runs,
// the replicas and the leader, read from the fleet state through the same
// contract `fleetcron status` reads; and the controls trigger, pause and
// resume, written there, so they act fleet-wide from any replica's API.
// Writes need the bearer token; without one configured the API is
// read-only. No HTTP here: it sees HttpRequest and answers HttpAnswer.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "daemon/observe/fleet_view.h"
#include "daemon/http/jobs_query.h"
#include "daemon/observe/json_output.h"
#include "daemon/http/http_server.h"
#include "daemon/config/job_directives.h"
#include "daemon/observe/store_view.h"
#include "fleetcron/fleet_state.h"
#include "fleetcron/store_clock.h"
#include "fleetcron/schedule.h"

namespace fleetcron::daemon {

/// A job this replica runs, as its jobs file says.
struct LocalJob {
  std::string key;
  JobScope scope = JobScope::fleet;
  bool at_start = false;
  SchedulePtr schedule;
};

/// The jobs this replica runs, by key (views of LocalJob's keys).
using LocalIndex = std::map<std::string_view, const LocalJob*>;

struct ApiSources {
  std::shared_ptr<FleetState> fleet_state;
  std::function<std::vector<LocalJob>()> local_jobs;
  /// The leader as the store holds it; throws if it cannot be read.
  std::function<LeaderView()> leader;
  /// Whether this replica leads now (its elector's answer; false without one).
  std::function<bool()> leads;
  std::string replica_id;
  std::string coordinator;  // its description, no secrets
  std::string token;        // empty: read-only
  std::string output_dir = {};  // where this host keeps runs' output; empty: nowhere
};

/// The most of one run's output one answer carries.
inline constexpr std::size_t api_max_output_bytes = std::size_t{16} << 20;

/// How long one read of the fleet's index (registry, catalogue, controls)
/// and of a job's ledger serves every request: bounds the store reads the
/// API causes (one ledger read per job per second at most).
inline constexpr std::chrono::milliseconds api_view_lifetime{1000};
/// How long a request waits for the page another request is building.
inline constexpr std::chrono::seconds api_page_wait{5};
/// Jobs whose ledger read is kept for api_view_lifetime: four full pages.
inline constexpr std::size_t api_ledger_cached_jobs = 4 * api_max_page_jobs;
/// runs?limit=: 1 to 1,000 (default 50); the fleet document's recent runs: 50.
inline constexpr std::size_t api_max_runs = 1000;
inline constexpr std::size_t api_default_runs = 50;
inline constexpr std::size_t api_recent_runs = 50;
/// runs? answers: one ledger read at a time, each serving its job for
/// api_view_lifetime; at most this many jobs' reads kept.
inline constexpr std::size_t api_runs_cached_jobs = 256;

class ApiService {
 public:
  explicit ApiService(ApiSources sources);
  /// Never throws: every failure is a JSON answer {"error": "…"}.
  [[nodiscard]] HttpAnswer handle(const HttpRequest& request);

 private:
  HttpAnswer route(const HttpRequest& request);
  HttpAnswer jobs(const HttpRequest& request);
  HttpAnswer job(const std::string& key);
  HttpAnswer runs(const std::string& key, const HttpRequest& request);
  HttpAnswer replicas();
  HttpAnswer leader();
  HttpAnswer fleet(const HttpRequest& request);
  HttpAnswer control(const std::string& key, const std::string& action, const HttpRequest& request);
  /// GET /api/v1/jobs/KEY/output[?fire=FIRE]: a run's output kept on this host.
  HttpAnswer output(const std::string& key, const HttpRequest& request);
  /// The token's check; an answer when it refuses.
  std::optional<HttpAnswer> refuse_token(const HttpRequest& request) const;
  /// The fleet's index (read_fleet_index()), read at most once per
  /// api_view_lifetime: the replicas, and every job without its ledger.
  std::shared_ptr<const FleetIndex> index();
  /// The jobs `query` selects, a page, each with its ledger and next fire.
  struct JobsPage {
    std::vector<JobView> jobs;
    std::size_t total = 0;              // the index's jobs with the prefix, whatever their state
    std::optional<std::string> next;    // where the next page starts (its `after`), if one may
  };
  JobsPage page(const JobsQuery& query, Instant at);
  /// `job` of the index, its ledger fields filled from a read at most
  /// api_view_lifetime old. Called with a PageTurn held.
  void fill_ledger(JobView& job);
  /// One job of the index with its ledger and next fire; nullopt if the
  /// index has no such job.
  std::optional<JobView> one_job(const std::string& key, Instant at);
  /// A job with what this replica knows of it.
  [[nodiscard]] static ApiJob api_job(const JobView& job, const LocalIndex& local, Instant at);

  /// The store's clock: every time the views compare (liveness, expiry).
  Instant fleet_now();

  ApiSources sources_;
  std::unique_ptr<StoreClock> store_clock_;  // null without a fleet state
  std::mutex index_mutex_;  // one reader at a time; guards index_, index_read_at_
  std::shared_ptr<const FleetIndex> index_;
  std::chrono::steady_clock::time_point index_read_at_;
  /// Jobs' ledger reads, each serving api_view_lifetime; one page built
  /// at a time (its store reads one after the other): the PageTurn's holder's.
  struct LedgerKept {
    std::chrono::steady_clock::time_point read_at;
    JobView job;
  };
  /// One page built at a time: page_busy_ (guarded by page_mutex_) is
  /// waited for at most api_page_wait, so a request behind a slow page
  /// answers 503 rather than holding an HTTP worker (and /healthz behind
  /// it) for as long as the store reads. (A flag and a condition variable,
  /// not a std::timed_mutex: ThreadSanitizer cannot follow the latter's
  /// timed lock.) ledgers_ and ledger_order_ belong to the page's builder.
  class PageTurn {
   public:
    explicit PageTurn(ApiService& api) : api_(api) {}
    PageTurn(const PageTurn&) = delete;
    PageTurn& operator=(const PageTurn&) = delete;
    ~PageTurn();

   private:
    ApiService& api_;
  };
  [[nodiscard]] PageTurn page_turn();
  std::mutex page_mutex_;
  std::condition_variable page_cv_;
  bool page_busy_ = false;
  std::map<std::string, LedgerKept> ledgers_;
  std::deque<std::pair<std::string, std::chrono::steady_clock::time_point>> ledger_order_;  // by read time
  /// The leader, read at most once per api_view_lifetime too (a store
  /// round trip, or a connection on NATS). Guarded by leader_mutex_.
  LeaderView cached_leader();
  std::mutex leader_mutex_;
  std::optional<LeaderView> leader_;
  std::chrono::steady_clock::time_point leader_read_at_;
  /// A job's newest `limit` records, read at most once per
  /// api_view_lifetime (and one read at a time): the ledger is readable
  /// without the token. Guarded by runs_mutex_.
  struct RunsRead {
    std::chrono::steady_clock::time_point read_at;
    std::size_t limit = 0;
    std::vector<FireRecord> records;
  };
  LedgerRead cached_runs(const std::string& key, std::size_t limit);
  std::mutex runs_mutex_;
  std::map<std::string, RunsRead> runs_;
};

}  // namespace fleetcron::daemon
