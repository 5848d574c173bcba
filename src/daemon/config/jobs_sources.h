// The jobs of several files and directories, as `run` and `validate` take
// them: `fleetcron run /etc/crontab /etc/cron.d/ extra.cron`.
//
// A directory is read as cron reads /etc/cron.d: its regular files (or
// symlinks to them) in name order, skipping those whose names run-parts
// would skip (anything but letters, digits, '_' and '-': `.placeholder`,
// `job.dpkg-old`, `job~`) and subdirectories; each skip is reported.
//
// The format of each file (docs/daemon.md#system-crontabs): its own
// `# fleetcron-file: format=` line, else the one asked for, else (auto)
// system for /etc/crontab and the files of /etc/cron.d, user for any other
// (a directory may hold users' crontabs, without the column).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "daemon/config/jobs_file.h"

namespace fleetcron::daemon {

/// A directory entry that was not read, and why.
struct SkippedJobsFile {
  std::string path;
  std::string reason;
};

/// Every job of the sources, keys unique across them.
struct JobsSources {
  std::vector<JobsFile> files;  // in the order given, a directory's in name order
  std::vector<SkippedJobsFile> skipped;

  [[nodiscard]] std::size_t job_count() const;
  /// Each job once, in file order.
  [[nodiscard]] std::vector<const JobDefinition*> jobs() const;
  /// "a.cron", or "a.cron and 2 more files", for log lines.
  [[nodiscard]] std::string describe() const;
};

/// Whether a cron.d file of this name is read (run-parts' rule).
[[nodiscard]] bool is_cron_d_name(std::string_view name);

/// The format a file gets unless it says otherwise: `chosen`, or if none
/// (auto), system for /etc/crontab and files in /etc/cron.d, user
/// otherwise (`from_directory` changes nothing: kept for the callers).
[[nodiscard]] CrontabFormat default_format(const std::string& path, bool from_directory,
                                           std::optional<CrontabFormat> chosen);

/// Reads every path (load_jobs_file for each file); throws JobsFileError
/// for the first file that fails, for a path that is neither a file nor a
/// directory, for a key used twice across files, and for more than
/// max_jobs jobs in all. No path at all is an error too.
[[nodiscard]] JobsSources load_jobs_sources(const std::vector<std::string>& paths, const ParseOptions& options,
                                            const JobDefaults& defaults, std::optional<CrontabFormat> format);

}  // namespace fleetcron::daemon
