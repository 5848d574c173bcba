#include "daemon/run/run_as.h"

#include <fmt/format.h>
#include <grp.h>
#include <pwd.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <stdexcept>

namespace fleetcron::daemon {

namespace {

/// Runs getpwnam_r or getpwuid_r with a buffer that grows until it fits.
template <typename Lookup>
bool look_up(Lookup lookup, passwd& entry, std::vector<char>& buffer, const std::string& name) {
  buffer.resize(4096);
  while (true) {
    passwd* found = nullptr;
    const int error = lookup(&entry, buffer.data(), buffer.size(), &found);
    if (error == ERANGE && buffer.size() < (1U << 20)) {
      buffer.resize(buffer.size() * 2);
      continue;
    }
    if (error != 0 && error != ENOENT && error != ESRCH) {
      throw std::runtime_error(fmt::format("user \"{}\": lookup failed: {}", name, std::strerror(error)));
    }
    return found != nullptr;
  }
}

}  // namespace

RunAs resolve_run_as(const std::string& name) {
  if (name.empty()) throw std::runtime_error("user= needs a user name");
  passwd entry{};
  std::vector<char> buffer;
  bool found = look_up([&](passwd* out, char* data, std::size_t size, passwd** result) {
    return getpwnam_r(name.c_str(), out, data, size, result);
  }, entry, buffer, name);
  uid_t uid = 0;
  const auto [end, error] = std::from_chars(name.data(), name.data() + name.size(), uid);
  if (!found && error == std::errc{} && end == name.data() + name.size()) {
    found = look_up([&](passwd* out, char* data, std::size_t size, passwd** result) {
      return getpwuid_r(uid, out, data, size, result);
    }, entry, buffer, name);
  }
  if (!found) throw std::runtime_error(fmt::format("user \"{}\" does not exist (not in the passwd database)", name));
  RunAs account;
  account.name = entry.pw_name;
  account.uid = entry.pw_uid;
  account.gid = entry.pw_gid;
  account.home = entry.pw_dir != nullptr ? entry.pw_dir : "";
  account.shell = entry.pw_shell != nullptr ? entry.pw_shell : "";
  int count = 32;
  account.groups.resize(static_cast<std::size_t>(count));
  while (getgrouplist(account.name.c_str(), account.gid, account.groups.data(), &count) < 0) {
    if (count > 65536) throw std::runtime_error(fmt::format("user \"{}\": too many groups", name));
    account.groups.resize(static_cast<std::size_t>(count) + 32);
    count = static_cast<int>(account.groups.size());
  }
  account.groups.resize(static_cast<std::size_t>(count));
  return account;
}

std::string run_as_refusal(const RunAs& account) {
  if (geteuid() == 0 || account.uid == geteuid()) return {};
  return fmt::format("the daemon runs as uid {}, not root: it cannot run jobs as {} (uid {})", geteuid(),
                     account.name, account.uid);
}

}  // namespace fleetcron::daemon
