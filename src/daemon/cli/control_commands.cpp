// `fleetcron pause|resume|trigger`: the fleet-wide controls, changed in the
// coordination store without a daemon (docs/daemon.md#controls).
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cctype>

#include "daemon/backends/backend.h"
#include "daemon/cli/commands.h"
#include "daemon/observe/job_lookup.h"
#include "daemon/observe/json_output.h"
#include "daemon/observe/log_sink.h"
#include "fleetcron/duration.h"
#include "fleetcron/fleet.h"

namespace fleetcron::daemon {

namespace {

/// "cli@" and this host's name: who changed the control, in the store.
std::string author() {
  std::array<char, 256> host{};
  if (gethostname(host.data(), host.size() - 1) != 0) host[0] = '\0';
  std::string name = "cli@";
  for (const char c : std::string_view(host.data())) {
    if (name.size() >= 64) break;
    name.push_back(std::isgraph(static_cast<unsigned char>(c)) != 0 ? c : '_');
  }
  return name == "cli@" ? "cli" : name;
}

std::string_view action_name(ControlAction action) {
  switch (action) {
    case ControlAction::pause: return "pause";
    case ControlAction::resume: return "resume";
    case ControlAction::trigger: return "trigger";
  }
  return "?";
}

std::string text_answer(ControlAction action, const std::string& job, const ControlChange& change) {
  const std::string name = "job \"" + terminal_safe(job) + "\"";
  const bool changed = change.status == ControlChange::Status::changed;
  switch (action) {
    case ControlAction::pause:
      return name + (changed ? ": paused for the whole fleet\n" : ": already paused\n");
    case ControlAction::resume:
      return name + (changed ? ": resumed for the whole fleet\n" : ": not paused\n");
    case ControlAction::trigger:
      if (!changed) {
        return fmt::format("{}: trigger {} of this request id was requested already (it waits, or ran); nothing "
                           "new\n",
                           name, change.trigger_id);
      }
      return fmt::format("{}: trigger {} requested; one replica that has the job runs it at its next look at the "
                         "controls (every second by default), or it is dropped after {}\n",
                         name, change.trigger_id, format_duration(default_trigger_wait));
  }
  return {};
}

}  // namespace

int run_control_command(const Settings& settings, ControlAction action, const std::string& job, bool json,
                        std::ostream& out, std::ostream& err, const std::string& request_id, bool force) {
  const std::string_view name = action_name(action);
  if (backend_for(settings.coordinator).in_process()) {
    err << name << ": the memory coordinator has no fleet outside its process; use redis://, nats:// or postgres://\n";
    return 2;
  }
  if (!request_id.empty()) {
    try {
      check_trigger_request_id(request_id);
    } catch (const std::invalid_argument& e) {
      err << name << ": --request-id: " << e.what() << '\n';
      return 2;
    }
  }
  try {
    // Stamped on the store's clock: a trigger from a host whose clock is off lives as long as any.
    Fleet fleet(open_fleet_state(settings));
    if (!force) {
      // A resume also finds a paused job no replica runs any more.
      const JobLookup lookup = look_up_job(fleet.state(), fleet.now(), job, action == ControlAction::resume);
      if (!lookup.known) {
        err << name << ": " << lookup.refusal << "; give --force for a job no replica has announced yet\n";
        return 2;
      }
    }
    const ControlChange change = action == ControlAction::trigger ? fleet.trigger(job, author(), default_trigger_wait, request_id)
                                 : action == ControlAction::pause   ? fleet.pause(job, author())
                                                                    : fleet.resume(job, author());
    if (change.status == ControlChange::Status::error) {
      err << name << ": " << change.error << '\n';
      return 1;
    }
    if (json) {
      const bool changed = change.status == ControlChange::Status::changed;
      out << control_document({job, std::string(name), changed,
                               action == ControlAction::trigger ? std::optional<std::string>(change.trigger_id)
                                                                : std::nullopt,
                               std::nullopt})
          << '\n';
      return 0;
    }
    out << text_answer(action, job, change);
    return 0;
  } catch (const std::exception& e) {
    err << name << ": " << e.what() << '\n';
    return 1;
  }
}

}  // namespace fleetcron::daemon
