// fleetcron::nats — a NATS connection and JetStream key-value buckets over
// nats.c (Debian's libnats 3.4): the store behind nats::Election,
// nats::Elector and nats::Claimer.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace fleetcron::nats {

struct TlsOptions {
  bool enabled = false;          // also implied by a tls:// server URL
  std::string ca_file;           // trusted CAs (PEM); empty: the system's
  std::string cert_file;         // client certificate chain (PEM), with key_file
  std::string key_file;
};

struct ConnectionOptions {
  /// One or more server URLs (nats://host:port, tls://host:port); at least one.
  std::vector<std::string> servers{"nats://127.0.0.1:4222"};
  std::string user, password;   // user/password authentication (password never printed)
  std::string token;            // token authentication (never printed)
  std::string credentials_file; // a .creds file (JWT + NKey seed)
  std::string nkey_seed_file;   // an NKey seed file (public key derived from it)
  TlsOptions tls;
  std::string name = "fleetcron";  // the connection name the server shows
  /// Bounds connecting, 1 ms .. 1 h.
  std::chrono::milliseconds connect_timeout{2000};
  /// Bounds every JetStream and KV request (jsOptions.Wait), 1 ms .. 1 h.
  /// A KV call cannot be cancelled: this is how long one can block.
  std::chrono::milliseconds request_timeout{2000};
  /// Reconnect attempts per server after a disconnect; -1: forever.
  int max_reconnects = -1;
  std::chrono::milliseconds reconnect_wait{250};
  /// Bytes of publishes buffered while reconnecting and replayed after:
  /// small, so a write that timed out during an outage is rarely replayed
  /// minutes later. nats.c cannot disable the buffer (0 means 8 MB).
  int reconnect_buffer_bytes = 1;
};

/// "nats://host:port,…" plus the authentication method used, no secrets.
[[nodiscard]] std::string describe(const ConnectionOptions& options);
/// Throws std::invalid_argument naming the field and value.
void validate(const ConnectionOptions& options);

/// A NATS or JetStream failure: the nats.c status and its text.
class Error : public std::runtime_error {
 public:
  Error(int status, const std::string& message) : std::runtime_error(message), status_(status) {}
  /// nats.c's natsStatus (e.g. 26 NATS_TIMEOUT, 5 NATS_CONNECTION_CLOSED).
  [[nodiscard]] int status() const noexcept { return status_; }
  [[nodiscard]] bool timed_out() const noexcept;
  [[nodiscard]] bool not_found() const noexcept;
  /// Nothing stored the request: no responders (a bucket whose stream was
  /// deleted, or lost with the server's store directory).
  [[nodiscard]] bool missing() const noexcept;

 private:
  int status_;
};

enum class Storage { file, memory };

/// What a bucket must be. `ttl` is the age at which every value expires
/// (the stream's MaxAge); 0 means never.
struct BucketConfig {
  std::string name;
  std::chrono::nanoseconds ttl{0};
  Storage storage = Storage::file;
  int replicas = 1;
  int history = 1;
};

/// When the server stored a write, and when the bucket's stream was
/// created, both on the server's clock.
struct WriteTimes {
  std::chrono::sys_time<std::chrono::nanoseconds> written;
  std::chrono::sys_time<std::chrono::nanoseconds> stream_created;
};

/// One value of a key.
struct Entry {
  enum class Operation { put, remove, purge };
  std::string key;
  std::string value;
  std::uint64_t revision = 0;
  Operation operation = Operation::put;
};

class Connection;
class Watcher;

/// A JetStream key-value bucket. Thread-safe; every call is one or more
/// requests bounded by request_timeout. Outcomes that are part of normal
/// contention are results, not exceptions; failures throw Error.
class Bucket {
 public:
  ~Bucket();
  Bucket(const Bucket&) = delete;
  Bucket& operator=(const Bucket&) = delete;

  [[nodiscard]] const std::string& name() const noexcept { return name_; }
  /// The bucket's TTL as the server reports it (0: none); one request.
  [[nodiscard]] std::chrono::nanoseconds ttl();

  /// Writes `key` only if it has no value (absent, expired, deleted):
  /// the new revision, or nullopt if it has one.
  [[nodiscard]] std::optional<std::uint64_t> create(std::string_view key, std::string_view value);
  /// Writes `key` only if its latest revision is `last` (compare-and-swap):
  /// the new revision, or nullopt if it is not. `last` = 0 means "absent".
  [[nodiscard]] std::optional<std::uint64_t> update(std::string_view key, std::string_view value, std::uint64_t last);
  /// Writes unconditionally; the new revision.
  std::uint64_t put(std::string_view key, std::string_view value);
  /// The latest value, or nullopt if absent or deleted.
  [[nodiscard]] std::optional<Entry> get(std::string_view key);
  /// Writes a delete marker.
  void remove(std::string_view key);
  /// Writes a delete marker only if the key's latest revision is `last`
  /// (a delete that cannot remove a successor's write): false if it is not.
  /// `resignation`: the marker carries the header Fleetcron-Resigned, so a
  /// candidate can tell a leader's resignation from any other delete.
  [[nodiscard]] bool remove_if(std::string_view key, std::uint64_t last, bool resignation = false);
  /// Whether the message at `revision` is a delete marker written by
  /// remove_if(…, resignation = true). One request; false on any error.
  [[nodiscard]] bool is_resignation(std::uint64_t revision);
  /// The server's timestamps of the write at `revision` and of the
  /// stream's creation: one request (stream info), two if another write
  /// came after it. Error if the stream is gone or the revision expired.
  [[nodiscard]] WriteTimes write_times(std::uint64_t revision);
  /// Creates the bucket's stream again with the configuration it was bound
  /// with (Connection::bucket(config)); a no-op if it exists. Error if it
  /// was bound by name only (no configuration to recreate it with).
  void recreate();
  /// Watches `key` (a NATS subject pattern of keys): see Watcher.
  [[nodiscard]] std::unique_ptr<Watcher> watch(std::string_view key);

  /// nats.c's handle, for code that needs the rest of the API.
  [[nodiscard]] void* native() const noexcept { return kv_; }

 private:
  friend class Connection;
  Bucket(std::shared_ptr<Connection> connection, void* kv, std::string name);
  std::shared_ptr<Connection> connection_;  // outlives the handle
  void* kv_;                                // kvStore*
  std::string name_;
  std::optional<BucketConfig> config_;      // set when bound by configuration
};

/// Changes to watched keys, delivered to the caller's thread by next().
class Watcher {
 public:
  ~Watcher();
  Watcher(const Watcher&) = delete;
  Watcher& operator=(const Watcher&) = delete;
  /// The next change (first the current values, then updates), or nullopt
  /// after `timeout` or once stop() was called. Throws Error on failure.
  [[nodiscard]] std::optional<Entry> next(std::chrono::milliseconds timeout);
  /// Makes a blocked next() return nullopt; safe from any thread.
  void stop();

 private:
  friend class Bucket;
  Watcher(std::shared_ptr<Connection> connection, void* watcher);
  std::shared_ptr<Connection> connection_;
  void* watcher_;  // kvWatcher*
};

/// One connection to a NATS server (or cluster) with JetStream. Create it
/// with connect(); buckets keep it alive. nats.c's process-wide threads
/// are shut down (nats_CloseAndWait) when the last Connection is gone.
class Connection : public std::enable_shared_from_this<Connection> {
 public:
  /// Validates the options, connects, creates the JetStream context.
  /// Throws std::invalid_argument or Error.
  [[nodiscard]] static std::shared_ptr<Connection> connect(ConnectionOptions options);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  /// Binds to an existing bucket; Error if it does not exist.
  [[nodiscard]] std::shared_ptr<Bucket> bucket(const std::string& name);
  /// Binds to `config.name`, creating it with `config` if missing. An
  /// existing bucket with a different TTL, history or replica count (or
  /// storage) is an Error naming both configurations.
  [[nodiscard]] std::shared_ptr<Bucket> bucket(const BucketConfig& config);
  /// Deletes a bucket and its values (tests, tools).
  void delete_bucket(const std::string& name);

  [[nodiscard]] const ConnectionOptions& options() const noexcept { return options_; }
  [[nodiscard]] std::string describe() const { return description_; }
  /// Closes the connection: blocked calls return at once with an error.
  void close();
  /// True while connected (false while reconnecting or closed).
  [[nodiscard]] bool connected() const noexcept;

 private:
  struct Private;
  explicit Connection(ConnectionOptions options);
  ConnectionOptions options_;
  std::string description_;
  std::shared_ptr<void> library_;  // holds nats.c open
  void* nc_ = nullptr;             // natsConnection*
  void* js_ = nullptr;             // jsCtx*
  friend class Bucket;
  friend class Watcher;
};

}  // namespace fleetcron::nats
