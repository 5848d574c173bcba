// resolve_job_resources (jobs_file.h): what a job names outside the jobs
// file — its directory, env file and user — checked and read at load, so
// a mistake is a load error at the option, not a failed run at 3 a.m.
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "daemon/config/env_file.h"
#include "daemon/config/jobs_file.h"

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
    if (job.user_from_column) {
      throw JobsFileError(
          file.path, job.user_origin.line, job.user_origin.column,
          fmt::format("the user column: {}; {} reads its lines as system crontab lines (spec, user, command){}", e.what(),
                      file.path, file.format_line > 0 ? fmt::format(" (format=system on line {})", file.format_line)
                                                      : std::string(": give --crontab-format=user if it has no user column")));
    }
    fail_option(file, job, job.user_origin, "user", e.what());
  }
  if (const std::string refusal = run_as_refusal(account); !refusal.empty()) {
    fail_option(file, job, job.user_origin, "user", refusal);
  }
  if (account.uid != ::geteuid() || ::geteuid() == 0) job.run_as = std::move(account);
}

/// The PATH the job's shell will search: its file's PATH= line, else the
/// daemon's.
std::string search_path(const JobDefinition& job) {
  for (auto it = job.environment.rbegin(); it != job.environment.rend(); ++it) {
    if (it->first == "PATH") return it->second;
  }
  const char* own = std::getenv("PATH");
  return own != nullptr ? own : "/usr/local/bin:/usr/bin:/bin";
}

bool is_program_on(const std::string& path, const std::string& name) {
  std::size_t start = 0;
  while (start <= path.size()) {
    const std::size_t end = std::min(path.find(':', start), path.size());
    const std::string directory = end > start ? path.substr(start, end - start) : std::string(".");
    if (::access((directory + "/" + name).c_str(), X_OK) == 0) return true;
    start = end + 1;
  }
  return false;
}

bool is_account(const std::string& name) {
  try {
    (void)resolve_run_as(name);
    return true;
  } catch (const std::exception&) {
    return false;
  }
}

/// In a file without a user column, `root cd / && run-parts …` would run
/// "root" as a program: a line written for a system crontab.
void refuse_user_column(const JobsFile& file, const JobDefinition& job) {
  if (file.format != CrontabFormat::user) return;
  const std::size_t end = job.command.find_first_of(" \t");
  if (end == std::string::npos) return;  // one word: the program itself
  const std::string first = job.command.substr(0, end);
  if (std::isdigit(static_cast<unsigned char>(first.front())) != 0 ||
      first.find_first_of("/=$`'\"\\") != std::string::npos || !is_account(first)) {
    return;  // a number is a uid to getpwuid, not the name a crontab's column holds
  }
  if (is_program_on(search_path(job), first)) return;  // `mail -s …`: the program of that name
  throw JobsFileError(
      file.path, job.line, job.command_column,
      fmt::format("the command starts with \"{}\", an account and no program on PATH: this reads as a system crontab line "
                  "(spec, user, command); give --crontab-format=system or a \"# fleetcron-file: format=system\" line{}, or "
                  "the program's path if \"{}\" is one",
                  first, file.format_line > 0 ? fmt::format(" (line {} says format=user)", file.format_line) : "", first));
}

}  // namespace

void resolve_job_resources(JobsFile& file) {
  for (auto& job : file.jobs) {
    resolve_directory(file, job);
    resolve_env_file(file, job);
    refuse_user_column(file, job);  // after the env file: its PATH= counts
    resolve_user(file, job);
  }
}

}  // namespace fleetcron::daemon
