#include "daemon/config/jobs_sources.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <system_error>

namespace fleetcron::daemon {

namespace fs = std::filesystem;

bool is_cron_d_name(std::string_view name) {
  return !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
  });
}

CrontabFormat default_format(const std::string& path, bool from_directory, std::optional<CrontabFormat> chosen) {
  if (chosen) return *chosen;
  const fs::path given = fs::path(path).lexically_normal();
  (void)from_directory;  // another directory may hold user crontabs (/var/spool/cron/crontabs): not guessed
  if (given == "/etc/crontab" || given.parent_path() == "/etc/cron.d") return CrontabFormat::system;
  return CrontabFormat::user;
}

std::size_t JobsSources::job_count() const {
  std::size_t count = 0;
  for (const auto& file : files) count += file.jobs.size();
  return count;
}

std::vector<const JobDefinition*> JobsSources::jobs() const {
  std::vector<const JobDefinition*> out;
  out.reserve(job_count());
  for (const auto& file : files) {
    for (const auto& job : file.jobs) out.push_back(&job);
  }
  return out;
}

std::string JobsSources::describe() const {
  if (files.empty()) return "no jobs file";
  if (files.size() == 1) return files.front().path;
  return fmt::format("{} and {} more file(s)", files.front().path, files.size() - 1);
}

namespace {

/// The files of a cron.d-style directory to read, in name order; the
/// others go to `skipped`.
std::vector<std::string> directory_files(const std::string& directory, std::vector<SkippedJobsFile>& skipped) {
  std::error_code error;
  std::vector<fs::path> entries;
  for (fs::directory_iterator it(directory, error), end; !error && it != end; it.increment(error)) {
    entries.push_back(it->path());
  }
  if (error) throw JobsFileError(directory, 0, 0, fmt::format("cannot list the directory: {}", error.message()));
  std::sort(entries.begin(), entries.end());
  std::vector<std::string> files;
  for (const auto& entry : entries) {
    const std::string name = entry.filename().string();
    if (!is_cron_d_name(name)) {
      skipped.push_back({entry.string(), "not a name cron reads in a cron.d directory (letters, digits, '_' and '-' only)"});
      continue;
    }
    const fs::file_status status = fs::status(entry, error);  // through a symlink
    if (error) throw JobsFileError(entry.string(), 0, 0, fmt::format("cannot read: {}", error.message()));
    if (fs::is_directory(status)) {
      skipped.push_back({entry.string(), "a directory (not read: cron.d is not searched recursively)"});
    } else if (!fs::is_regular_file(status)) {
      skipped.push_back({entry.string(), "not a regular file"});
    } else {
      files.push_back(entry.string());
    }
  }
  return files;
}

/// Refuses a key that an earlier file's job has, naming both places.
void check_keys_across(const JobsSources& sources) {
  std::map<std::string, const JobDefinition*> seen;
  std::size_t count = 0;
  for (const auto* job : sources.jobs()) {
    if (++count > max_jobs) {
      throw JobsFileError(job->file, job->line, 1, fmt::format("more than {} jobs in all the files given", max_jobs));
    }
    const auto [it, inserted] = seen.emplace(job->key, job);
    if (!inserted) {
      throw JobsFileError(job->file, job->line, 1,
                          fmt::format("key \"{}\" is already used by the job at {}:{}{}", job->key, it->second->file,
                                      it->second->line, job->derived_key ? " (the same spec and command)" : ""));
    }
  }
}

}  // namespace

JobsSources load_jobs_sources(const std::vector<std::string>& paths, const ParseOptions& options,
                              const JobDefaults& defaults, std::optional<CrontabFormat> format) {
  if (paths.empty()) throw JobsFileError("fleetcron", 0, 0, "no jobs file: give one or more files or directories");
  JobsSources sources;
  for (const auto& path : paths) {
    std::error_code error;
    if (fs::is_directory(path, error)) {
      for (const auto& file : directory_files(path, sources.skipped)) {
        sources.files.push_back(load_jobs_file(file, options, defaults, default_format(file, true, format)));
      }
    } else {
      sources.files.push_back(load_jobs_file(path, options, defaults, default_format(path, false, format)));
    }
  }
  check_keys_across(sources);
  return sources;
}

}  // namespace fleetcron::daemon
