#include "daemon/http/api_service.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <iterator>
#include <variant>
#include <stdexcept>

#include "daemon/observe/job_lookup.h"
#include "daemon/observe/json_output.h"
#include "daemon/run/run_output.h"
#include "fleetcron/cron.h"
#include "fleetcron/duration.h"

namespace fleetcron::daemon {

namespace {

constexpr std::string_view prefix = "/api/v1";

HttpAnswer json(int status, std::string body) { return HttpAnswer{status, "application/json", std::move(body) + "\n", {}}; }
HttpAnswer error(int status, const std::string& message) {
  return json(status, error_document(message));
}

/// Compares without leaking, through its time, how much of the token matched.
bool same_secret(std::string_view given, std::string_view expected) {
  unsigned difference = given.size() == expected.size() ? 0U : 1U;
  for (std::size_t i = 0; i < expected.size(); ++i) {
    const auto a = static_cast<unsigned>(static_cast<unsigned char>(i < given.size() ? given[i] : '\0'));
    difference |= a ^ static_cast<unsigned>(static_cast<unsigned char>(expected[i]));
  }
  return difference == 0;
}

/// The index's job of `key` (the index is by key), or nullptr.
const IndexedJob* find_job(const FleetIndex& index, std::string_view key) {
  const auto it = std::lower_bound(index.jobs.begin(), index.jobs.end(), key,
                                   [](const IndexedJob& j, std::string_view k) { return j.key < k; });
  return it == index.jobs.end() || it->key != key ? nullptr : &*it;
}

LocalIndex by_key(const std::vector<LocalJob>& local) {
  LocalIndex out;
  for (const auto& job : local) out.emplace(job.key, &job);
  return out;
}

}  // namespace

ApiService::ApiService(ApiSources sources)
    : sources_(std::move(sources)),
      store_clock_(sources_.fleet_state ? std::make_unique<StoreClock>(*sources_.fleet_state, system_clock()) : nullptr) {}

Instant ApiService::fleet_now() {
  if (store_clock_) return store_clock_->now();
  return std::chrono::time_point_cast<Instant::duration>(std::chrono::system_clock::now());
}

HttpAnswer ApiService::handle(const HttpRequest& request) {
  try {
    return route(request);
  } catch (const std::exception& e) {
    return error(503, e.what());
  }
}

HttpAnswer ApiService::route(const HttpRequest& request) {
  if (!request.path.starts_with(prefix)) return error(404, fmt::format("no such path: {} (the API is under /api/v1/)", request.path));
  const std::string rest = request.path.substr(prefix.size());
  const bool get = request.method == "GET" || request.method == "HEAD";
  const bool post = request.method == "POST";
  const auto only = [&](bool allowed, std::string_view method) {
    return allowed ? std::optional<HttpAnswer>{}
                   : std::optional<HttpAnswer>{error(405, fmt::format("{} {}: use {}", request.method, request.path, method))};
  };
  if (rest == "/jobs" || rest == "/replicas" || rest == "/leader" || rest == "/fleet") {
    if (auto refused = only(get, "GET")) return *refused;
    return rest == "/jobs" ? jobs(request) : rest == "/replicas" ? replicas() : rest == "/leader" ? leader() : fleet(request);
  }
  if (rest.starts_with("/jobs/") && rest.size() > 6) {
    const std::string tail = rest.substr(6);
    for (const std::string action : {"trigger", "pause", "resume", "runs", "output"}) {
      const std::string suffix = "/" + action;
      if (tail.size() > suffix.size() && tail.ends_with(suffix)) {
        const std::string key = tail.substr(0, tail.size() - suffix.size());
        if (action == "runs" || action == "output") {
          if (auto refused = only(get, "GET")) return *refused;
          return action == "runs" ? runs(key, request) : output(key, request);
        }
        if (auto refused = only(post, "POST")) return *refused;
        return control(key, action, request);
      }
    }
    if (auto refused = only(get, "GET")) return *refused;
    return job(tail);
  }
  return error(404, fmt::format("no such path: {} (see docs/api.md)", request.path));
}

std::shared_ptr<const FleetIndex> ApiService::index() {
  if (!sources_.fleet_state) throw std::runtime_error("no fleet state: the daemon runs with --catch-up 0 and --history 0");
  std::lock_guard guard(index_mutex_);
  const auto steady = std::chrono::steady_clock::now();
  if (!index_ || steady - index_read_at_ >= api_view_lifetime) {
    index_ = std::make_shared<const FleetIndex>(read_fleet_index(*sources_.fleet_state, fleet_now()));
    index_read_at_ = std::chrono::steady_clock::now();  // its second counts from when it was read (100,000 jobs: 0.1–0.3 s)
  }
  return index_;
}

void ApiService::fill_ledger(JobView& job) {
  const auto steady = std::chrono::steady_clock::now();
  const auto fresh = [&](const LedgerKept& kept) { return steady - kept.read_at < api_view_lifetime; };
  if (const auto it = ledgers_.find(job.key); it != ledgers_.end() && fresh(it->second)) {
    copy_job_ledger(it->second.job, job);
    return;
  }
  read_job_ledger(*sources_.fleet_state, job);
  // The oldest reads go first (ledger_order_ is by read time; a key read
  // again is there twice, its older place skipped).
  while (ledgers_.size() >= api_ledger_cached_jobs && !ledger_order_.empty()) {
    const auto& [key, read_at] = ledger_order_.front();
    if (const auto it = ledgers_.find(key); it != ledgers_.end() && it->second.read_at == read_at) ledgers_.erase(it);
    ledger_order_.pop_front();
  }
  ledgers_.insert_or_assign(job.key, LedgerKept{steady, job});
  ledger_order_.emplace_back(job.key, steady);
  if (ledger_order_.size() > 2 * api_ledger_cached_jobs) {  // the same few keys read again and again
    std::erase_if(ledger_order_, [&](const auto& place) {
      const auto it = ledgers_.find(place.first);
      return it == ledgers_.end() || it->second.read_at != place.second;
    });
  }
}

ApiService::PageTurn ApiService::page_turn() {
  std::unique_lock lock(page_mutex_);
  if (!page_cv_.wait_for(lock, api_page_wait, [&] { return !page_busy_; })) {
    throw std::runtime_error(fmt::format("another request's page of jobs has been reading the fleet state for more "
                                         "than {} s; try again",
                                         api_page_wait.count()));
  }
  page_busy_ = true;
  return PageTurn(*this);
}

ApiService::PageTurn::~PageTurn() {
  {
    std::lock_guard guard(api_.page_mutex_);
    api_.page_busy_ = false;
  }
  api_.page_cv_.notify_one();
}

ApiService::JobsPage ApiService::page(const JobsQuery& query, Instant at) {
  const auto fleet_index = index();
  const auto& all = fleet_index->jobs;  // by key
  const auto key_below = [](const IndexedJob& j, std::string_view k) { return j.key < k; };
  const auto first = std::lower_bound(all.begin(), all.end(), std::string_view(query.prefix), key_below);
  const auto past = std::find_if(first, all.end(), [&](const IndexedJob& j) { return !j.key.starts_with(query.prefix); });
  JobsPage out;
  out.total = static_cast<std::size_t>(past - first);
  auto it = first;
  if (!query.after.empty()) {
    it = std::upper_bound(first, past, std::string_view(query.after),
                          [](std::string_view k, const IndexedJob& j) { return k < j.key; });
  }
  const PageTurn turn = page_turn();
  std::size_t ledgers_read = 0;
  for (; it != past; ++it) {
    if (out.jobs.size() == query.limit || (query.state && needs_ledger(*query.state) && ledgers_read == api_max_ledger_scan)) {
      out.next = std::prev(it)->key;
      break;
    }
    JobView job = it->view();
    if (query.state && !needs_ledger(*query.state) && !in_state(job, *query.state)) continue;
    fill_ledger(job);
    ++ledgers_read;
    if (query.state && !in_state(job, *query.state)) continue;
    find_next_fire(job, at);
    out.jobs.push_back(std::move(job));
  }
  return out;
}

std::optional<JobView> ApiService::one_job(const std::string& key, Instant at) {
  const auto fleet_index = index();
  const IndexedJob* found = find_job(*fleet_index, key);
  if (found == nullptr) return std::nullopt;
  JobView job = found->view();
  const PageTurn turn = page_turn();
  fill_ledger(job);
  find_next_fire(job, at);
  return job;
}

ApiJob ApiService::api_job(const JobView& job, const LocalIndex& local, Instant at) {
  const auto mine = local.find(job.key);
  const LocalJob* here = mine == local.end() ? nullptr : mine->second;
  ApiJob entry{&job, {}, std::nullopt, here != nullptr};
  if (here != nullptr && here->schedule) {
    entry.next_fires = next_n(*here->schedule, at, 3);
  } else if (job.next_fire) {
    entry.next_fires.push_back(*job.next_fire);
  }
  if (here != nullptr) {
    entry.scope = here->at_start ? "replica (@reboot)" : std::string(to_string(here->scope));
  } else if (job.catalogued) {
    entry.scope = job.catalogued->every_replica ? "replica" : "fleet";
  }
  return entry;
}

HttpAnswer ApiService::jobs(const HttpRequest& request) {
  auto query = parse_jobs_query(request.query);
  if (auto* failure = std::get_if<std::string>(&query)) return error(400, *failure);
  const Instant at = fleet_now();
  const JobsPage found = page(std::get<JobsQuery>(query), at);
  const auto local_jobs = sources_.local_jobs();
  const LocalIndex local = by_key(local_jobs);
  std::vector<ApiJob> items;
  items.reserve(found.jobs.size());
  for (const auto& job : found.jobs) items.push_back(api_job(job, local, at));
  return json(200, api_jobs_document(at, items, found.total, found.next));
}

HttpAnswer ApiService::job(const std::string& key) {
  const Instant at = fleet_now();
  const auto found = one_job(key, at);
  if (!found) return error(404, fmt::format("no job \"{}\" in the fleet's catalogue or controls", key));
  const auto local_jobs = sources_.local_jobs();
  return json(200, api_job_document(api_job(*found, by_key(local_jobs), at)));
}

HttpAnswer ApiService::runs(const std::string& key, const HttpRequest& request) {
  std::size_t limit = api_default_runs;
  if (const auto it = request.query.find("limit"); it != request.query.end()) {
    const std::string& text = it->second;
    const auto [end, failure] = std::from_chars(text.data(), text.data() + text.size(), limit);
    if (failure != std::errc{} || end != text.data() + text.size() || limit < 1 || limit > api_max_runs) {
      return error(400, fmt::format("limit \"{}\": expected 1 to {}", text, api_max_runs));
    }
  }
  if (!sources_.fleet_state) return error(503, "no fleet state: the daemon keeps no ledger (--history 0)");
  const LedgerRead read = cached_runs(key, limit);
  if (read.status != LedgerRead::Status::found) return error(503, fmt::format("job \"{}\": {}", key, read.error));
  return json(200, api_runs_document(key, read.records));
}

HttpAnswer ApiService::replicas() { return json(200, api_replicas_document(index()->replicas)); }

LedgerRead ApiService::cached_runs(const std::string& key, std::size_t limit) {
  std::lock_guard guard(runs_mutex_);  // one store read at a time
  const auto steady = std::chrono::steady_clock::now();
  const auto fresh = [&](const RunsRead& kept) { return steady - kept.read_at < api_view_lifetime; };
  if (const auto it = runs_.find(key); it != runs_.end() && fresh(it->second) &&
                                        (it->second.limit >= limit || it->second.records.size() < it->second.limit)) {
    LedgerRead read{LedgerRead::Status::found, it->second.records, {}};
    if (read.records.size() > limit) read.records.resize(limit);
    return read;
  }
  LedgerRead read = sources_.fleet_state->read_fires(key, limit);
  if (read.status != LedgerRead::Status::found) return read;  // a failure is not kept
  if (runs_.size() >= api_runs_cached_jobs) std::erase_if(runs_, [&](const auto& kept) { return !fresh(kept.second); });
  if (runs_.size() >= api_runs_cached_jobs) {
    runs_.erase(std::min_element(runs_.begin(), runs_.end(), [](const auto& a, const auto& b) {
      return a.second.read_at < b.second.read_at;
    }));
  }
  runs_[key] = RunsRead{steady, limit, read.records};
  return read;
}

LeaderView ApiService::cached_leader() {
  std::lock_guard guard(leader_mutex_);
  const auto steady = std::chrono::steady_clock::now();
  if (!leader_ || steady - leader_read_at_ >= api_view_lifetime) {
    leader_ = sources_.leader();  // a failure is not cached: it throws
    leader_read_at_ = steady;
  }
  return *leader_;
}

HttpAnswer ApiService::leader() { return json(200, api_leader_document(cached_leader())); }

HttpAnswer ApiService::fleet(const HttpRequest& request) {
  auto query = parse_jobs_query(request.query);
  if (auto* failure = std::get_if<std::string>(&query)) return error(400, *failure);
  ApiFleet document;
  document.at = fleet_now();
  const JobsPage found = page(std::get<JobsQuery>(query), document.at);
  const auto fleet_index = index();
  document.replica_id = sources_.replica_id;
  document.coordinator = sources_.coordinator;
  document.writable = !sources_.token.empty();
  document.replicas = &fleet_index->replicas;
  document.jobs_total = found.total;
  document.catalogue_error = fleet_index->catalogue_error;
  document.next = found.next;
  const auto local_jobs = sources_.local_jobs();
  const LocalIndex local = by_key(local_jobs);
  for (const auto& job : found.jobs) {
    document.jobs.push_back(api_job(job, local, document.at));
    document.recent_runs.insert(document.recent_runs.end(), job.recent.begin(), job.recent.end());
  }
  std::sort(document.recent_runs.begin(), document.recent_runs.end(),
            [](const FireRecord& a, const FireRecord& b) { return a.scheduled_at > b.scheduled_at; });
  if (document.recent_runs.size() > api_recent_runs) document.recent_runs.resize(api_recent_runs);
  try {
    document.leader = cached_leader();
  } catch (const std::exception& e) {
    document.leader_error = e.what();
  }
  document.this_replica_leads = sources_.leads && sources_.leads();
  return json(200, api_fleet_document(document));
}

std::optional<HttpAnswer> ApiService::refuse_token(const HttpRequest& request) const {
  if (sources_.token.empty() || same_secret(request.authorization, "Bearer " + sources_.token)) return std::nullopt;
  HttpAnswer refused = error(401, request.authorization.empty() ? "an Authorization: Bearer token is required"
                                                                : "the bearer token is not the one configured");
  refused.www_authenticate = "Bearer realm=\"fleetcron\"";
  return refused;
}

HttpAnswer ApiService::output(const std::string& key, const HttpRequest& request) {
  // A run's output may hold what its job printed of secrets: reading it
  // needs the token, as a write does (the page asks for it).
  if (sources_.token.empty()) {
    return error(403, "reading a run's output needs the API token: the daemon runs without --api-token-file "
                      "(on this host, `fleetcron logs` reads it)");
  }
  if (auto refused = refuse_token(request)) return *refused;
  if (sources_.output_dir.empty()) return error(404, "this replica keeps no runs' output (--output-dir none)");
  const auto fire_query = request.query.find("fire");
  const std::string fire = fire_query == request.query.end() ? std::string() : fire_query->second;
  if (const auto run = select_kept_run(kept_runs(sources_.output_dir, key), key, fire)) {
    const std::string text = read_kept_output(*run, api_max_output_bytes);
    return json(200, api_output_document(
                         {key, run->fire_key, run->replica_id, std::string(to_string(run->state)), run->bytes, text}));
  }
  std::vector<FireRecord> ledger;
  if (sources_.fleet_state) {
    const LedgerRead read = cached_runs(key, fleet_view_ledger_depth);
    if (read.status == LedgerRead::Status::found) ledger = read.records;
  }
  return error(404, explain_missing_output(sources_.output_dir, key, fire, ledger));
}

HttpAnswer ApiService::control(const std::string& key, const std::string& action, const HttpRequest& request) {
  if (sources_.token.empty()) {
    return error(403, "the API is read-only: the daemon runs without --api-token-file");
  }
  if (auto refused = refuse_token(request)) return *refused;
  const auto fleet_index = index();
  const auto local = sources_.local_jobs();
  const IndexedJob* found = find_job(*fleet_index, key);
  const bool here = std::any_of(local.begin(), local.end(), [&](const LocalJob& l) { return l.key == key; });
  if (found == nullptr && !here) return error(404, fmt::format("no job \"{}\" in the fleet's catalogue or on this replica", key));
  if (!here && found != nullptr && found->catalogued && found->catalogued->removed) {
    return error(409, removed_job_refusal(key, found->catalogued->seen_by, *found->catalogued->removed,
                                          fmt::format("fleetcron {} --force acts on it anyway", action)));
  }
  const std::string by = ("api@" + sources_.replica_id).substr(0, 64);
  const auto request_id = request.query.find("request_id");
  const std::string_view request_key = request_id == request.query.end() ? std::string_view() : request_id->second;
  if (!request_key.empty() && action != "trigger") return error(400, "request_id: only a trigger takes one");
  if (!request_key.empty()) {
    try {
      check_trigger_request_id(request_key);
    } catch (const std::invalid_argument& e) {
      return error(400, e.what());
    }
  }
  const ControlChange change =
      action == "trigger"
          ? sources_.fleet_state->request_trigger(key, by, fleet_now(), default_trigger_wait, request_key)
          : sources_.fleet_state->set_paused(key, action == "pause", by, fleet_now());
  if (change.status == ControlChange::Status::error) return error(503, fmt::format("{} \"{}\": {}", action, key, change.error));
  {
    std::lock_guard guard(index_mutex_);
    index_.reset();  // the next read shows the change
  }
  const bool changed = change.status == ControlChange::Status::changed;
  return json(action == "trigger" ? 202 : 200,
              control_document({key, action, changed,
                                action == "trigger" ? std::optional<std::string>(change.trigger_id) : std::nullopt, by}));
}

}  // namespace fleetcron::daemon
