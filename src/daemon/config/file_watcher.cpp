#include "daemon/config/file_watcher.h"

#include "daemon/config/jobs_sources.h"

#include <fmt/format.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <vector>

namespace fleetcron::daemon {

namespace {

using SteadyClock = std::chrono::steady_clock;

constexpr std::uint32_t watched_events =
    IN_CLOSE_WRITE | IN_MOVED_TO | IN_MOVED_FROM | IN_CREATE | IN_DELETE | IN_ATTRIB | IN_MODIFY;

namespace fs = std::filesystem;

/// The file's content, or nullopt if it cannot be read now (mid-swap).
std::optional<std::string> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream content;
  content << in.rdbuf();
  return content.str();
}

}  // namespace

/// What a reload would read: each file's content, each directory's
/// entries' names and contents; nullopt if a file cannot be read now.
std::optional<std::string> watched_content(const std::vector<std::string>& paths) {
  std::string all;
  for (const auto& path : paths) {
    std::error_code error;
    if (!fs::is_directory(path, error)) {
      const auto content = read_file(path);
      if (!content) return std::nullopt;
      all += path + '\0' + *content + '\0';
      continue;
    }
    // What the loader reads (jobs_sources.h): cron.d names, regular files;
    // an editor's swap file or a stray large file is neither read nor a reload.
    std::vector<std::string> names;
    for (fs::directory_iterator it(path, error), end; !error && it != end; it.increment(error)) {
      std::error_code status_error;
      if (is_cron_d_name(it->path().filename().string()) && fs::is_regular_file(it->path(), status_error) &&
          fs::file_size(it->path(), status_error) <= max_jobs_file_bytes) {
        names.push_back(it->path().string());
      }
    }
    std::sort(names.begin(), names.end());
    for (const auto& name : names) all += name + '\0' + read_file(name).value_or("") + '\0';
  }
  return all;
}

namespace {

/// The directories to watch: a directory given itself; for a file the
/// one the path names, and the one the file it resolves to (through
/// symlinks) lives in.
std::set<std::string> directories_of(const std::string& path) {
  std::set<std::string> directories;
  const fs::path given(path);
  std::error_code error;
  if (fs::is_directory(given, error)) directories.insert(given.string());
  directories.insert(given.has_parent_path() ? given.parent_path().string() : std::string("."));
  const fs::path resolved = fs::canonical(given, error);
  if (!error && fs::is_directory(resolved, error)) directories.insert(resolved.string());
  if (!error && resolved.has_parent_path()) directories.insert(resolved.parent_path().string());
  return directories;
}

}  // namespace

struct FileWatcher::Impl {
  std::vector<std::string> paths;
  std::function<void()> on_change;
  std::chrono::milliseconds quiet, max_delay;
  int inotify = -1, stop_event = -1;
  std::set<std::string> watched;
  std::optional<std::string> last_content;
  std::thread thread;

  void watch_directories() {
    for (const auto& path : paths) {
      for (const auto& directory : directories_of(path)) {
        if (watched.contains(directory)) continue;
        if (inotify_add_watch(inotify, directory.c_str(), watched_events | IN_ONLYDIR) >= 0) watched.insert(directory);
      }
    }
  }
  /// Reads every pending event; true if there was one.
  bool drain_events() {
    alignas(inotify_event) std::array<char, 8192> buffer{};
    bool any = false;
    while (read(inotify, buffer.data(), buffer.size()) > 0) any = true;
    return any;
  }
  void loop();
  void settle_and_report();
};

void FileWatcher::Impl::settle_and_report() {
  // Debounce: wait for `quiet` without events, at most `max_delay` in all.
  const auto give_up = SteadyClock::now() + max_delay;
  while (SteadyClock::now() < give_up) {
    std::array<pollfd, 2> fds{pollfd{inotify, POLLIN, 0}, pollfd{stop_event, POLLIN, 0}};
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(give_up - SteadyClock::now());
    const int ready = poll(fds.data(), fds.size(), static_cast<int>(std::min(quiet, left).count()) + 1);
    if (fds[1].revents != 0) return;
    if (ready <= 0) break;  // quiet long enough
    drain_events();
  }
  watch_directories();  // a swapped ConfigMap resolves to a new directory
  const auto content = watched_content(paths);
  if (!content || content == last_content) return;
  last_content = content;
  on_change();
}

void FileWatcher::Impl::loop() {
  while (true) {
    std::array<pollfd, 2> fds{pollfd{inotify, POLLIN, 0}, pollfd{stop_event, POLLIN, 0}};
    if (poll(fds.data(), fds.size(), -1) < 0 && errno != EINTR) return;
    if (fds[1].revents != 0) return;
    if (fds[0].revents != 0 && drain_events()) settle_and_report();
  }
}

FileWatcher::FileWatcher(std::vector<std::string> paths, std::function<void()> on_change, std::chrono::milliseconds quiet,
                         std::chrono::milliseconds max_delay)
    : impl_(std::make_unique<Impl>()) {
  impl_->paths = std::move(paths);
  impl_->on_change = std::move(on_change);
  impl_->quiet = quiet;
  impl_->max_delay = max_delay;
  impl_->inotify = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  if (impl_->inotify < 0) throw std::runtime_error(fmt::format("--watch: inotify: {}", std::strerror(errno)));
  impl_->stop_event = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (impl_->stop_event < 0) {
    close(impl_->inotify);
    throw std::runtime_error(fmt::format("--watch: eventfd: {}", std::strerror(errno)));
  }
  impl_->watch_directories();
  if (impl_->watched.empty()) {
    close(impl_->inotify);
    close(impl_->stop_event);
    throw std::runtime_error(fmt::format("--watch: cannot watch the directory of {}: {}", impl_->paths.front(),
                                         std::strerror(errno)));
  }
  impl_->last_content = watched_content(impl_->paths);
  impl_->thread = std::thread([impl = impl_.get()] { impl->loop(); });
}

FileWatcher::~FileWatcher() {
  const std::uint64_t one = 1;
  (void)!write(impl_->stop_event, &one, sizeof one);
  if (impl_->thread.joinable()) impl_->thread.join();
  close(impl_->inotify);
  close(impl_->stop_event);
}

}  // namespace fleetcron::daemon
