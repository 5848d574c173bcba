// fleetcron::nats — a NATS connection and JetStream key-value buckets over
// nats.c (Debian's libnats 3.4): the store behind nats::Election,
// nats::Elector and nats::Claimer. Failures throw fleetcron::BackendError
// (its code() is nats.c's natsStatus).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "fleetcron/api.h"
#include "fleetcron/backend_error.h"
#include "fleetcron/nats/connection_options.h"

namespace fleetcron::nats {

enum class Storage { file, memory };

/// What a bucket must be. `ttl` is the age at which every value expires
/// (the stream's MaxAge); 0 means never.
struct FLEETCRON_API BucketConfig {
  std::string name;
  std::chrono::nanoseconds ttl{0};
  Storage storage = Storage::file;
  int replicas = 1;
  int history = 1;
};

/// When the server stored a write, and when the bucket's stream was
/// created, both on the server's clock.
struct FLEETCRON_API WriteTimes {
  std::chrono::sys_time<std::chrono::nanoseconds> written;
  std::chrono::sys_time<std::chrono::nanoseconds> stream_created;
};

/// The outcome of one create of Bucket::create_many().
struct FLEETCRON_API CreateResult {
  enum class Status {
    created,  ///< written at `revision`
    taken,    ///< the key has a value (or a delete marker: see create_many)
    missing,  ///< no stream answered (the bucket is gone)
    failed,   ///< refused or unanswered; `error` says why (it may have been written)
  };
  Status status = Status::failed;
  std::uint64_t revision = 0;
  std::string error;
};

/// One value of a key.
struct FLEETCRON_API Entry {
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
/// contention are results, not exceptions; failures throw BackendError.
class FLEETCRON_API Bucket {
 public:
  ~Bucket();
  Bucket(const Bucket&) = delete;
  Bucket& operator=(const Bucket&) = delete;

  [[nodiscard]] const std::string& name() const noexcept;
  /// The bucket's TTL (0: none): the configured one when bound by
  /// configuration, else as the server reports it (one request).
  [[nodiscard]] std::chrono::nanoseconds ttl();
  /// How many replicas the bucket's stream has: the configured number when
  /// bound by configuration, else as the server reports it (one request).
  [[nodiscard]] int replicas();

  /// Writes `key` only if it has no value (absent, expired, deleted):
  /// the new revision, or nullopt if it has one.
  [[nodiscard]] std::optional<std::uint64_t> create(std::string_view key, std::string_view value);
  /// create() for every key, pipelined: asynchronous JetStream publishes,
  /// each expecting its subject to hold no message yet, then one wait for
  /// every acknowledgment (request_timeout). One result per key, in order;
  /// a key repeated in `keys` is created once (then taken). Unlike
  /// create(), a key whose latest message is a delete marker counts as
  /// taken (fleetcron never deletes claims; the error is on the safe side).
  /// Throws BackendError only if nothing could be sent.
  [[nodiscard]] std::vector<CreateResult> create_many(std::span<const std::string> keys, std::string_view value);
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
  /// came after it. BackendError if the stream is gone or the revision expired.
  [[nodiscard]] WriteTimes write_times(std::uint64_t revision);
  /// The stream's creation time (WriteTimes::stream_created; `written` is
  /// its latest write's, whoever wrote it): one request (stream info).
  [[nodiscard]] WriteTimes stream_times();
  /// The server's timestamp of each write at `revisions`, all within one
  /// request_timeout: pipelined direct gets (each reply checked to be the
  /// revision asked for), asked again for half the time for what a lagging
  /// replica could not answer yet, then what is left asked of the stream's
  /// leader one by one until the time is up. nullopt where it was not read
  /// (a claim then fails closed).
  [[nodiscard]] std::vector<std::optional<std::chrono::sys_time<std::chrono::nanoseconds>>> written_times(
      std::span<const std::uint64_t> revisions);
  /// Creates the bucket's stream again with the configuration it was bound
  /// with (Connection::bucket(config)); a no-op if it exists. BackendError if it
  /// was bound by name only (no configuration to recreate it with).
  void recreate();
  /// Watches `key` (a NATS subject pattern of keys): see Watcher.
  [[nodiscard]] std::unique_ptr<Watcher> watch(std::string_view key);

  struct Impl;  // nats.c's handle, bound on first use

 private:
  friend class Connection;
  FLEETCRON_LOCAL explicit Bucket(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

/// Changes to watched keys, delivered to the caller's thread by next().
class FLEETCRON_API Watcher {
 public:
  ~Watcher();
  Watcher(const Watcher&) = delete;
  Watcher& operator=(const Watcher&) = delete;
  /// The next change (first the current values, then updates), or nullopt
  /// after `timeout` or once stop() was called. Throws BackendError on failure.
  [[nodiscard]] std::optional<Entry> next(std::chrono::milliseconds timeout);
  /// Makes a blocked next() return nullopt; safe from any thread.
  void stop();

  struct Impl;

 private:
  friend class Bucket;
  FLEETCRON_LOCAL explicit Watcher(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

/// One connection to a NATS server (or cluster) with JetStream. Create it
/// with connect(); buckets keep it alive. It connects lazily, on first use
/// (bounded by connect_timeout); until it has connected once, a failed
/// attempt makes the calls fail at once with its BackendError until the
/// next attempt, reconnect_wait later and doubling up to 10 s. Once
/// connected, nats.c reconnects by itself (max_reconnects). nats.c's
/// process-wide threads are shut down (nats_CloseAndWait) when the last
/// Connection is gone.
class FLEETCRON_API Connection : public std::enable_shared_from_this<Connection> {
 public:
  /// Validates the options (std::invalid_argument) and reads the files
  /// they name (BackendError if a credentials, key or TLS file does not
  /// load); does not connect.
  [[nodiscard]] static std::shared_ptr<Connection> connect(ConnectionOptions options);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  /// The existing bucket `name`: BackendError if it does not exist. Bound
  /// at once if the server answers, else on first use.
  [[nodiscard]] std::shared_ptr<Bucket> bucket(const std::string& name);
  /// The bucket `config.name`, created with `config` if missing; bound at
  /// once if the server answers, else on first use. An existing bucket
  /// with a different TTL, history or replica count (or storage) is a
  /// BackendError naming both configurations.
  [[nodiscard]] std::shared_ptr<Bucket> bucket(const BucketConfig& config);
  /// Deletes a bucket and its values (tests, tools).
  void delete_bucket(const std::string& name);

  [[nodiscard]] const ConnectionOptions& options() const noexcept;
  [[nodiscard]] std::string describe() const;
  /// Closes the connection: blocked calls return at once with an error.
  void close();
  /// True while connected (false while connecting, reconnecting or closed).
  [[nodiscard]] bool connected() const noexcept;
  /// Connects if need be and checks the server answers (a round trip
  /// bounded by request_timeout); throws BackendError otherwise.
  void ping();

  struct Impl;

 private:
  explicit Connection(ConnectionOptions options);
  FLEETCRON_LOCAL static void bind_now(Bucket::Impl& bucket, bool must_exist);
  std::unique_ptr<Impl> impl_;
  friend class Bucket;
  friend class Watcher;
};

}  // namespace fleetcron::nats
