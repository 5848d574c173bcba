// Test support: the server processes tests start — spawned, watched and
// stopped by PID, never by name.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace fleetcron::test {

/// Starts `args` (args[0] looked up on PATH) with stdin from /dev/null and
/// stdout and stderr appended to `log_path` ("" : /dev/null). Throws if
/// fork() fails; an exec failure shows as an exit with status 127.
pid_t spawn_process(const std::vector<std::string>& args, const std::string& log_path);
/// Whether the child has exited (reaped if so).
bool has_exited(pid_t pid);
/// SIGCONT then SIGTERM; SIGKILL once `grace` passed; waits for the exit.
void stop_process(pid_t pid, std::chrono::milliseconds grace);
/// SIGKILL, and waits for the exit.
void kill_process(pid_t pid);
/// SIGSTOP, and waits (at most 10 s) until every thread of the process is
/// stopped: kill() returns before the signal takes effect, and a server on
/// another core may still answer what reached it meanwhile.
void pause_process(pid_t pid);

/// A free loopback TCP port below the kernel's ephemeral range (where an
/// outgoing connection could hold it, as scripts/ports.sh explains): one
/// that binds now. The caller races others for it, so servers retry with
/// another port if their bind fails.
std::uint16_t free_port();

}  // namespace fleetcron::test
