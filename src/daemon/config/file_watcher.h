// --watch: reloads the jobs files when they change (inotify), including a
// Kubernetes ConfigMap update, where the kubelet swaps a symlink in the
// mounted directory (..data -> ..2026_12_03_…) atomically and the file is
// a symlink through it. Both the directory of the path as given and the
// directory of the file it resolves to are watched, and re-resolved after
// every change. Changes are debounced: the callback runs once the file has
// been quiet for `quiet` (at most `max_delay` after the first change), and
// only when its content differs from the last content it was called for.
// A directory (cron.d) is watched itself: its content is every entry's name
// and content.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace fleetcron::daemon {

/// What a reload would read from `paths`, as the watcher compares it
/// (nullopt if a file cannot be read now).
[[nodiscard]] std::optional<std::string> watched_content(const std::vector<std::string>& paths);

class FileWatcher {
 public:
  /// Starts watching; `on_change` runs on the watcher's thread. Throws
  /// std::runtime_error naming a path if inotify cannot watch it.
  FileWatcher(std::vector<std::string> paths, std::function<void()> on_change,
              std::chrono::milliseconds quiet = std::chrono::milliseconds{300},
              std::chrono::milliseconds max_delay = std::chrono::seconds{2});
  ~FileWatcher();
  FileWatcher(const FileWatcher&) = delete;
  FileWatcher& operator=(const FileWatcher&) = delete;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace fleetcron::daemon
