#include "daemon/config/jobs_file.h"

#include "core/support/fnv1a.h"
#include "daemon/config/env_file.h"
#include "daemon/config/settings.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>

#include "fleetcron/duration.h"
#include "fleetcron/parse_error.h"
#include "fleetcron/time_zone.h"

namespace fleetcron::daemon {

namespace {

bool is_space(char c) { return c == ' ' || c == '\t'; }

std::string_view trim(std::string_view text) {
  while (!text.empty() && is_space(text.front())) text.remove_prefix(1);
  while (!text.empty() && (is_space(text.back()) || text.back() == '\r')) text.remove_suffix(1);
  return text;
}

/// A never-firing schedule for @reboot jobs: the daemon triggers them once
/// at start.
class AtStartSchedule final : public Schedule {
 public:
  [[nodiscard]] std::optional<Instant> next(Instant) const noexcept override { return std::nullopt; }
  [[nodiscard]] std::string_view spec() const noexcept override { return "@reboot"; }
  [[nodiscard]] bool is_manual() const noexcept override { return true; }
};

/// Vixie cron's '%', read as its do_command.c reads it: in the command a
/// backslash escapes a '%' (which ends the command otherwise) and is then
/// dropped; any other backslash stays, and escapes only the next character
/// ("\\%" is a backslash, then the end of the command). In the input each
/// unescaped '%' is a newline, "\%" a '%', and a final newline is added
/// when it lacks one.
std::pair<std::string, std::optional<std::string>> split_percent(std::string_view text) {
  std::string command;
  bool escaped = false;
  std::size_t i = 0;
  for (; i < text.size(); ++i) {
    const char c = text[i];
    if (escaped) {
      if (c == '%') command.back() = '%';  // the backslash gives way to the '%'
      else command += c;
      escaped = false;
      continue;
    }
    if (c == '%') break;
    escaped = c == '\\';
    command += c;
  }
  if (i >= text.size()) return {command, std::nullopt};
  std::string input;
  escaped = false;
  for (++i; i < text.size(); ++i) {
    char c = text[i];
    if (escaped) {
      if (c != '%') input += '\\';
    } else if (c == '%') {
      c = '\n';
    }
    escaped = c == '\\';
    if (!escaped) input += c;
  }
  if (escaped) input += '\\';
  if (input.empty() || input.back() != '\n') input += '\n';
  while (!command.empty() && is_space(command.back())) command.pop_back();
  return {command, input};
}

/// "TZ=zone" or "CRON_TZ=zone": a zone prefix, as the spec grammar allows
/// on one spec (`TZ=Asia/Tokyo 0 9 * * * cmd`).
bool is_zone_prefix(std::string_view token) {
  return (token.starts_with("TZ=") && token.size() > 3) || (token.starts_with("CRON_TZ=") && token.size() > 8);
}

/// A job line that starts with its own zone, not a TZ= line: the zone,
/// then more on the line.
bool is_zone_prefixed_job(std::string_view content) {
  const std::size_t end = content.find_first_of(" \t");
  return end != std::string_view::npos && is_zone_prefix(content.substr(0, end)) &&
         content.find_first_not_of(" \t", end) != std::string_view::npos &&
         content.substr(0, end).find_first_of("\"'") == std::string_view::npos;
}

bool is_field_name(std::string_view word) {
  static constexpr std::array<std::string_view, 19> names{"jan", "feb", "mar", "apr", "may", "jun", "jul",
                                                          "aug", "sep", "oct", "nov", "dec", "sun", "mon",
                                                          "tue", "wed", "thu", "fri", "sat"};
  if (word.size() != 3) return false;
  std::string lower(word);
  for (auto& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return std::find(names.begin(), names.end(), lower) != names.end();
}

bool is_number(std::string_view word) {
  return !word.empty() && std::all_of(word.begin(), word.end(), [](char c) { return c >= '0' && c <= '9'; });
}

/// One term of a cron field: `*`, `?`, `5`, `mon`, `1-5`, `*/10`, `3-59/5`,
/// or Quartz's `L`, `LW`, `15W`, `5L`, `5#2`, `L-3`.
bool is_field_term(std::string_view term) {
  std::string upper(term);
  for (auto& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  term = upper;  // the parser reads L, W and names in any case
  if (term == "*" || term == "?" || term == "L" || term == "LW") return true;
  if (const std::size_t slash = term.find('/'); slash != std::string_view::npos) {
    if (!is_number(term.substr(slash + 1))) return false;
    term = term.substr(0, slash);
    if (term == "*") return true;
  }
  if (term.starts_with("L-")) return is_number(term.substr(2));
  const auto value = [](std::string_view v) { return is_number(v) || is_field_name(v); };
  if (term.size() > 1 && term.back() == 'W' && is_number(term.substr(0, term.size() - 1))) return true;
  if (term.size() > 1 && term.back() == 'L' && value(term.substr(0, term.size() - 1))) return true;  // 5L, FRIL
  if (const std::size_t hash = term.find('#'); hash != std::string_view::npos) {
    return value(term.substr(0, hash)) && is_number(term.substr(hash + 1));  // 5#2, FRI#2
  }
  const std::size_t dash = term.find('-');
  if (dash == std::string_view::npos) return value(term);
  return value(term.substr(0, dash)) && value(term.substr(dash + 1));
}

/// Whether `word` would parse as a cron field (a list of terms).
bool looks_like_field(std::string_view word) {
  if (word.empty()) return false;
  std::size_t start = 0;
  while (true) {
    const std::size_t comma = std::min(word.find(',', start), word.size());
    if (!is_field_term(word.substr(start, comma - start))) return false;
    if (comma == word.size()) return true;
    start = comma + 1;
  }
}

/// Whether `word`, after a line's fields, is a year field (the parser's
/// rule): numbers, `*`, ranges, steps and lists only and, without seconds,
/// a number of four digits (so `*` there stays a refused extra field).
bool is_year_field(std::string_view word, bool with_seconds) {
  if (word.empty() || word.find_first_not_of("0123456789*-/,") != std::string_view::npos) return false;
  if (!looks_like_field(word)) return false;
  if (with_seconds) return true;
  std::size_t digits = 0;
  for (const char c : word) {
    digits = (c >= '0' && c <= '9') ? digits + 1 : 0;
    if (digits == 4) return true;
  }
  return false;
}

}  // namespace

bool JobDefinition::same_definition(const JobDefinition& other) const {
  return key == other.key && spec == other.spec && command == other.command && attempt_timeout == other.attempt_timeout &&
         jitter == other.jitter && retries == other.retries && overlap == other.overlap && missed == other.missed &&
         catch_up == other.catch_up && recover == other.recover && pause_on_failure == other.pause_on_failure &&
         history == other.history &&
         keep_succeeded == other.keep_succeeded && keep_failed == other.keep_failed &&
         dst.has_value() == other.dst.has_value() && (!dst || (dst->gap == other.dst->gap && dst->overlap == other.dst->overlap)) &&
         environment == other.environment && at_start == other.at_start && scope == other.scope &&
         input == other.input && working_directory == other.working_directory && env_file == other.env_file &&
         user == other.user && run_as == other.run_as && notifications == other.notifications;
}

std::optional<CrontabFormat> crontab_format_from_string(std::string_view text) {
  if (text == "user") return CrontabFormat::user;
  if (text == "system") return CrontabFormat::system;
  if (text == "auto") return std::nullopt;
  throw std::invalid_argument(fmt::format("\"{}\" is not a crontab format: expected user (spec, command), system "
                                          "(spec, user, command) or auto (system for /etc/crontab and /etc/cron.d)",
                                          quote_for_message(text)));
}

JobsFileError::JobsFileError(const std::string& file, int line, int column, const std::string& reason)
    : std::runtime_error(line > 0 ? fmt::format("{}:{}:{}: {}", file, line, column, reason) : fmt::format("{}: {}", file, reason)),
      line_(line),
      column_(column) {}

ParseOptions jobs_parse_options(bool seconds, const std::string& zone) {
  ParseOptions options;
  options.seconds = seconds ? SecondsField::required : SecondsField::none;
  options.zone = TimeZone::locate(zone);
  options.every_anchor = EveryAnchor::epoch;
  return options;
}

EntryOptions entry_options(const JobDefinition& job) {
  EntryOptions options;
  options.key = job.key;
  options.name = job.key;
  options.attempt_timeout = job.attempt_timeout;
  options.jitter = job.jitter;
  options.missed_fire = job.missed;
  options.catch_up_reach = job.catch_up;
  options.recover = job.recover;
  options.pause_on_failure = job.pause_on_failure;
  // @reboot runs on the replica that starts, as scope=replica jobs do.
  if (job.scope == JobScope::replica || job.at_start) options.scope = EntryScope::replica;
  if (job.retries > 0) options.retry = RetryPolicy{.max_retries = job.retries};
  switch (job.overlap) {
    case Overlap::skip: options.overlap = OverlapPolicy::skip; break;
    case Overlap::allow: options.overlap = OverlapPolicy::allow; break;
    case Overlap::queue: options.overlap = OverlapPolicy::queue; break;
  }
  return options;
}

std::string rule_error(const JobDefinition& job, std::string_view what) {
  if (what.starts_with("add: ")) what.remove_prefix(5);
  if (what.starts_with("jitter ") && job.jitter_origin.line > 0) {
    return fmt::format("{}:{}:{}: {}", job.file, job.jitter_origin.line, job.jitter_origin.column, what);
  }
  return fmt::format("{}:{}:1: {}", job.file, job.line, what);
}

std::string derive_key(std::string_view spec, std::string_view command) {
  std::uint64_t hash = detail::fnv1a(spec);
  hash = detail::fnv1a("\n", hash);
  hash = detail::fnv1a(command, hash);
  return fmt::format("job-{:016x}", hash);
}

namespace {

// The state of one parse: what earlier lines set for the lines after them.
struct FileParser {
  const std::string& path;
  const ParseOptions& options;
  const JobDefaults& defaults;
  JobsFile file;
  std::vector<std::pair<std::string, std::string>> environment;
  std::optional<std::string> zone;  // from CRON_TZ= / TZ= lines
  std::optional<Directive> directive;
  std::map<std::string, int> key_lines;
  int file_settings_line = 0;

  void fail_pending_directive(const SourceLine& line, std::size_t at) const {
    line.fail(at, fmt::format("the fleetcron directive on line {} must be followed by a job line", directive->line));
  }
  void comment(const SourceLine& line, std::string_view content);
  void file_settings(const SourceLine& line, std::string_view body);
  void assignment(const SourceLine& line, std::string_view content, std::pair<std::string, std::string> variable);
  void job(const SourceLine& line, std::string_view content);
  /// The spec's tokens (5 or 6 fields, or one @-word, or `@every D`) from
  /// `content`; returns the spec and sets `command` to the rest.
  std::string_view split_spec(const SourceLine& line, std::string_view content, std::string_view& command) const;
  void apply_directive(JobDefinition& job, ParseOptions& parse) const;
  void set_command(JobDefinition& job, std::string_view command) const;
  /// A system crontab's user column: the first word of `command`, which
  /// is left with the rest.
  void take_user_column(const SourceLine& line, JobDefinition& job, std::string_view& command) const;
  void file_setting(const SourceLine& line, std::string_view setting);
  /// Refuses a line whose field count is not the file's: under --seconds
  /// a 5-field line, and in any file a command that starts with a word
  /// that reads as one more field (a year, or seconds without --seconds).
  void check_field_count(const SourceLine& line, std::string_view spec, std::string_view command) const;
  void check_key(const SourceLine& line, const JobDefinition& job, std::size_t spec_begin);
};

void FileParser::comment(const SourceLine& line, std::string_view content) {
  std::string_view body = trim(content.substr(1));
  if (body.starts_with("fleetcron-file:")) {
    if (directive) fail_pending_directive(line, line.offset_of(content));
    file_settings(line, body.substr(15));
  } else if (body.starts_with("fleetcron:")) {
    if (directive) {
      line.fail(line.offset_of(content), fmt::format("a second fleetcron directive (the first is on line {})", directive->line));
    }
    directive = parse_directive(line, body.substr(10));
  } else if (directive) {
    fail_pending_directive(line, line.offset_of(content));
  }
}

// `# fleetcron-file: percent=literal format=system`: settings of the whole
// file, before its first job so that every job line means one thing.
void FileParser::file_settings(const SourceLine& line, std::string_view body) {
  if (file_settings_line > 0) line.fail(0, fmt::format("a second fleetcron-file line (the first is line {})", file_settings_line));
  if (!file.jobs.empty()) line.fail(0, fmt::format("the fleetcron-file line must come before the first job (line {})",
                                                   file.jobs.front().line));
  file_settings_line = line.number;
  std::string_view rest = trim(body);
  if (rest.empty()) line.fail(line.text.size(), "a fleetcron-file line without a setting (known: percent=, format=)");
  while (!rest.empty()) {
    const std::size_t end = std::min(rest.find_first_of(" \t"), rest.size());
    file_setting(line, rest.substr(0, end));
    rest = trim(rest.substr(end));
  }
}

void FileParser::file_setting(const SourceLine& line, std::string_view setting) {
  if (setting == "percent=literal") {
    file.percent = PercentMode::literal;
  } else if (setting == "percent=input") {
    file.percent = PercentMode::input;
  } else if (setting == "format=system" || setting == "format=user") {
    file.format = setting == "format=system" ? CrontabFormat::system : CrontabFormat::user;
    file.format_line = line.number;
  } else {
    line.fail(line.offset_of(setting),
              fmt::format("unknown file setting \"{}\" (known: percent=input, percent=literal, format=user, format=system)",
                          quote_for_message(setting)));
  }
}

void FileParser::assignment(const SourceLine& line, std::string_view content, std::pair<std::string, std::string> variable) {
  if (directive) fail_pending_directive(line, line.offset_of(content));
  auto& [name, value] = variable;
  if (name == "CRON_TZ" || name == "TZ") {
    if (value.empty() || value.find_first_of(" \t") != std::string::npos) {
      line.fail(line.offset_of(content) + name.size() + 1, fmt::format("{} takes one zone name", name));
    }
    try {
      (void)TimeZone::locate(value);
    } catch (const std::exception&) {
      line.fail(line.offset_of(content) + name.size() + 1, fmt::format("unknown time zone \"{}\"", quote_for_message(value)));
    }
    zone = value;
  }
  if (name == "MAILTO" || name == "MAILFROM") {
    file.notices.push_back({line.number, fmt::format("{} is not supported: fleetcron sends no mail; use on-failure= "
                                                     "(a command), notify= (a webhook) or ping= (docs/daemon.md)", name)});
  }
  environment.emplace_back(std::move(name), std::move(value));
}

std::string_view FileParser::split_spec(const SourceLine& line, std::string_view content, std::string_view& command) const {
  const std::string_view raw = line.text;
  std::vector<std::string_view> tokens;
  std::size_t i = line.offset_of(content);
  // With seconds enabled a job has exactly 6 fields: "optional" would make
  // "0 0 * * * 5" ambiguous between a 6th field and a command.
  std::size_t wanted = options.seconds == SecondsField::none ? 5 : 6;
  auto next_token = [&] {
    while (i < raw.size() && is_space(raw[i])) ++i;
    std::size_t token_end = i;
    while (token_end < raw.size() && !is_space(raw[token_end])) ++token_end;
    const std::string_view token = raw.substr(i, token_end - i);
    i = token_end;
    return token;
  };
  std::string_view first = next_token();
  if (is_zone_prefix(first)) {  // `TZ=Asia/Tokyo 0 9 * * * cmd`: the zone, then the spec proper
    tokens.push_back(first);
    ++wanted;
    first = next_token();
  }
  tokens.push_back(first);
  if (first.starts_with('@')) wanted = tokens.size() - 1 + (first == "@every" ? 2 : 1);
  while (tokens.size() < wanted) {
    const std::string_view token = next_token();
    if (token.empty()) {
      line.fail(raw.size(), fmt::format("expected {} spec fields then a command, found {} field(s) and no command",
                                        wanted, tokens.size()));
    }
    tokens.push_back(token);
  }
  const std::size_t spec_begin = line.offset_of(tokens.front());
  const std::size_t fields = tokens.size() - (is_zone_prefix(tokens.front()) ? 1 : 0);
  if (fields == 6 && options.seconds != SecondsField::none && !looks_like_field(tokens.back()) &&
      std::all_of(tokens.end() - 6, tokens.end() - 1, looks_like_field)) {
    const std::size_t last = line.offset_of(tokens.back());
    const std::size_t fields_begin = line.offset_of(*(tokens.end() - 6));
    line.fail(last, fmt::format("this line has 5 fields, but --seconds (seconds = true) reads 6, seconds first: write "
                                "\"0 {} …\", or drop --seconds",
                                trim(raw.substr(fields_begin, last - fields_begin))));
  }
  if (!first.starts_with('@')) {  // an optional year field last
    const std::size_t before = i;
    const std::string_view year = next_token();
    if (is_year_field(year, options.seconds != SecondsField::none)) {
      tokens.push_back(year);
    } else {
      i = before;
    }
  }
  const std::size_t spec_end = line.offset_of(tokens.back()) + tokens.back().size();
  command = trim(raw.substr(spec_end));
  if (command.empty()) line.fail(spec_end, "missing command after the spec");
  return raw.substr(spec_begin, spec_end - spec_begin);
}

void FileParser::apply_directive(JobDefinition& job, ParseOptions& parse) const {
  job.working_directory = defaults.dir;
  job.env_file = defaults.env_file;
  job.user = defaults.user;
  job.notifications = {defaults.on_failure, defaults.on_lost, defaults.on_missed, defaults.notify, defaults.ping};
  if (!directive) return;
  auto take_text = [](const std::optional<std::string>& value, std::string& field) {
    if (value) field = *value;
  };
  take_text(directive->on_failure, job.notifications.on_failure);
  take_text(directive->on_lost, job.notifications.on_lost);
  take_text(directive->on_missed, job.notifications.on_missed);
  take_text(directive->notify, job.notifications.notify);
  take_text(directive->ping, job.notifications.ping);
  if (directive->gap || directive->dst_overlap) {
    DstPolicy dst = options.dst;
    if (directive->gap) dst.gap = *directive->gap;
    if (directive->dst_overlap) dst.overlap = *directive->dst_overlap;
    parse.dst = dst;
    job.dst = dst;
  }
  if (directive->key) job.key = *directive->key;
  job.attempt_timeout = directive->timeout.value_or(std::chrono::nanoseconds::zero());
  job.jitter = directive->jitter;
  job.retries = directive->retries.value_or(0);
  job.history = directive->history;
  job.keep_succeeded = directive->keep_succeeded;
  job.keep_failed = directive->keep_failed;
  job.overlap = directive->overlap.value_or(Overlap::skip);
  job.missed = directive->missed;
  job.catch_up = directive->catch_up;
  job.recover = directive->recover.value_or(RecoverPolicy::report);
  job.pause_on_failure = directive->pause_on_failure.value_or(false);
  job.scope = directive->scope.value_or(JobScope::fleet);
  auto take = [&](const std::optional<std::string>& value, std::size_t at, std::string& field, OptionOrigin& origin) {
    if (!value) return;
    field = *value;
    origin = {directive->line, static_cast<int>(at) + 1};
  };
  if (directive->jitter) job.jitter_origin = {directive->line, static_cast<int>(directive->jitter_at) + 1};
  take(directive->dir, directive->dir_at, job.working_directory, job.dir_origin);
  take(directive->env_file, directive->env_file_at, job.env_file, job.env_file_origin);
  take(directive->user, directive->user_at, job.user, job.user_origin);
}

void FileParser::set_command(JobDefinition& job, std::string_view command) const {
  if (file.percent == PercentMode::literal) {
    job.command = std::string(command);
    return;
  }
  auto [text, input] = split_percent(command);
  job.command = std::move(text);
  job.input = std::move(input);
}

void FileParser::take_user_column(const SourceLine& line, JobDefinition& job, std::string_view& command) const {
  const std::size_t end = std::min(command.find_first_of(" \t"), command.size());
  const std::string_view user = command.substr(0, end);
  const std::size_t at = line.offset_of(user);
  command = trim(command.substr(end));
  if (command.empty()) {
    line.fail(at + user.size(), fmt::format("missing command after the user column (\"{}\"): a system crontab line is "
                                            "the spec, a user, then the command",
                                            quote_for_message(user)));
  }
  if (directive && directive->user) {
    line.fail(at, fmt::format("the user column gives \"{}\" and the directive on line {} gives user={}: keep one",
                              quote_for_message(user), directive->line, quote_for_message(*directive->user)));
  }
  job.user = std::string(user);
  job.user_origin = {line.number, static_cast<int>(at) + 1};
  job.user_from_column = true;
}

void FileParser::check_field_count(const SourceLine& line, std::string_view spec, std::string_view command) const {
  const std::size_t first_end = std::min(spec.find_first_of(" \t"), spec.size());
  const std::string_view proper =
      is_zone_prefix(spec.substr(0, first_end)) ? trim(spec.substr(first_end)) : spec;  // after TZ=zone
  if (proper.starts_with('@')) return;
  const bool seconds = options.seconds != SecondsField::none;
  const std::string_view fields = seconds ? "6 fields (second minute hour day month weekday) under --seconds, and "
                                            "a year 7th"
                                          : "5 fields (minute hour day month weekday), and a year 6th when it "
                                            "names one (2027, 2027-2030)";
  const std::string_view word = command.substr(0, std::min(command.find_first_of(" \t"), command.size()));
  if (!looks_like_field(word)) return;
  line.fail(line.offset_of(word),
            fmt::format("\"{}\" reads as one more cron field, but this file's lines have {}: the command would start "
                        "with it. {}A command that starts so needs its path",
                        quote_for_message(word), fields,
                        seconds ? "" : "A line with seconds first needs --seconds (seconds = true in the config). "));
}

void FileParser::check_key(const SourceLine& line, const JobDefinition& job, std::size_t spec_begin) {
  if (job.key.find('@') != std::string::npos || job.key.size() > 1024 ||
      std::any_of(job.key.begin(), job.key.end(), [](unsigned char c) { return c < 0x20 || c == 0x7f; })) {
    throw JobsFileError(path, directive ? directive->line : line.number, 1,
                        fmt::format("key \"{}\": at most 1024 bytes, without '@' or control characters",
                                    quote_for_message(job.key)));
  }
  if (const auto [it, inserted] = key_lines.emplace(job.key, line.number); !inserted) {
    line.fail(spec_begin, fmt::format("key \"{}\" is already used by the job on line {}{}", quote_for_message(job.key),
                                      it->second, job.derived_key ? " (the same spec and command)" : ""));
  }
  if (file.jobs.size() >= max_jobs) line.fail(spec_begin, fmt::format("more than {} jobs", max_jobs));
}

void FileParser::job(const SourceLine& line, std::string_view content) {
  JobDefinition job;
  job.line = line.number;
  std::string_view command;
  const std::string_view spec = split_spec(line, content, command);
  const std::size_t spec_begin = line.offset_of(spec);
  ParseOptions parse = options;
  if (parse.seconds != SecondsField::none) parse.seconds = SecondsField::required;
  apply_directive(job, parse);
  job.file = path;
  if (file.format == CrontabFormat::system) take_user_column(line, job, command);
  check_field_count(line, spec, command);  // after the user column: "jun" is a user there, not June
  job.command_column = static_cast<int>(line.offset_of(command)) + 1;
  job.at_start = spec == "@reboot";
  // @every counts from the epoch, and @reboot from the start: no zone.
  // A spec with its own zone keeps it over the file's CRON_TZ line.
  job.spec = zone && !spec.starts_with("@every") && !job.at_start && !is_zone_prefix(spec.substr(0, spec.find_first_of(" \t")))
                 ? fmt::format("TZ={} {}", *zone, spec)
                 : std::string(spec);
  const std::size_t prefix = job.spec.size() - spec.size();
  try {
    job.schedule = job.at_start ? std::make_shared<AtStartSchedule>() : parse_schedule(job.spec, parse);
  } catch (const ParseError& e) {
    const std::size_t at = e.position() >= prefix ? spec_begin + e.position() - prefix : spec_begin;
    line.fail(at, fmt::format("{}{}", e.field().empty() ? "" : "field " + e.field() + ": ", e.reason()));
  }
  set_command(job, command);
  if (job.command.empty()) line.fail(line.offset_of(command), "empty command before '%' (write \\% for a literal %)");
  job.environment = environment;
  if (job.key.empty()) {
    // The column's user is part of the line: alice's and bob's same command are two jobs.
    job.key = derive_key(job.spec, job.user_from_column ? job.user + '\t' + job.command : job.command);
    job.derived_key = true;
  }
  check_key(line, job, spec_begin);
  directive.reset();
  file.jobs.push_back(std::move(job));
}

}  // namespace

JobsFile parse_jobs_file(std::string_view text, const std::string& path, const ParseOptions& options,
                         const JobDefaults& defaults, CrontabFormat format) {
  if (text.size() > max_jobs_file_bytes) {
    throw JobsFileError(path, 0, 0, fmt::format("{} bytes, above the limit of {}", text.size(), max_jobs_file_bytes));
  }
  if (text.starts_with("\xEF\xBB\xBF")) text.remove_prefix(3);  // a UTF-8 byte order mark
  FileParser parser{path, options, defaults, {}, {}, {}, {}, {}, 0};
  parser.file.path = path;
  parser.file.format = format;
  int number = 0;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t end = std::min(text.find('\n', start), text.size());
    const std::string_view raw = text.substr(start, end - start);
    ++number;
    start = end + 1;
    if (raw.size() > max_line_bytes) throw JobsFileError(path, number, 1, fmt::format("line longer than {} bytes", max_line_bytes));
    const SourceLine line{path, number, raw};
    const std::string_view content = trim(raw);
    if (content.find('\0') != std::string_view::npos) line.fail(line.offset_of(content) + content.find('\0'), "NUL byte");
    if (content.empty()) {
      if (parser.directive) parser.fail_pending_directive(line, 0);
    } else if (content.front() == '#') {
      parser.comment(line, content);
    } else if (is_zone_prefixed_job(content)) {
      parser.job(line, content);  // TZ=zone, then the spec and the command
    } else if (auto variable = parse_assignment(line, content)) {
      parser.assignment(line, content, std::move(*variable));
    } else {
      parser.job(line, content);  // the spec's tokens, then the command
    }
    if (end == text.size()) break;
  }
  if (parser.directive) {
    throw JobsFileError(path, parser.directive->line, 1, "the fleetcron directive must be followed by a job line");
  }
  return std::move(parser.file);
}

JobsFile load_jobs_file(const std::string& path, const ParseOptions& options, const JobDefaults& defaults,
                        CrontabFormat format) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw JobsFileError(path, 0, 0, fmt::format("cannot read: {}", std::strerror(errno)));
  std::ostringstream content;
  content << in.rdbuf();
  if (in.bad()) throw JobsFileError(path, 0, 0, "read error");
  JobsFile file = parse_jobs_file(content.str(), path, options, defaults, format);
  resolve_job_resources(file);
  return file;
}

}  // namespace fleetcron::daemon
