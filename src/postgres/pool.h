// The libpq connections of one postgres::Connection: checked out one at a
// time, each statement sent with its parameters as text and awaited with a
// deadline. Internal to fleetcron::postgres.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fleetcron/postgres/connection.h"

namespace fleetcron::postgres::detail {

/// A statement's answer: its rows as text (nullopt: NULL) and, for
/// INSERT/UPDATE/DELETE, how many rows it affected.
struct Rows {
  std::vector<std::vector<std::optional<std::string>>> rows;
  std::size_t affected = 0;

  [[nodiscard]] bool empty() const noexcept { return rows.empty(); }
  /// The value at row `r`, column `c`; "" for NULL.
  [[nodiscard]] const std::string& text(std::size_t r, std::size_t c) const;
  [[nodiscard]] bool null(std::size_t r, std::size_t c) const { return !rows.at(r).at(c).has_value(); }
};

using Params = std::vector<std::optional<std::string>>;

class Conn;

/// One checked-out connection, for the statements of one transaction.
class Session {
 public:
  explicit Session(Conn& conn) : conn_(conn) {}
  /// Throws BackendError.
  Rows exec(std::string_view sql, const Params& params = {});

 private:
  Conn& conn_;
};

class Pool {
 public:
  Pool(ConnectionOptions options, std::string description);
  ~Pool();
  Pool(const Pool&) = delete;
  Pool& operator=(const Pool&) = delete;

  /// One statement on its own (autocommit). Throws BackendError.
  Rows exec(std::string_view sql, const Params& params = {});
  /// `body` between BEGIN and COMMIT on one connection; on an exception
  /// the transaction is rolled back (or the connection dropped) and the
  /// exception rethrown. Throws BackendError.
  void transaction(const std::function<void(Session&)>& body);
  [[nodiscard]] const std::string& description() const noexcept { return description_; }

 private:
  class Lease;
  ConnectionOptions options_;
  std::string description_;
  struct State;
  std::unique_ptr<State> state_;
};

/// `bytes` as bytea's hex input ("\\x6869"), and back from bytea's hex
/// output; job and fire keys are bytes (any byte, NUL included), compared
/// byte by byte as the other backends do.
[[nodiscard]] std::string to_bytea(std::string_view bytes);
[[nodiscard]] std::string from_bytea(std::string_view hex);

/// `text` with every password `uri` holds (its user information's, a
/// `password=` parameter's) shown as "***": the one masker of the backend.
[[nodiscard]] std::string without_secrets(std::string text, std::string_view uri);

/// `values` as a PostgreSQL array literal of text ("{\"a\",\"b\"}").
[[nodiscard]] std::string text_array(const std::vector<std::string>& values);

}  // namespace fleetcron::postgres::detail
