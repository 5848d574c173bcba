// Test support: a directory of its own under /tmp, removed with everything
// in it when the test ends.
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace fleetcron::test {

class ScratchDirectory {
 public:
  ScratchDirectory() {
    std::string name = (std::filesystem::temp_directory_path() / "fleetcron-test-XXXXXX").string();
    path_ = mkdtemp(name.data()) != nullptr ? name : throw std::runtime_error("mkdtemp failed");
  }
  ~ScratchDirectory() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  ScratchDirectory(const ScratchDirectory&) = delete;
  ScratchDirectory& operator=(const ScratchDirectory&) = delete;

  [[nodiscard]] const std::string& path() const noexcept { return path_; }
  /// Writes `text` to `name` (relative; its directories made), returning the full path.
  std::string write(const std::string& name, const std::string& text) const {
    const std::filesystem::path file = std::filesystem::path(path_) / name;
    std::filesystem::create_directories(file.parent_path());
    std::ofstream(file) << text;
    return file.string();
  }
  /// The content of `name`, or "" if it cannot be read.
  [[nodiscard]] std::string read(const std::string& name) const {
    std::ifstream in(std::filesystem::path(path_) / name);
    std::ostringstream text;
    text << in.rdbuf();
    return text.str();
  }

 private:
  std::string path_;
};

}  // namespace fleetcron::test
