#include "daemon/run_output.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <system_error>

#include "core/fnv1a.h"
#include "core/percent_decoding.h"

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

std::vector<KeptRun> kept_runs(const fs::path& dir, const std::string& job_key) {
  std::vector<KeptRun> runs;
  const std::string job_name = output_file_name(job_key);
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
  std::string text(max_bytes, '\0');
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

RunOutputs::RunOutputs(fs::path dir, std::string replica_id) : replica_dir_(std::move(dir) / output_file_name(replica_id)) {
  std::error_code error;
  fs::create_directories(replica_dir_, error);
  if (!error) fs::permissions(replica_dir_, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec, error);
  if (error) throw std::runtime_error(fmt::format("{}: {}", replica_dir_.string(), error.message()));
}

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
  std::vector<KeptRun> runs;
  add_runs(replica_dir_ / output_file_name(job_key), "", runs);
  newest_first(runs);
  const auto oldest_kept = fs::file_time_type::clock::now() -
                           std::chrono::duration_cast<fs::file_time_type::duration>(retention.keep_for);
  std::size_t succeeded = 0, failed = 0, removed = 0;
  for (const auto& run : runs) {
    if (run.state == KeptState::running) continue;  // being written, or its runner died: listed as such
    std::size_t& count = run.state == KeptState::succeeded ? succeeded : failed;
    const std::size_t keep = run.state == KeptState::succeeded ? retention.keep_succeeded : retention.keep_failed;
    if (++count <= keep && run.modified >= oldest_kept) continue;
    std::error_code error;
    if (fs::remove(run.path, error)) ++removed;
  }
  return removed;
}

}  // namespace fleetcron::daemon
