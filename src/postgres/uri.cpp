#include "fleetcron/postgres/uri.h"

#include <fmt/format.h>

#include <charconv>
#include <stdexcept>
#include <vector>

#include "core/support/percent_decoding.h"
#include "fleetcron/duration.h"
#include "postgres/pool.h"

namespace fleetcron::postgres {

namespace {

[[noreturn]] void refuse(std::string_view uri, const std::string& what) {
  throw UriError(fmt::format("coordinator URI {}: {}", detail::without_secrets(std::string(uri), uri), detail::without_secrets(what, uri)));
}

std::string decoded(std::string_view uri, std::string_view text) {
  std::size_t bad_at = 0;
  auto out = fleetcron::detail::percent_decode(text, bad_at);
  if (!out) refuse(uri, fmt::format("bad percent-encoding in \"{}\"", text));
  return std::move(*out);
}

}  // namespace

bool is_postgres_uri(std::string_view uri) noexcept {
  return uri.starts_with("postgres://") || uri.starts_with("postgresql://");
}

UriOptions parse_uri(std::string_view uri, ConnectionOptions base) {
  if (!is_postgres_uri(uri)) refuse(uri, "expected postgres://… or postgresql://…");
  UriOptions out{std::move(base), {}, std::nullopt};
  const auto question = uri.find('?');
  std::string kept(uri.substr(0, question));
  std::vector<std::string> libpq_params;
  if (question != std::string_view::npos) {
    std::string_view query = uri.substr(question + 1);
    while (!query.empty()) {
      const auto amp = query.find('&');
      const std::string_view pair = query.substr(0, amp);
      query = amp == std::string_view::npos ? std::string_view{} : query.substr(amp + 1);
      const auto eq = pair.find('=');
      const std::string_view name = pair.substr(0, eq);
      const std::string value = eq == std::string_view::npos ? std::string() : decoded(uri, pair.substr(eq + 1));
      if (name == "claims_table") {
        out.tables.claims = value;
      } else if (name == "leader_table") {
        out.tables.leader = value;
      } else if (name == "fleet_prefix") {
        out.tables.fleet_prefix = value;
      } else if (name == "leader_name") {
        if (value.empty()) refuse(uri, "leader_name is empty");
        out.leader_name = value;
      } else if (name == "pool_size") {
        std::size_t size = 0;
        if (std::from_chars(value.data(), value.data() + value.size(), size).ptr != value.data() + value.size() ||
            value.empty()) {
          refuse(uri, fmt::format("pool_size \"{}\" is not a number", value));
        }
        out.connection.pool_size = size;
      } else if (name == "statement_timeout") {
        try {
          out.connection.statement_timeout = std::chrono::ceil<std::chrono::milliseconds>(parse_duration(value));
        } catch (const std::exception& e) {
          refuse(uri, fmt::format("statement_timeout: {}", e.what()));
        }
      } else if (!pair.empty()) {
        libpq_params.emplace_back(pair);  // libpq's own; it refuses the ones it does not know
      }
    }
  }
  for (std::size_t i = 0; i < libpq_params.size(); ++i) kept += (i == 0 ? "?" : "&") + libpq_params[i];
  out.connection.uri = kept;
  try {
    check_table_names(out.tables);
    validate(out.connection);
  } catch (const std::invalid_argument& e) {
    refuse(uri, e.what());
  }
  return out;
}

}  // namespace fleetcron::postgres
