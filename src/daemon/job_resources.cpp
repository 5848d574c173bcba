// resolve_job_resources (jobs_file.h): what a job names outside the jobs
// file — its directory, env file and user — checked and read at load, so
// a mistake is a load error at the option, not a failed run at 3 a.m.
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "daemon/env_file.h"
#include "daemon/jobs_file.h"

namespace fleetcron::daemon {

namespace {

/// Fails at the option's position in the jobs file, or at the job's line
/// naming [defaults] when the value came from the config file.
[[noreturn]] void fail_option(const JobsFile& file, const JobDefinition& job, const OptionOrigin& origin,
                              std::string_view option, const std::string& reason) {
  if (origin.line > 0) throw JobsFileError(file.path, origin.line, origin.column, fmt::format("{}: {}", option, reason));
  throw JobsFileError(file.path, job.line, 1, fmt::format("{} (from [defaults]): {}", option, reason));
}

/// Relative to the jobs file's directory, so a file and what it names
/// move together.
std::string resolve_path(const JobsFile& file, const std::string& path) {
  if (path.empty() || path.front() == '/') return path;
  return (std::filesystem::path(file.path).parent_path() / path).lexically_normal().string();
}

void resolve_directory(const JobsFile& file, JobDefinition& job) {
  if (job.working_directory.empty()) return;
  job.working_directory = resolve_path(file, job.working_directory);
  struct stat info {};
  if (::stat(job.working_directory.c_str(), &info) != 0) {
    fail_option(file, job, job.dir_origin, "dir", fmt::format("{}: {}", job.working_directory, std::strerror(errno)));
  }
  if (!S_ISDIR(info.st_mode)) {
    fail_option(file, job, job.dir_origin, "dir", fmt::format("{}: not a directory", job.working_directory));
  }
}

void resolve_env_file(const JobsFile& file, JobDefinition& job) {
  if (job.env_file.empty()) return;
  job.env_file = resolve_path(file, job.env_file);
  struct stat info {};
  if (::stat(job.env_file.c_str(), &info) != 0) {
    fail_option(file, job, job.env_file_origin, "env-file", fmt::format("{}: {}", job.env_file, std::strerror(errno)));
  }
  // Not a FIFO or a device: reading one could block or never end.
  if (!S_ISREG(info.st_mode)) {
    fail_option(file, job, job.env_file_origin, "env-file", fmt::format("{}: not a regular file", job.env_file));
  }
  for (auto& variable : load_env_file(job.env_file)) job.environment.push_back(std::move(variable));
}

void resolve_user(const JobsFile& file, JobDefinition& job) {
  job.run_as.reset();
  if (job.user.empty()) return;
  RunAs account;
  try {
    account = resolve_run_as(job.user);
  } catch (const std::exception& e) {
    fail_option(file, job, job.user_origin, "user", e.what());
  }
  if (const std::string refusal = run_as_refusal(account); !refusal.empty()) {
    fail_option(file, job, job.user_origin, "user", refusal);
  }
  if (account.uid != ::geteuid() || ::geteuid() == 0) job.run_as = std::move(account);
}

}  // namespace

void resolve_job_resources(JobsFile& file) {
  for (auto& job : file.jobs) {
    resolve_directory(file, job);
    resolve_env_file(file, job);
    resolve_user(file, job);
  }
}

}  // namespace fleetcron::daemon
