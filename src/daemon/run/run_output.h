// The output of past runs, kept on the replica that ran them: one file per
// fire under OUTPUT_DIR/REPLICA/JOB/, each attempt appended, named by its
// state (running, ok, failed), pruned per job by count and age
// (docs/daemon.md#output-of-past-runs).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fleetcron/fire_record.h"

namespace fleetcron::daemon {

/// How many runs' output each job keeps, and for how long.
struct OutputRetention {
  std::size_t keep_succeeded = 10;
  std::size_t keep_failed = 20;
  std::chrono::nanoseconds keep_for = std::chrono::hours{24 * 30};
};

/// The most runs' output kept per job and state.
inline constexpr std::size_t max_kept_runs = 1000;

enum class KeptState { running, succeeded, failed };
[[nodiscard]] std::string_view to_string(KeptState state) noexcept;

/// One run's output file.
struct KeptRun {
  std::string replica_id;  // the replica that ran it
  std::string fire_key;    // decoded from the name ("" when the name is a hash)
  KeptState state = KeptState::running;
  std::filesystem::path path;
  std::uintmax_t bytes = 0;
  std::filesystem::file_time_type modified{};
};

/// A file name for `text`: bytes other than letters, digits, '_', '-'
/// and a '.' not first percent-encoded; past 200 bytes a prefix, '~' and
/// 16 hex digits of a hash.
[[nodiscard]] std::string output_file_name(std::string_view text);

/// Every run of `job_key` kept under `dir`, by any replica, newest first.
/// A directory that does not exist holds none.
[[nodiscard]] std::vector<KeptRun> kept_runs(const std::filesystem::path& dir, const std::string& job_key);

/// The run `fire` names among `runs` (newest first): its fire key, or
/// JOB@FIRE (an instant as the fire key writes it); the newest when `fire`
/// is empty.
[[nodiscard]] std::optional<KeptRun> select_kept_run(const std::vector<KeptRun>& runs, const std::string& job_key,
                                                     const std::string& fire);
/// A kept run's output, at most `max_bytes` of its start (and a note of
/// what was left out); throws std::runtime_error naming the file.
[[nodiscard]] std::string read_kept_output(const KeptRun& run, std::size_t max_bytes);
/// Why no output of `fire` (or of the job's newest run) is kept under
/// `dir`, from the job's ledger records (newest first; empty when the
/// fleet keeps none): where it ran, or that it was pruned, or that no
/// such run is known.
[[nodiscard]] std::string explain_missing_output(const std::filesystem::path& dir, const std::string& job_key,
                                                 const std::string& fire, const std::vector<FireRecord>& ledger);

/// Appends one run's output to its file. Writes that fail are counted,
/// never thrown: a job does not fail because its output could not be kept.
class OutputWriter {
 public:
  OutputWriter(std::filesystem::path running, std::filesystem::path base, int attempt);
  ~OutputWriter();
  OutputWriter(const OutputWriter&) = delete;
  OutputWriter& operator=(const OutputWriter&) = delete;

  void line(std::string_view text);
  /// Closes the file and names it by the attempt's outcome.
  void finish(bool succeeded);
  /// Why the output is not (all) kept; empty when it is.
  [[nodiscard]] const std::string& error() const noexcept { return error_; }

 private:
  std::filesystem::path running_, base_;
  std::FILE* file_ = nullptr;
  std::string error_;
};

/// This replica's part of the output directory.
class RunOutputs {
 public:
  /// Creates `dir`/REPLICA (mode 0750) and locks it (flock of its .lock)
  /// for this process; throws std::runtime_error naming the path when it
  /// cannot, or when another live process holds the lock.
  RunOutputs(std::filesystem::path dir, std::string replica_id);
  ~RunOutputs();
  RunOutputs(const RunOutputs&) = delete;
  RunOutputs& operator=(const RunOutputs&) = delete;

  /// The file of `fire_key`'s attempt `attempt` (1 first), created or
  /// reopened: a retry appends to the attempt before it.
  [[nodiscard]] std::unique_ptr<OutputWriter> open(const std::string& job_key, const std::string& fire_key, int attempt);
  /// Removes the job's oldest finished runs on this host (every replica
  /// folder) beyond `retention`'s counts, and any file not written to for
  /// longer than its age (a run whose daemon died mid-way included);
  /// returns how many files went.
  std::size_t prune(const std::string& job_key, const OutputRetention& retention);
  /// prune() for every job on this host, then the folders left empty and
  /// those of replicas no process holds any more (at start).
  std::size_t prune_host(const OutputRetention& retention);

  [[nodiscard]] const std::filesystem::path& directory() const noexcept { return replica_dir_; }

 private:
  std::size_t prune_named(const std::string& job_name, const OutputRetention& retention);
  /// Whether a live process holds `replica_dir`'s lock.
  static bool locked_elsewhere(const std::filesystem::path& replica_dir);

  std::filesystem::path dir_, replica_dir_;
  int lock_fd_ = -1;
};

}  // namespace fleetcron::daemon
