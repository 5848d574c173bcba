#include "daemon/jobs_file.h"

#include "daemon/settings.h"

#include <fmt/format.h>

#include <algorithm>
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

bool is_name_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) != 0 || c == '_'; }
bool is_name_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_'; }

/// One line being parsed, for error positions.
struct Line {
  const std::string& path;
  int number;
  std::string_view text;

  [[noreturn]] void fail(std::size_t offset, const std::string& reason) const {
    throw JobsFileError(path, number, static_cast<int>(offset) + 1, reason);
  }
  std::size_t offset_of(std::string_view part) const { return static_cast<std::size_t>(part.data() - text.data()); }
};

std::string_view trim(std::string_view text) {
  while (!text.empty() && is_space(text.front())) text.remove_prefix(1);
  while (!text.empty() && (is_space(text.back()) || text.back() == '\r')) text.remove_suffix(1);
  return text;
}

/// NAME=value, NAME = value, NAME="value", NAME='value'. nullopt if the
/// line is not an assignment.
std::optional<std::pair<std::string, std::string>> parse_assignment(const Line& line, std::string_view text) {
  std::size_t i = 0;
  if (text.empty() || !is_name_start(text[0])) return std::nullopt;
  while (i < text.size() && is_name_char(text[i])) ++i;
  const std::string_view name = text.substr(0, i);
  while (i < text.size() && is_space(text[i])) ++i;
  if (i >= text.size() || text[i] != '=') return std::nullopt;
  ++i;
  while (i < text.size() && is_space(text[i])) ++i;
  std::string_view value = text.substr(i);
  if (!value.empty() && (value.front() == '"' || value.front() == '\'')) {
    const char quote = value.front();
    if (value.size() < 2 || value.back() != quote) line.fail(line.offset_of(value), "unterminated quoted value");
    value = value.substr(1, value.size() - 2);
  }
  return std::pair{std::string(name), std::string(value)};
}

struct Directive {
  int line = 0;
  std::optional<std::string> key;
  std::optional<std::chrono::nanoseconds> timeout, jitter, catch_up;
  std::optional<int> retries;
  std::optional<Overlap> overlap;
  std::optional<MissedFirePolicy> missed;
  std::optional<DstGap> gap;
  std::optional<DstOverlap> dst_overlap;
  std::optional<RecoverPolicy> recover;
};

std::optional<MissedFirePolicy> missed_from_string(std::string_view text) {
  if (text == "run-once") return MissedFirePolicy::run_once;
  if (text == "skip") return MissedFirePolicy::skip;
  if (text == "run-all") return MissedFirePolicy::run_all;
  return std::nullopt;
}

std::optional<Overlap> overlap_from_string(std::string_view text) {
  if (text == "skip") return Overlap::skip;
  if (text == "allow") return Overlap::allow;
  if (text == "queue") return Overlap::queue;
  return std::nullopt;
}

Directive parse_directive(const Line& line, std::string_view body) {
  Directive directive;
  directive.line = line.number;
  std::size_t i = 0;
  while (i < body.size()) {
    while (i < body.size() && is_space(body[i])) ++i;
    if (i >= body.size()) break;
    std::size_t end = i;
    while (end < body.size() && !is_space(body[end])) ++end;
    const std::string_view token = body.substr(i, end - i);
    const std::size_t at = line.offset_of(token);
    const std::size_t equals = token.find('=');
    if (equals == std::string_view::npos || equals == 0) {
      line.fail(at, fmt::format("expected name=value in a fleetcron directive, got \"{}\"", quote_for_message(token)));
    }
    const std::string_view name = token.substr(0, equals);
    const std::string_view value = token.substr(equals + 1);
    const std::size_t value_at = at + equals + 1;
    if (value.empty()) line.fail(value_at, fmt::format("{}= needs a value", name));
    auto duration = [&](std::string_view what) {
      try {
        const auto d = parse_duration(value);
        if (d < std::chrono::nanoseconds::zero()) line.fail(value_at, fmt::format("{} must not be negative", what));
        return d;
      } catch (const DurationError& e) {
        line.fail(value_at + e.position(), fmt::format("{}: {}", what, e.what()));
      }
    };
    auto once = [&](bool already) {
      if (already) line.fail(at, fmt::format("{} given twice", name));
    };
    if (name == "key") {
      once(directive.key.has_value());
      directive.key = std::string(value);
    } else if (name == "timeout") {
      once(directive.timeout.has_value());
      directive.timeout = duration("timeout");
    } else if (name == "jitter") {
      once(directive.jitter.has_value());
      directive.jitter = duration("jitter");
    } else if (name == "retries") {
      once(directive.retries.has_value());
      int n = 0;
      const auto [end_ptr, error] = std::from_chars(value.data(), value.data() + value.size(), n);
      if (error != std::errc{} || end_ptr != value.data() + value.size() || n < 0 || n > 100) {
        line.fail(value_at, fmt::format("retries: expected 0..100, got \"{}\"", quote_for_message(value)));
      }
      directive.retries = n;
    } else if (name == "overlap") {
      once(directive.overlap.has_value());
      directive.overlap = overlap_from_string(value);
      if (!directive.overlap) line.fail(value_at, fmt::format("overlap: expected skip, allow or queue, got \"{}\"", quote_for_message(value)));
    } else if (name == "missed") {
      once(directive.missed.has_value());
      directive.missed = missed_from_string(value);
      if (!directive.missed) {
        line.fail(value_at, fmt::format("missed: expected run-once, skip or run-all, got \"{}\"", quote_for_message(value)));
      }
    } else if (name == "catch-up") {
      once(directive.catch_up.has_value());
      try {
        directive.catch_up = parse_catch_up(value);
      } catch (const std::invalid_argument& e) {
        line.fail(value_at, fmt::format("catch-up: {}", e.what()));
      }
    } else if (name == "recover") {
      once(directive.recover.has_value());
      if (value == "report") {
        directive.recover = RecoverPolicy::report;
      } else if (value == "rerun") {
        directive.recover = RecoverPolicy::rerun;
      } else {
        line.fail(value_at, fmt::format("recover: expected report or rerun, got \"{}\"", quote_for_message(value)));
      }
    } else if (name == "dst-gap") {
      once(directive.gap.has_value());
      directive.gap = dst_gap_from_string(value);
      if (!directive.gap) line.fail(value_at, fmt::format("dst-gap: expected shift or skip, got \"{}\"", quote_for_message(value)));
    } else if (name == "dst-overlap") {
      once(directive.dst_overlap.has_value());
      directive.dst_overlap = dst_overlap_from_string(value);
      if (!directive.dst_overlap) {
        line.fail(value_at, fmt::format("dst-overlap: expected first, last or both, got \"{}\"", quote_for_message(value)));
      }
    } else {
      line.fail(at, fmt::format("unknown directive option \"{}\" (known: key, timeout, jitter, retries, overlap, "
                                "missed, catch-up, recover, dst-gap, dst-overlap)",
                                quote_for_message(name)));
    }
    i = end;
  }
  return directive;
}

std::uint64_t fnv1a(std::string_view text, std::uint64_t hash = 14695981039346656037ULL) {
  for (const char c : text) {
    hash ^= static_cast<unsigned char>(c);
    hash *= 1099511628211ULL;
  }
  return hash;
}

}  // namespace

std::string_view to_string(Overlap overlap) noexcept {
  switch (overlap) {
    case Overlap::skip: return "skip";
    case Overlap::allow: return "allow";
    case Overlap::queue: return "queue";
  }
  return "unknown";
}

bool JobDefinition::same_definition(const JobDefinition& other) const {
  return key == other.key && spec == other.spec && command == other.command && attempt_timeout == other.attempt_timeout &&
         jitter == other.jitter && retries == other.retries && overlap == other.overlap && missed == other.missed &&
         catch_up == other.catch_up && recover == other.recover &&
         dst.has_value() == other.dst.has_value() && (!dst || (dst->gap == other.dst->gap && dst->overlap == other.dst->overlap)) &&
         environment == other.environment;
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
  if (job.retries > 0) options.retry = RetryPolicy{.max_retries = job.retries};
  switch (job.overlap) {
    case Overlap::skip: options.overlap = OverlapPolicy::skip; break;
    case Overlap::allow: options.overlap = OverlapPolicy::allow; break;
    case Overlap::queue: options.overlap = OverlapPolicy::queue; break;
  }
  return options;
}

std::string derive_key(std::string_view spec, std::string_view command) {
  std::uint64_t hash = fnv1a(spec);
  hash = fnv1a("\n", hash);
  hash = fnv1a(command, hash);
  return fmt::format("job-{:016x}", hash);
}

namespace {

// The state of one parse: what earlier lines set for the lines after them.
struct FileParser {
  const std::string& path;
  const ParseOptions& options;
  JobsFile file;
  std::vector<std::pair<std::string, std::string>> environment;
  std::optional<std::string> zone;  // from CRON_TZ= / TZ= lines
  std::optional<Directive> directive;
  std::map<std::string, int> key_lines;

  void fail_pending_directive(const Line& line, std::size_t at) const {
    line.fail(at, fmt::format("the fleetcron directive on line {} must be followed by a job line", directive->line));
  }
  void comment(const Line& line, std::string_view content);
  void assignment(const Line& line, std::string_view content, std::pair<std::string, std::string> variable);
  void job(const Line& line, std::string_view content);
  /// The spec's tokens (5 or 6 fields, or one @-word, or `@every D`) from
  /// `content`; returns the spec and sets `command` to the rest.
  std::string_view split_spec(const Line& line, std::string_view content, std::string_view& command) const;
  void apply_directive(JobDefinition& job, ParseOptions& parse) const;
  void check_key(const Line& line, const JobDefinition& job, std::size_t spec_begin);
};

void FileParser::comment(const Line& line, std::string_view content) {
  std::string_view body = trim(content.substr(1));
  if (body.starts_with("fleetcron:")) {
    if (directive) {
      line.fail(line.offset_of(content), fmt::format("a second fleetcron directive (the first is on line {})", directive->line));
    }
    directive = parse_directive(line, body.substr(10));
  } else if (directive) {
    fail_pending_directive(line, line.offset_of(content));
  }
}

void FileParser::assignment(const Line& line, std::string_view content, std::pair<std::string, std::string> variable) {
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
  environment.emplace_back(std::move(name), std::move(value));
}

std::string_view FileParser::split_spec(const Line& line, std::string_view content, std::string_view& command) const {
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
  const std::string_view first = next_token();
  tokens.push_back(first);
  if (first.starts_with('@')) wanted = first == "@every" ? 2 : 1;
  while (tokens.size() < wanted) {
    const std::string_view token = next_token();
    if (token.empty()) {
      line.fail(raw.size(), fmt::format("expected {} spec fields then a command, found {} field(s) and no command",
                                        wanted, tokens.size()));
    }
    tokens.push_back(token);
  }
  const std::size_t spec_begin = line.offset_of(tokens.front());
  const std::size_t spec_end = line.offset_of(tokens.back()) + tokens.back().size();
  command = trim(raw.substr(spec_end));
  if (command.empty()) line.fail(spec_end, "missing command after the spec");
  return raw.substr(spec_begin, spec_end - spec_begin);
}

void FileParser::apply_directive(JobDefinition& job, ParseOptions& parse) const {
  if (!directive) return;
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
  job.overlap = directive->overlap.value_or(Overlap::skip);
  job.missed = directive->missed;
  job.catch_up = directive->catch_up;
  job.recover = directive->recover.value_or(RecoverPolicy::report);
}

void FileParser::check_key(const Line& line, const JobDefinition& job, std::size_t spec_begin) {
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

void FileParser::job(const Line& line, std::string_view content) {
  JobDefinition job;
  job.line = line.number;
  std::string_view command;
  const std::string_view spec = split_spec(line, content, command);
  const std::size_t spec_begin = line.offset_of(spec);
  ParseOptions parse = options;
  if (parse.seconds != SecondsField::none) parse.seconds = SecondsField::required;
  apply_directive(job, parse);
  // @every counts from the process start, not a wall clock: no zone.
  job.spec = zone && !spec.starts_with("@every") ? fmt::format("TZ={} {}", *zone, spec) : std::string(spec);
  const std::size_t prefix = job.spec.size() - spec.size();
  try {
    job.schedule = parse_schedule(job.spec, parse);
  } catch (const ParseError& e) {
    const std::size_t at = e.position() >= prefix ? spec_begin + e.position() - prefix : spec_begin;
    line.fail(at, fmt::format("{}{}", e.field().empty() ? "" : "field " + e.field() + ": ", e.reason()));
  }
  job.command = std::string(command);
  job.environment = environment;
  if (job.key.empty()) {
    job.key = derive_key(job.spec, job.command);
    job.derived_key = true;
  }
  check_key(line, job, spec_begin);
  directive.reset();
  file.jobs.push_back(std::move(job));
}

}  // namespace

JobsFile parse_jobs_file(std::string_view text, const std::string& path, const ParseOptions& options) {
  if (text.size() > max_jobs_file_bytes) {
    throw JobsFileError(path, 0, 0, fmt::format("{} bytes, above the limit of {}", text.size(), max_jobs_file_bytes));
  }
  if (text.starts_with("\xEF\xBB\xBF")) text.remove_prefix(3);  // a UTF-8 byte order mark
  FileParser parser{path, options, {}, {}, {}, {}, {}};
  parser.file.path = path;
  int number = 0;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t end = std::min(text.find('\n', start), text.size());
    const std::string_view raw = text.substr(start, end - start);
    ++number;
    start = end + 1;
    if (raw.size() > max_line_bytes) throw JobsFileError(path, number, 1, fmt::format("line longer than {} bytes", max_line_bytes));
    const Line line{path, number, raw};
    const std::string_view content = trim(raw);
    if (content.find('\0') != std::string_view::npos) line.fail(line.offset_of(content) + content.find('\0'), "NUL byte");
    if (content.empty()) {
      if (parser.directive) parser.fail_pending_directive(line, 0);
    } else if (content.front() == '#') {
      parser.comment(line, content);
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

JobsFile load_jobs_file(const std::string& path, const ParseOptions& options) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw JobsFileError(path, 0, 0, fmt::format("cannot read: {}", std::strerror(errno)));
  std::ostringstream content;
  content << in.rdbuf();
  if (in.bad()) throw JobsFileError(path, 0, 0, "read error");
  return parse_jobs_file(content.str(), path, options);
}

}  // namespace fleetcron::daemon
