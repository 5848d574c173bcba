#include "daemon/config/job_directives.h"

#include <fmt/format.h>

#include <charconv>
#include <functional>
#include <map>

#include "daemon/config/jobs_file.h"
#include "daemon/run/run_output.h"
#include "daemon/config/settings.h"
#include "fleetcron/duration.h"
#include "fleetcron/fire_record.h"
#include "fleetcron/parse_error.h"

namespace fleetcron::daemon {

void SourceLine::fail(std::size_t offset, const std::string& reason) const {
  throw JobsFileError(path, number, static_cast<int>(offset) + 1, reason);
}

std::string_view to_string(Overlap overlap) noexcept {
  switch (overlap) {
    case Overlap::skip: return "skip";
    case Overlap::allow: return "allow";
    case Overlap::queue: return "queue";
  }
  return "unknown";
}

std::string_view to_string(JobScope scope) noexcept { return scope == JobScope::replica ? "replica" : "fleet"; }

namespace {

bool is_space(char c) { return c == ' ' || c == '\t'; }

/// One option being parsed: its name, value and where they are.
struct Option {
  const SourceLine& line;
  std::string_view name, value;
  std::size_t at, value_at;

  [[noreturn]] void fail_value(const std::string& reason) const { line.fail(value_at, reason); }
  [[noreturn]] void expected(std::string_view choices) const {
    fail_value(fmt::format("{}: expected {}, got \"{}\"", name, choices, quote_for_message(value)));
  }
  std::chrono::nanoseconds duration() const {
    try {
      const auto d = parse_duration(value);
      if (d < std::chrono::nanoseconds::zero()) fail_value(fmt::format("{} must not be negative", name));
      return d;
    } catch (const DurationError& e) {
      line.fail(value_at + e.position(), fmt::format("{}: {}", name, e.what()));
    }
  }
  /// An http:// or https:// URL with a host.
  std::string url() const {
    const auto scheme = value.find("://");
    const bool known = value.starts_with("http://") || value.starts_with("https://");
    if (!known || scheme + 3 >= value.size() || value[scheme + 3] == '/') {
      fail_value(fmt::format("{}: expected an http:// or https:// URL, got \"{}\"", name, quote_for_message(value)));
    }
    return std::string(value);
  }
  /// A count from `low` to `high`.
  std::size_t count(std::size_t low, std::size_t high) const {
    std::size_t n = 0;
    const auto [end, error] = std::from_chars(value.data(), value.data() + value.size(), n);
    if (error != std::errc{} || end != value.data() + value.size() || n < low || n > high) {
      expected(fmt::format("{}..{}", low, high));
    }
    return n;
  }
  template <typename T>
  void once(std::optional<T>& field, T value_to_set) const {
    if (field) line.fail(at, fmt::format("{} given twice", name));
    field = std::move(value_to_set);
  }
};

template <typename T>
T choose(const Option& option, std::initializer_list<std::pair<std::string_view, T>> choices, std::string_view names) {
  for (const auto& [text, value] : choices) {
    if (option.value == text) return value;
  }
  option.expected(names);
}

using Handler = std::function<void(Directive&, const Option&)>;

using Handlers = std::map<std::string_view, Handler>;

/// The options of when and how a job runs: its key, bounds, retries,
/// history, overlap, missed fires, catch-up and recovery.
Handlers run_handlers() {
  return {
      {"key", [](Directive& d, const Option& o) { o.once(d.key, std::string(o.value)); }},
      {"timeout", [](Directive& d, const Option& o) { o.once(d.timeout, o.duration()); }},
      {"jitter",
       [](Directive& d, const Option& o) {
         o.once(d.jitter, o.duration());
         d.jitter_at = o.at;
       }},
      {"retries",
       [](Directive& d, const Option& o) {
         int n = 0;
         const auto [end, error] = std::from_chars(o.value.data(), o.value.data() + o.value.size(), n);
         if (error != std::errc{} || end != o.value.data() + o.value.size() || n < 0 || n > 100) o.expected("0..100");
         o.once(d.retries, n);
       }},
      {"history", [](Directive& d, const Option& o) { o.once(d.history, o.count(1, LedgerRetention::max_keep_count)); }},
      {"keep-succeeded", [](Directive& d, const Option& o) { o.once(d.keep_succeeded, o.count(0, max_kept_runs)); }},
      {"keep-failed", [](Directive& d, const Option& o) { o.once(d.keep_failed, o.count(0, max_kept_runs)); }},
      {"overlap",
       [](Directive& d, const Option& o) {
         o.once(d.overlap, choose<Overlap>(o, {{"skip", Overlap::skip}, {"allow", Overlap::allow}, {"queue", Overlap::queue}},
                                           "skip, allow or queue"));
       }},
      {"missed",
       [](Directive& d, const Option& o) {
         o.once(d.missed, choose<MissedFirePolicy>(o,
                                                   {{"run-once", MissedFirePolicy::run_once},
                                                    {"skip", MissedFirePolicy::skip},
                                                    {"run-all", MissedFirePolicy::run_all}},
                                                   "run-once, skip or run-all"));
       }},
      {"catch-up",
       [](Directive& d, const Option& o) {
         try {
           o.once(d.catch_up, parse_catch_up(o.value));
         } catch (const std::invalid_argument& e) {
           o.fail_value(fmt::format("catch-up: {}", e.what()));
         }
       }},
      {"recover",
       [](Directive& d, const Option& o) {
         o.once(d.recover, choose<RecoverPolicy>(o, {{"report", RecoverPolicy::report}, {"rerun", RecoverPolicy::rerun}},
                                                 "report or rerun"));
       }},
      {"pause-on-failure",
       [](Directive& d, const Option& o) { o.once(d.pause_on_failure, choose<bool>(o, {{"yes", true}, {"no", false}}, "yes or no")); }},
  };
}

/// The options of where and as whom it runs, and whom it tells: DST,
/// scope, directory, environment, account, notifications.
Handlers place_handlers() {
  return {
      {"dst-gap",
       [](Directive& d, const Option& o) {
         const auto gap = dst_gap_from_string(o.value);
         if (!gap) o.expected("shift or skip");
         o.once(d.gap, *gap);
       }},
      {"dst-overlap",
       [](Directive& d, const Option& o) {
         const auto overlap = dst_overlap_from_string(o.value);
         if (!overlap) o.expected("first, last or both");
         o.once(d.dst_overlap, *overlap);
       }},
      {"scope",
       [](Directive& d, const Option& o) {
         o.once(d.scope, choose<JobScope>(o, {{"fleet", JobScope::fleet}, {"replica", JobScope::replica}}, "fleet or replica"));
       }},
      {"dir",
       [](Directive& d, const Option& o) {
         o.once(d.dir, std::string(o.value));
         d.dir_at = o.value_at;
       }},
      {"env-file",
       [](Directive& d, const Option& o) {
         o.once(d.env_file, std::string(o.value));
         d.env_file_at = o.value_at;
       }},
      {"user",
       [](Directive& d, const Option& o) {
         o.once(d.user, std::string(o.value));
         d.user_at = o.value_at;
       }},
      {"on-failure", [](Directive& d, const Option& o) { o.once(d.on_failure, std::string(o.value)); }},
      {"on-lost", [](Directive& d, const Option& o) { o.once(d.on_lost, std::string(o.value)); }},
      {"on-missed", [](Directive& d, const Option& o) { o.once(d.on_missed, std::string(o.value)); }},
      {"notify", [](Directive& d, const Option& o) { o.once(d.notify, o.url()); }},
      {"ping", [](Directive& d, const Option& o) { o.once(d.ping, o.url()); }},
  };
}

const Handlers& handlers() {
  static const Handlers table = [] {
    Handlers all = run_handlers();
    Handlers place = place_handlers();
    all.merge(place);
    return all;
  }();
  return table;
}

std::string known_options() {
  std::string names;
  for (const auto& [name, handler] : handlers()) names += (names.empty() ? "" : ", ") + std::string(name);
  return names;
}

/// The next name=value token from `i`: a quoted value may hold blanks.
/// Returns false at the end of the body.
bool next_option(const SourceLine& line, std::string_view body, std::size_t& i, std::string_view& name,
                 std::string_view& value, std::size_t& at) {
  while (i < body.size() && is_space(body[i])) ++i;
  if (i >= body.size()) return false;
  std::size_t end = i;
  while (end < body.size() && !is_space(body[end]) && body[end] != '=') ++end;
  at = line.offset_of(body.substr(i));
  if (end >= body.size() || body[end] != '=' || end == i) {
    while (end < body.size() && !is_space(body[end])) ++end;
    line.fail(at, fmt::format("expected name=value in a fleetcron directive, got \"{}\"",
                              quote_for_message(body.substr(i, end - i))));
  }
  name = body.substr(i, end - i);
  std::size_t value_begin = end + 1, value_end = value_begin;
  if (value_begin < body.size() && (body[value_begin] == '"' || body[value_begin] == '\'')) {
    const std::size_t close = body.find(body[value_begin], value_begin + 1);
    if (close == std::string_view::npos) line.fail(line.offset_of(body.substr(value_begin)), "unterminated quoted value");
    value = body.substr(value_begin + 1, close - value_begin - 1);
    value_end = close + 1;
    if (value_end < body.size() && !is_space(body[value_end])) {
      line.fail(line.offset_of(body.substr(value_end)), "expected a blank after the quoted value");
    }
  } else {
    while (value_end < body.size() && !is_space(body[value_end])) ++value_end;
    value = body.substr(value_begin, value_end - value_begin);
  }
  i = value_end;
  return true;
}

}  // namespace

Directive parse_directive(const SourceLine& line, std::string_view body) {
  Directive directive;
  directive.line = line.number;
  std::size_t i = 0, at = 0;
  std::string_view name, value;
  while (next_option(line, body, i, name, value, at)) {
    const std::size_t value_at = at + name.size() + 1;
    const Option option{line, name, value, at, value_at};
    if (value.empty()) line.fail(value_at, fmt::format("{}= needs a value", name));
    const auto handler = handlers().find(name);
    if (handler == handlers().end()) {
      line.fail(at, fmt::format("unknown directive option \"{}\" (known: {})", quote_for_message(name), known_options()));
    }
    handler->second(directive, option);
  }
  return directive;
}

}  // namespace fleetcron::daemon
