#include "daemon/run/run_output.h"

#include <fmt/format.h>

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <set>
#include <stdexcept>
#include <system_error>

#include "core/support/fnv1a.h"
#include "core/support/percent_decoding.h"

namespace fleetcron::daemon {

namespace fs = std::filesystem;

namespace {

constexpr std::size_t max_name_bytes = 200;

bool plain(char c, bool first) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ||
         (c == '.' && !first);
}

struct Suffix {
  std::string_view text;
  KeptState state;
};
constexpr Suffix suffixes[] = {{".running", KeptState::running}, {".ok", KeptState::succeeded}, {".failed", KeptState::failed}};

fs::path with_suffix(const fs::path& base, KeptState state) {
  for (const auto& suffix : suffixes) {
    if (suffix.state == state) return fs::path(base.string() + std::string(suffix.text));
  }
  return base;
}

std::string decoded(std::string_view name) {
  if (name.find('~') != std::string_view::npos) return {};  // a hash: the text is not in the name
  std::size_t bad_at = 0;
  return detail::percent_decode(name, bad_at).value_or(std::string());
}

/// The runs in one replica's directory of one job.
void add_runs(const fs::path& job_dir, const std::string& replica_id, std::vector<KeptRun>& runs) {
  std::error_code error;
  for (fs::directory_iterator it(job_dir, error), end; !error && it != end; it.increment(error)) {
    const std::string name = it->path().filename().string();
    for (const auto& suffix : suffixes) {
      if (!name.ends_with(suffix.text) || !it->is_regular_file(error)) continue;
      KeptRun run{replica_id, decoded(std::string_view(name).substr(0, name.size() - suffix.text.size())), suffix.state,
                  it->path(), it->file_size(error), it->last_write_time(error)};
      if (!error) runs.push_back(std::move(run));
      error.clear();
      break;
    }
  }
}

void newest_first(std::vector<KeptRun>& runs) {
  std::sort(runs.begin(), runs.end(), [](const KeptRun& a, const KeptRun& b) { return a.modified > b.modified; });
}

}  // namespace

std::string_view to_string(KeptState state) noexcept {
  switch (state) {
    case KeptState::running: return "running";
    case KeptState::succeeded: return "succeeded";
    case KeptState::failed: return "failed";
  }
  return "unknown";
}

std::string output_file_name(std::string_view text) {
  std::string name;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (plain(c, i == 0)) {
      name.push_back(c);
    } else {
      name += fmt::format("%{:02X}", static_cast<unsigned char>(c));
    }
  }
  if (name.size() <= max_name_bytes) return name;
  return fmt::format("{}~{:016x}", name.substr(0, max_name_bytes - 17), detail::fnv1a(text));
}

namespace {

/// Every replica's runs of the job whose folder is `job_name`, newest first.
std::vector<KeptRun> runs_named(const fs::path& dir, const std::string& job_name) {
  std::vector<KeptRun> runs;
  std::error_code error;
  for (fs::directory_iterator it(dir, error), end; !error && it != end; it.increment(error)) {
    std::error_code ignored;
    if (!it->is_directory(ignored)) continue;
    const fs::path job_dir = it->path() / job_name;
    if (fs::is_directory(job_dir, ignored)) add_runs(job_dir, decoded(it->path().filename().string()), runs);
  }
  newest_first(runs);
  return runs;
}

}  // namespace

std::vector<KeptRun> kept_runs(const fs::path& dir, const std::string& job_key) {
  return runs_named(dir, output_file_name(job_key));
}

std::optional<KeptRun> select_kept_run(const std::vector<KeptRun>& runs, const std::string& job_key,
                                       const std::string& fire) {
  if (runs.empty()) return std::nullopt;
  if (fire.empty()) return runs.front();
  for (const auto& run : runs) {
    if (run.fire_key == fire || run.fire_key == job_key + "@" + fire) return run;
  }
  return std::nullopt;
}

std::string read_kept_output(const KeptRun& run, std::size_t max_bytes) {
  std::FILE* file = std::fopen(run.path.c_str(), "r");
  if (file == nullptr) throw std::runtime_error(fmt::format("{}: {}", run.path.string(), std::strerror(errno)));
  std::string text(static_cast<std::size_t>(std::min<std::uintmax_t>(run.bytes, max_bytes)), '\0');
  text.resize(std::fread(text.data(), 1, text.size(), file));
  const bool more = std::fgetc(file) != EOF;
  std::fclose(file);
  if (more) text += fmt::format("\n[fleetcron: the rest of this file ({} bytes in all) is not shown]\n", run.bytes);
  return text;
}

std::string explain_missing_output(const fs::path& dir, const std::string& job_key, const std::string& fire,
                                   const std::vector<FireRecord>& ledger) {
  const FireRecord* found = nullptr;
  for (const auto& record : ledger) {
    if (!record.started_at) continue;  // a skip or a miss ran nothing
    if (fire.empty() || record.fire_key == fire || record.fire_key == job_key + "@" + fire) {
      found = &record;
      break;
    }
  }
  const std::string which = fire.empty() ? "the newest run" : "run " + fire;
  if (found == nullptr) {
    return fmt::format("no output of {} of job {} is kept in {}, and the ledger {}", which, job_key, dir.string(),
                       ledger.empty() ? "has no record of the job's runs (or the fleet keeps none)"
                                      : "has no record of such a run among the job's newest");
  }
  std::error_code error;
  if (fs::is_directory(dir / output_file_name(found->replica_id), error)) {
    return fmt::format("the output of {} ({}) ran on replica {} on this host and is kept no more: each job keeps its "
                       "newest keep-succeeded and keep-failed runs' output, none older than history_age",
                       which, found->fire_key, found->replica_id);
  }
  return fmt::format("the output of {} ({}) is kept on replica {}, which ran it, not on this host: run `fleetcron "
                     "logs {} {}` there, or GET /api/v1/jobs/{}/output?fire={} on its --http address",
                     which, found->fire_key, found->replica_id, job_key, found->fire_key, job_key, found->fire_key);
}

OutputWriter::OutputWriter(fs::path running, fs::path base, int attempt)
    : running_(std::move(running)), base_(std::move(base)) {
  file_ = std::fopen(running_.c_str(), "a");
  if (file_ == nullptr) {
    error_ = fmt::format("{}: {}", running_.string(), std::strerror(errno));
    return;
  }
  if (attempt > 1) line(fmt::format("--- fleetcron: attempt {} ---", attempt));
}

OutputWriter::~OutputWriter() {
  if (file_ != nullptr) std::fclose(file_);
}

void OutputWriter::line(std::string_view text) {
  if (file_ == nullptr) return;
  if (std::fwrite(text.data(), 1, text.size(), file_) != text.size() || std::fputc('\n', file_) == EOF ||
      std::fflush(file_) != 0) {
    if (error_.empty()) error_ = fmt::format("{}: {}", running_.string(), std::strerror(errno));
  }
}

void OutputWriter::finish(bool succeeded) {
  if (file_ == nullptr) return;
  if (std::fclose(file_) != 0 && error_.empty()) error_ = fmt::format("{}: {}", running_.string(), std::strerror(errno));
  file_ = nullptr;
  std::error_code error;
  fs::rename(running_, with_suffix(base_, succeeded ? KeptState::succeeded : KeptState::failed), error);
  if (error && error_.empty()) error_ = fmt::format("{}: {}", running_.string(), error.message());
}

RunOutputs::RunOutputs(fs::path dir, std::string replica_id)
    : dir_(std::move(dir)), replica_dir_(dir_ / output_file_name(replica_id)) {
  std::error_code error;
  fs::create_directories(replica_dir_, error);
  if (!error) fs::permissions(replica_dir_, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec, error);
  if (error) throw std::runtime_error(fmt::format("{}: {}", replica_dir_.string(), error.message()));
  // One process per replica folder: a twin under the same id (or another
  // fleet's replica with this name) would write into this one's files.
  const fs::path lock = replica_dir_ / ".lock";
  lock_fd_ = ::open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0640);
  if (lock_fd_ < 0) throw std::runtime_error(fmt::format("{}: {}", lock.string(), std::strerror(errno)));
  if (::flock(lock_fd_, LOCK_EX | LOCK_NB) != 0) {
    ::close(lock_fd_);
    throw std::runtime_error(fmt::format("{}: in use by another live process with this replica id", replica_dir_.string()));
  }
}

RunOutputs::~RunOutputs() { ::close(lock_fd_); }

std::unique_ptr<OutputWriter> RunOutputs::open(const std::string& job_key, const std::string& fire_key, int attempt) {
  const fs::path job_dir = replica_dir_ / output_file_name(job_key);
  std::error_code error;
  fs::create_directories(job_dir, error);
  const fs::path base = job_dir / output_file_name(fire_key);
  const fs::path running = with_suffix(base, KeptState::running);
  for (const KeptState earlier : {KeptState::failed, KeptState::succeeded}) {  // a retry, or a re-run
    std::error_code ignored;
    if (fs::exists(with_suffix(base, earlier), ignored)) fs::rename(with_suffix(base, earlier), running, ignored);
  }
  return std::make_unique<OutputWriter>(running, base, attempt);
}

std::size_t RunOutputs::prune(const std::string& job_key, const OutputRetention& retention) {
  return prune_named(output_file_name(job_key), retention);
}

std::size_t RunOutputs::prune_named(const std::string& job_name, const OutputRetention& retention) {
  const auto oldest_kept = fs::file_time_type::clock::now() -
                           std::chrono::duration_cast<fs::file_time_type::duration>(retention.keep_for);
  std::size_t succeeded = 0, failed = 0, removed = 0;
  for (const auto& run : runs_named(dir_, job_name)) {  // every replica's on this host: the bound is the host's
    bool keep = run.modified >= oldest_kept;  // a file written to within keep_for (a run that died mid-way: after it)
    if (run.state != KeptState::running) {
      std::size_t& count = run.state == KeptState::succeeded ? succeeded : failed;
      keep = keep && ++count <= (run.state == KeptState::succeeded ? retention.keep_succeeded : retention.keep_failed);
    }
    std::error_code error;
    if (!keep && fs::remove(run.path, error)) ++removed;
  }
  return removed;
}

std::size_t RunOutputs::prune_host(const OutputRetention& retention) {
  std::set<std::string> job_names;
  std::error_code error;
  for (fs::directory_iterator it(dir_, error), end; !error && it != end; it.increment(error)) {
    std::error_code ignored;
    for (fs::directory_iterator job(it->path(), ignored), none; !ignored && job != none; job.increment(ignored)) {
      if (job->is_directory(ignored)) job_names.insert(job->path().filename().string());
    }
  }
  std::size_t removed = 0;
  for (const auto& name : job_names) removed += prune_named(name, retention);
  // Folders left empty go, those of replicas gone from this host too (but
  // not a live one's: its lock file keeps it).
  for (fs::directory_iterator it(dir_, error), end; !error && it != end; it.increment(error)) {
    std::error_code ignored;
    for (fs::directory_iterator job(it->path(), ignored), none; !ignored && job != none; job.increment(ignored)) {
      if (job->is_directory(ignored) && fs::is_empty(job->path(), ignored)) fs::remove(job->path(), ignored);
    }
    if (it->path() != replica_dir_ && fs::exists(it->path() / ".lock", ignored) && !locked_elsewhere(it->path())) {
      if (std::distance(fs::directory_iterator(it->path(), ignored), fs::directory_iterator{}) == 1) {
        fs::remove_all(it->path(), ignored);
      }
    }
  }
  return removed;
}

bool RunOutputs::locked_elsewhere(const fs::path& replica_dir) {
  const int fd = ::open((replica_dir / ".lock").c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) return false;
  const bool locked = ::flock(fd, LOCK_EX | LOCK_NB) != 0;
  ::close(fd);
  return locked;
}

}  // namespace fleetcron::daemon
