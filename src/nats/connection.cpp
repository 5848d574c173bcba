// Connection, Bucket and Watcher over nats.c.
#include "fleetcron/nats/connection.h"

#include <fmt/format.h>
#include <nats/nats.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "fleetcron/duration.h"
#include "fleetcron/rfc3339.h"
#include "nats/status.h"

namespace fleetcron::nats {

namespace {

constexpr auto min_timeout = std::chrono::milliseconds{1};
// The longest wait between two attempts to connect a Connection that never
// connected (once connected, nats.c reconnects by itself).
constexpr auto max_connect_backoff = std::chrono::milliseconds{10'000};
constexpr auto max_timeout = std::chrono::hours{1};

// How long a close waits for nats.c's threads, and how long an open waits
// for a close that outlasted that (on a busy host) to finish.
constexpr std::int64_t library_close_wait_ms = 2000;
constexpr auto library_reopen_wait = std::chrono::seconds{10};

// nats.c's library threads, shared by every Connection of the process:
// opened by the first user, closed (nats_CloseAndWait) after the last. The
// count is kept here, under one mutex, so that an open never meets a close
// still to come (a weak pointer expires before its deleter runs, and the
// library it found open would then be closed under its new user). A close
// that timed out goes on tearing the library down, and nats_Open() fails
// (NATS_FAILED_TO_INITIALIZE) until it is done: the next open waits for
// it, bounded.
std::shared_ptr<void> open_library() {
  static std::mutex mutex;
  static std::size_t users = 0;
  std::lock_guard guard(mutex);
  if (users == 0) {
    natsStatus status = nats_Open(-1);
    const auto give_up = std::chrono::steady_clock::now() + library_reopen_wait;
    while (status == NATS_FAILED_TO_INITIALIZE && std::chrono::steady_clock::now() < give_up) {
      std::this_thread::sleep_for(std::chrono::milliseconds{10});
      status = nats_Open(-1);
    }
    if (status != NATS_OK) detail::raise(status, "opening the NATS library");
  }
  ++users;
  return {nullptr, [](void*) {
            std::lock_guard close_guard(mutex);
            // From a NATS thread this fails with NATS_ILLEGAL_STATE and the
            // library stays open, for the next user to find.
            if (--users == 0) (void)nats_CloseAndWait(library_close_wait_ms);
          }};
}

void check_timeout(std::string_view field, std::chrono::milliseconds value) {
  if (value < min_timeout || value > max_timeout) {
    throw std::invalid_argument(fmt::format("nats::ConnectionOptions.{}: {} is out of range 1ms..1h", field,
                                            format_duration(value)));
  }
}

Entry to_entry(kvEntry* raw) {
  Entry entry;
  entry.key = kvEntry_Key(raw);
  const void* value = kvEntry_Value(raw);
  if (value != nullptr) entry.value.assign(static_cast<const char*>(value), static_cast<std::size_t>(kvEntry_ValueLen(raw)));
  entry.revision = kvEntry_Revision(raw);
  switch (kvEntry_Operation(raw)) {
    case kvOp_Delete: entry.operation = Entry::Operation::remove; break;
    case kvOp_Purge: entry.operation = Entry::Operation::purge; break;
    default: entry.operation = Entry::Operation::put; break;
  }
  return entry;
}

struct EntryDeleter {
  void operator()(kvEntry* entry) const noexcept { kvEntry_Destroy(entry); }
};
using EntryPtr = std::unique_ptr<kvEntry, EntryDeleter>;

std::string key_string(std::string_view key) { return std::string(key); }

// On a delete marker written by a resigning leader (Bucket::remove_if).
constexpr const char* resigned_header = "Fleetcron-Resigned";

natsStatus create_key_value(kvStore** kv, void* js, const BucketConfig& config) {
  kvConfig cfg;
  kvConfig_Init(&cfg);
  cfg.Bucket = config.name.c_str();
  cfg.TTL = config.ttl.count();  // nanoseconds, copied into the stream's MaxAge
  cfg.History = static_cast<uint8_t>(config.history);
  cfg.Replicas = config.replicas;
  cfg.StorageType = config.storage == Storage::memory ? js_MemoryStorage : js_FileStorage;
  return js_CreateKeyValue(kv, static_cast<jsCtx*>(js), &cfg);
}

std::chrono::sys_time<std::chrono::nanoseconds> server_time(int64_t nanoseconds) {
  return std::chrono::sys_time<std::chrono::nanoseconds>{std::chrono::nanoseconds{nanoseconds}};
}

}  // namespace

void validate(const ConnectionOptions& options) {
  if (options.servers.empty()) throw std::invalid_argument("nats::ConnectionOptions.servers: empty");
  for (const auto& server : options.servers) {
    if (server.empty()) throw std::invalid_argument("nats::ConnectionOptions.servers: an empty URL");
  }
  if (!options.password.empty() && options.user.empty()) {
    throw std::invalid_argument("nats::ConnectionOptions.password: set without user");
  }
  const int methods = (options.user.empty() ? 0 : 1) + (options.token.empty() ? 0 : 1) +
                      (options.credentials_file.empty() ? 0 : 1) + (options.nkey_seed_file.empty() ? 0 : 1);
  if (methods > 1) {
    throw std::invalid_argument(
        "nats::ConnectionOptions: give one of user/password, token, credentials_file, nkey_seed_file");
  }
  if (options.tls.cert_file.empty() != options.tls.key_file.empty()) {
    throw std::invalid_argument("nats::ConnectionOptions.tls: cert_file and key_file go together");
  }
  check_timeout("connect_timeout", options.connect_timeout);
  check_timeout("request_timeout", options.request_timeout);
  check_timeout("reconnect_wait", options.reconnect_wait);
  if (options.max_reconnects < -1) {
    throw std::invalid_argument(fmt::format("nats::ConnectionOptions.max_reconnects: {} is below -1", options.max_reconnects));
  }
  if (options.reconnect_buffer_bytes < 1) {
    throw std::invalid_argument(fmt::format("nats::ConnectionOptions.reconnect_buffer_bytes: {} is below 1",
                                            options.reconnect_buffer_bytes));
  }
}

std::string describe(const ConnectionOptions& options) {
  std::string servers;
  for (const auto& server : options.servers) {
    if (!servers.empty()) servers += ',';
    // A URL may carry user:password@ itself: show only what follows '@'.
    const auto scheme = server.find("://");
    const auto at = server.rfind('@');
    if (at != std::string::npos && scheme != std::string::npos && at > scheme) {
      servers += server.substr(0, scheme + 3) + "***@" + server.substr(at + 1);
    } else {
      servers += server;
    }
  }
  std::string auth;
  if (!options.user.empty()) auth = " (user " + options.user + ")";
  if (!options.token.empty()) auth = " (token)";
  if (!options.credentials_file.empty()) auth = " (credentials " + options.credentials_file + ")";
  if (!options.nkey_seed_file.empty()) auth = " (nkey " + options.nkey_seed_file + ")";
  return servers + auth;
}

// ---- Connection

struct FLEETCRON_LOCAL Connection::Impl {
  ConnectionOptions options;
  std::string description;
  std::shared_ptr<void> library;  // holds nats.c open
  natsOptions* nats_options = nullptr;
  std::mutex mutex;  // guards js and the members below; never held while connecting
  std::condition_variable connect_done;  // a connect under way ended
  bool connecting = false;
  // Written once, under the mutex; read without it (connected(), close()
  // must not wait behind a connect in progress).
  std::atomic<natsConnection*> nc{nullptr};
  jsCtx* js = nullptr;
  std::atomic<bool> closed{false};
  std::chrono::steady_clock::time_point next_attempt{};
  std::chrono::milliseconds backoff{0};
  BackendError::Kind last_kind = BackendError::Kind::connect;
  std::string last_error;
  /// The JetStream context, connecting first if need be; throws the last
  /// connect error (with when the next attempt is) while it cannot.
  jsCtx* ready();
  /// One connect, with no lock held: the connection and its context, or
  /// the error (kind, message, the exception to throw).
  struct Attempt {
    natsConnection* nc = nullptr;
    jsCtx* js = nullptr;
    BackendError::Kind kind = BackendError::Kind::connect;
    std::string error;
    std::exception_ptr failure;
  };
  [[nodiscard]] Attempt connect_once() const;
  ~Impl() {
    if (js != nullptr) jsCtx_Destroy(js);
    if (nc.load() != nullptr) natsConnection_Destroy(nc.load());
    if (nats_options != nullptr) natsOptions_Destroy(nats_options);
  }
};

struct FLEETCRON_LOCAL Bucket::Impl {
  std::shared_ptr<Connection> connection;  // outlives the handle
  std::string name;
  std::optional<BucketConfig> config;      // set when bound by configuration
  std::mutex mutex;                        // guards kv, mismatch
  kvStore* kv = nullptr;                   // bound on first use
  bool mismatch = false;                   // the bucket exists with another configuration
  const std::string& where() const { return connection->impl_->description; }
  jsCtx* js() const { return connection->impl_->ready(); }
  /// nats.c's handle: binds (creating the bucket from `config`) on first
  /// use; throws BackendError while that fails.
  kvStore* bound();
  /// nats.c's kvStore_Get: a direct get, which any replica may answer.
  std::optional<Entry> direct_get(const std::string& key);
  ~Impl() {
    if (kv != nullptr) kvStore_Destroy(kv);
  }
};

struct FLEETCRON_LOCAL Watcher::Impl {
  std::shared_ptr<Connection> connection;
  kvWatcher* watcher = nullptr;
  ~Impl() { kvWatcher_Destroy(watcher); }
};

namespace {

natsOptions* make_options(const ConnectionOptions& o, const std::string& where) {
  natsOptions* raw = nullptr;
  detail::check(natsOptions_Create(&raw), where, "creating options");
  std::unique_ptr<natsOptions, void (*)(natsOptions*)> nats_options(raw, natsOptions_Destroy);
  std::vector<const char*> servers;
  for (const auto& server : o.servers) servers.push_back(server.c_str());
  detail::check(natsOptions_SetServers(raw, servers.data(), static_cast<int>(servers.size())), where, "servers");
  detail::check(natsOptions_SetName(raw, o.name.c_str()), where, "name");
  detail::check(natsOptions_SetTimeout(raw, o.connect_timeout.count()), where, "connect_timeout");
  detail::check(natsOptions_SetMaxReconnect(raw, o.max_reconnects), where, "max_reconnects");
  detail::check(natsOptions_SetReconnectWait(raw, o.reconnect_wait.count()), where, "reconnect_wait");
  detail::check(natsOptions_SetReconnectBufSize(raw, o.reconnect_buffer_bytes), where, "reconnect_buffer_bytes");
  if (!o.user.empty()) detail::check(natsOptions_SetUserInfo(raw, o.user.c_str(), o.password.c_str()), where, "user");
  if (!o.token.empty()) detail::check(natsOptions_SetToken(raw, o.token.c_str()), where, "token");
  if (!o.credentials_file.empty()) {
    detail::check(natsOptions_SetUserCredentialsFromFiles(raw, o.credentials_file.c_str(), nullptr), where,
                  "credentials_file " + o.credentials_file);
  }
  if (!o.nkey_seed_file.empty()) {
    detail::check(natsOptions_SetNKeyFromSeed(raw, nullptr, o.nkey_seed_file.c_str()), where,
                  "nkey_seed_file " + o.nkey_seed_file);
  }
  if (o.tls.enabled || !o.tls.ca_file.empty() || !o.tls.cert_file.empty()) {
    detail::check(natsOptions_SetSecure(raw, true), where, "tls");
    if (!o.tls.ca_file.empty()) {
      detail::check(natsOptions_LoadCATrustedCertificates(raw, o.tls.ca_file.c_str()), where,
                    "tls.ca_file " + o.tls.ca_file);
    }
    if (!o.tls.cert_file.empty()) {
      detail::check(natsOptions_LoadCertificatesChain(raw, o.tls.cert_file.c_str(), o.tls.key_file.c_str()), where,
                    "tls.cert_file " + o.tls.cert_file);
    }
  }
  return nats_options.release();
}

void check_config(const BucketConfig& config) {
  if (config.name.empty()) throw std::invalid_argument("nats::BucketConfig.name: empty");
  if (config.ttl < std::chrono::nanoseconds::zero()) {
    throw std::invalid_argument(fmt::format("nats::BucketConfig.ttl: {} is negative", format_duration(config.ttl)));
  }
  if (config.history < 1 || config.history > 64) {
    throw std::invalid_argument(fmt::format("nats::BucketConfig.history: {} is out of range 1..64", config.history));
  }
  if (config.replicas < 1 || config.replicas > 5) {
    throw std::invalid_argument(fmt::format("nats::BucketConfig.replicas: {} is out of range 1..5", config.replicas));
  }
}

// Binds to `config.name`, creating it if missing; a different existing
// configuration is an error that names both (and sets `mismatch`).
kvStore* create_or_explain(jsCtx* js, const BucketConfig& config, const std::string& where, bool& mismatch) {
  kvStore* kv = nullptr;
  const natsStatus status = create_key_value(&kv, js, config);
  if (status == NATS_OK) return kv;
  // The create's own reason, before the calls below replace nats.c's
  // thread-local error text.
  const std::string failure = detail::describe_status(status, where + ": bucket " + config.name);
  if (status != NATS_ERR) throw_backend_error(detail::kind_of(status), failure, static_cast<int>(status));
  // Most likely "existing configuration is different": say how.
  kvStore* existing = nullptr;
  kvStatus* st = nullptr;
  if (js_KeyValue(&existing, js, config.name.c_str()) != NATS_OK || kvStore_Status(&st, existing) != NATS_OK) {
    kvStore_Destroy(existing);
    throw_backend_error(detail::kind_of(status), failure, static_cast<int>(status));
  }
  const auto ttl = std::chrono::nanoseconds{kvStatus_TTL(st)};
  const auto history = kvStatus_History(st);
  const auto replicas = kvStatus_Replicas(st);
  kvStatus_Destroy(st);
  kvStore_Destroy(existing);
  const bool differs = ttl != config.ttl || history != config.history || replicas != config.replicas;
  if (!differs) throw_backend_error(detail::kind_of(status), failure, static_cast<int>(status));
  mismatch = true;
  throw ProtocolError(fmt::format("{}: bucket {} exists with TTL {}, history {}, replicas {}; wanted TTL {}, history {}, "
                                  "replicas {}, {} storage ({})",
                                  where, config.name, format_duration(ttl), history, replicas, format_duration(config.ttl),
                                  config.history, config.replicas, config.storage == Storage::memory ? "memory" : "file",
                                  failure),
                      static_cast<int>(status));
}

}  // namespace

Connection::Connection(ConnectionOptions options) : impl_(std::make_unique<Impl>()) {
  impl_->options = std::move(options);
  impl_->description = nats::describe(impl_->options);
  impl_->library = open_library();
}

std::shared_ptr<Connection> Connection::connect(ConnectionOptions options) {
  validate(options);
  std::shared_ptr<Connection> connection(new Connection(std::move(options)));
  Impl& impl = *connection->impl_;
  impl.nats_options = make_options(impl.options, impl.description);  // files are read, and refused, here
  return connection;
}

Connection::Impl::Attempt Connection::Impl::connect_once() const {
  Attempt attempt;
  natsConnection* connected = nullptr;
  natsStatus status = natsConnection_Connect(&connected, nats_options);
  if (status == NATS_OK) {
    jsOptions js_options;
    jsOptions_Init(&js_options);
    js_options.Wait = options.request_timeout.count();
    status = natsConnection_JetStream(&attempt.js, connected, &js_options);
    if (status == NATS_OK) {
      attempt.nc = connected;
      return attempt;
    }
  }
  attempt.js = nullptr;
  // Made before any other nats.c call: the thread's error text is this attempt's.
  try {
    detail::raise(status == NATS_OK ? NATS_ERR : status, description + ": connect");
  } catch (const BackendError& e) {
    attempt.kind = e.kind();
    attempt.error = e.what();
    attempt.failure = std::current_exception();
  }
  if (connected != nullptr) natsConnection_Destroy(connected);
  return attempt;
}

jsCtx* Connection::Impl::ready() {
  std::unique_lock lock(mutex);
  // One connect at a time, never under the mutex: a call that finds one
  // under way waits for its end (bounded by connect_timeout per server).
  connect_done.wait(lock, [&] { return !connecting; });
  if (closed.load()) throw ClosedError(description + ": closed");
  if (js != nullptr) return js;  // nats.c reconnects by itself from here on
  const auto now = std::chrono::steady_clock::now();
  if (now < next_attempt) {
    throw_backend_error(last_kind, fmt::format("{} (next attempt in {})", last_error,
                                               format_duration(std::chrono::ceil<std::chrono::milliseconds>(next_attempt - now))));
  }
  connecting = true;
  lock.unlock();
  Attempt attempt;
  try {
    attempt = connect_once();
  } catch (...) {  // never left marked as connecting: every later call would wait for ever
    lock.lock();
    connecting = false;
    connect_done.notify_all();
    throw;
  }
  lock.lock();
  connecting = false;
  connect_done.notify_all();
  if (attempt.js != nullptr) {
    js = attempt.js;
    nc.store(attempt.nc);
    backoff = std::chrono::milliseconds{0};
    if (closed.load()) natsConnection_Close(attempt.nc);  // close() came during the connect
    return js;
  }
  // Later calls fail at once until the next attempt, backing off from
  // reconnect_wait, doubling, to at most max_connect_backoff, counted from
  // the end of this attempt (which may itself take connect_timeout).
  backoff = backoff.count() == 0 ? std::min(options.reconnect_wait, max_connect_backoff)
                                 : std::min(2 * backoff, max_connect_backoff);
  next_attempt = std::chrono::steady_clock::now() + backoff;
  last_kind = attempt.kind;
  last_error = attempt.error;
  std::rethrow_exception(attempt.failure);
}

Connection::~Connection() { impl_.reset(); nats_ReleaseThreadMemory(); }

const ConnectionOptions& Connection::options() const noexcept { return impl_->options; }
std::string Connection::describe() const { return impl_->description; }

bool Connection::connected() const noexcept {
  natsConnection* nc = impl_->nc.load();
  return nc != nullptr && natsConnection_Status(nc) == NATS_CONN_STATUS_CONNECTED;
}

void Connection::ping() {
  (void)impl_->ready();
  detail::check(natsConnection_FlushTimeout(impl_->nc.load(), impl_->options.request_timeout.count()),
                impl_->description, "ping");
}

void Connection::close() {
  impl_->closed.store(true);
  if (natsConnection* nc = impl_->nc.load()) natsConnection_Close(nc);
}

std::shared_ptr<Bucket> Connection::bucket(const std::string& name) {
  auto impl = std::make_unique<Bucket::Impl>();
  impl->connection = shared_from_this();
  impl->name = name;
  std::shared_ptr<Bucket> bucket(new Bucket(std::move(impl)));
  bind_now(*bucket->impl_, true);
  return bucket;
}

std::shared_ptr<Bucket> Connection::bucket(const BucketConfig& config) {
  check_config(config);
  auto impl = std::make_unique<Bucket::Impl>();
  impl->connection = shared_from_this();
  impl->name = config.name;
  impl->config = config;
  std::shared_ptr<Bucket> bucket(new Bucket(std::move(impl)));
  bind_now(*bucket->impl_, false);
  return bucket;
}

void Connection::delete_bucket(const std::string& name) {
  detail::check(js_DeleteKeyValue(impl_->ready(), name.c_str()), impl_->description, "deleting bucket " + name);
}

void Connection::bind_now(Bucket::Impl& bucket, bool must_exist) {
  // A bucket configured otherwise (or, by name, missing) is refused here;
  // anything a retry may cure (no server yet, JetStream not up, a cluster
  // electing its leader) is left to the first use.
  try {
    (void)bucket.bound();
  } catch (const BackendError& e) {
    std::lock_guard guard(bucket.mutex);
    if (bucket.mismatch || (must_exist && e.code() == NATS_NOT_FOUND)) throw;
  }
}

// ---- Bucket

kvStore* Bucket::Impl::bound() {
  std::lock_guard guard(mutex);
  if (kv != nullptr) return kv;
  if (config) {
    kv = create_or_explain(js(), *config, where(), mismatch);
  } else {
    detail::check(js_KeyValue(&kv, js(), name.c_str()), where(), "bucket " + name);
  }
  return kv;
}

Bucket::Bucket(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Bucket::~Bucket() = default;

const std::string& Bucket::name() const noexcept { return impl_->name; }

std::chrono::nanoseconds Bucket::ttl() {
  if (impl_->config) return impl_->config->ttl;
  kvStatus* st = nullptr;
  detail::check(kvStore_Status(&st, impl_->bound()), impl_->where(), "status of bucket " + impl_->name);
  const auto ttl = std::chrono::nanoseconds{kvStatus_TTL(st)};
  kvStatus_Destroy(st);
  return ttl;
}

int Bucket::replicas() {
  if (impl_->config) return impl_->config->replicas;
  kvStatus* st = nullptr;
  detail::check(kvStore_Status(&st, impl_->bound()), impl_->where(), "status of bucket " + impl_->name);
  const int replicas = static_cast<int>(kvStatus_Replicas(st));
  kvStatus_Destroy(st);
  return replicas;
}

std::optional<std::uint64_t> Bucket::create(std::string_view key, std::string_view value) {
  uint64_t revision = 0;
  const std::string k = key_string(key);
  const natsStatus status =
      kvStore_Create(&revision, impl_->bound(), k.c_str(), value.data(), static_cast<int>(value.size()));
  if (status == NATS_OK) return revision;
  if (detail::is_wrong_last_sequence(status)) return std::nullopt;
  // nats.c 3.4 answers NATS_ERR with no text both when the key was taken
  // (and expired between its write attempt and its read-back) and when
  // JetStream refused the write (store full, account limits). "Taken" only
  // if a live value is there; otherwise it is an error, never a silent
  // already-claimed on every replica.
  if (status == NATS_ERR && detail::last_error_text().empty()) {
    // nats.c's own read-back is a direct get: in a cluster a follower may
    // not have applied the write that won yet; get() asks the leader.
    bool holds = false;
    try {
      holds = get(k).has_value();
    } catch (const BackendError&) {
      // unanswered: not taken as far as anyone can tell
    }
    if (holds) return std::nullopt;
    throw ProtocolError(fmt::format("{}: create {}/{}: the server refused the write without a reason and the key holds "
                                    "no value (JetStream store full or over its account limits?)",
                                    impl_->where(), impl_->name, k),
                        NATS_ERR);
  }
  detail::raise(status, fmt::format("{}: create {}/{}", impl_->where(), impl_->name, k));
}

std::optional<std::uint64_t> Bucket::update(std::string_view key, std::string_view value, std::uint64_t last) {
  // nats.c takes an expected revision of 0 as none (an unconditional put):
  // "absent" is a create.
  if (last == 0) return create(key, value);
  uint64_t revision = 0;
  const std::string k = key_string(key);
  const natsStatus status = kvStore_Update(&revision, impl_->bound(), k.c_str(), value.data(),
                                           static_cast<int>(value.size()), last);
  if (status == NATS_OK) return revision;
  if (detail::is_wrong_last_sequence(status)) return std::nullopt;
  detail::raise(status, fmt::format("{}: update {}/{}", impl_->where(), impl_->name, k));
}

std::uint64_t Bucket::put(std::string_view key, std::string_view value) {
  uint64_t revision = 0;
  const std::string k = key_string(key);
  detail::check(kvStore_Put(&revision, impl_->bound(), k.c_str(), value.data(), static_cast<int>(value.size())),
                impl_->where(), "put " + impl_->name + "/" + k);
  return revision;
}

std::optional<Entry> Bucket::Impl::direct_get(const std::string& key) {
  kvEntry* raw = nullptr;
  const natsStatus status = kvStore_Get(&raw, bound(), key.c_str());
  EntryPtr entry(raw);  // owned whatever the status: a delete marker's entry may come back with NOT_FOUND
  if (status == NATS_NOT_FOUND) return std::nullopt;
  detail::check(status, where(), "get " + name + "/" + key);
  return to_entry(raw);
}

std::optional<Entry> Bucket::get(std::string_view key) {
  const std::string k = key_string(key);
  // nats.c writes the subject into the request's JSON unescaped: a key
  // with a backslash is read by its own get (a direct get) instead.
  if (k.find('\\') != std::string::npos) return impl_->direct_get(k);
  (void)impl_->bound();  // binding creates the bucket on first use
  // Asked of the stream's leader (STREAM.MSG.GET), not by nats.c's direct
  // get: any replica answers that, and a follower may not have applied a
  // write the leader acknowledged a moment ago (a ledger read right after
  // a run's record was written missed it; NatsCluster tests).
  const std::string stream = "KV_" + impl_->name;
  const std::string subject = "$KV." + impl_->name + "." + k;
  natsMsg* raw = nullptr;
  jsErrCode code = static_cast<jsErrCode>(0);
  const natsStatus status = js_GetLastMsg(&raw, impl_->js(), stream.c_str(), subject.c_str(), nullptr, &code);
  std::unique_ptr<natsMsg, void (*)(natsMsg*)> msg(raw, natsMsg_Destroy);  // owned whatever the status
  const std::string what = impl_->where() + ": get " + impl_->name + "/" + k;
  if (code == JSNoMessageFoundErr) return std::nullopt;
  if (code == JSStreamNotFoundErr) detail::raise_missing(what + ": its stream " + stream + " does not exist");
  if (status != NATS_OK) detail::raise(status, what);
  const char* operation = nullptr;  // a delete or purge marker: no value
  if (natsMsgHeader_Get(raw, "KV-Operation", &operation) == NATS_OK && operation != nullptr) return std::nullopt;
  Entry entry;
  entry.key = k;
  if (const char* data = natsMsg_GetData(raw); data != nullptr) {
    entry.value.assign(data, static_cast<std::size_t>(natsMsg_GetDataLength(raw)));
  }
  entry.revision = natsMsg_GetSequence(raw);
  return entry;
}

void Bucket::remove(std::string_view key) {
  const std::string k = key_string(key);
  detail::check(kvStore_Delete(impl_->bound(), k.c_str()), impl_->where(),
                "delete " + impl_->name + "/" + k);
}

bool Bucket::remove_if(std::string_view key, std::uint64_t last, bool resignation) {
  // A delete marker is a message with the header KV-Operation: DEL; the
  // expected last subject sequence makes it conditional.
  const std::string subject = "$KV." + impl_->name + "." + key_string(key);
  natsMsg* raw = nullptr;
  detail::check(natsMsg_Create(&raw, subject.c_str(), nullptr, nullptr, 0), impl_->where(), "delete " + subject);
  std::unique_ptr<natsMsg, void (*)(natsMsg*)> msg(raw, natsMsg_Destroy);
  detail::check(natsMsgHeader_Set(raw, "KV-Operation", "DEL"), impl_->where(), "delete " + subject);
  if (resignation) {
    detail::check(natsMsgHeader_Set(raw, resigned_header, "true"), impl_->where(), "delete " + subject);
  }
  jsPubOptions options;
  jsPubOptions_Init(&options);
  options.ExpectLastSubjectSeq = last;
  jsPubAck* ack = nullptr;
  jsErrCode code = static_cast<jsErrCode>(0);
  const natsStatus status = js_PublishMsg(&ack, impl_->js(), raw, &options, &code);
  jsPubAck_Destroy(ack);
  if (status == NATS_OK) return true;
  if (code == JSStreamWrongLastSequenceErr || detail::is_wrong_last_sequence(status)) return false;
  detail::raise(status, fmt::format("{}: delete {}/{} at revision {}", impl_->where(), impl_->name, key, last));
}

bool Bucket::is_resignation(std::uint64_t revision) {
  const std::string stream = "KV_" + impl_->name;
  natsMsg* raw = nullptr;
  jsErrCode code = static_cast<jsErrCode>(0);
  if (js_GetMsg(&raw, impl_->js(), stream.c_str(), revision, nullptr, &code) != NATS_OK) {
    natsMsg_Destroy(raw);
    return false;
  }
  std::unique_ptr<natsMsg, void (*)(natsMsg*)> msg(raw, natsMsg_Destroy);
  const char* value = nullptr;
  return natsMsgHeader_Get(raw, resigned_header, &value) == NATS_OK && value != nullptr && std::string_view(value) == "true";
}

namespace {

/// Where create_many's acknowledgments go. nats.c calls the handler on
/// its own thread and may do so after the batch gave up waiting (even
/// after its context is destroyed), so the handler finds its batch through
/// this registry, which lives as long as the process: an acknowledgment
/// whose batch is over finds nothing and is dropped.
struct CreateAcks {
  struct Slot {
    std::shared_ptr<std::vector<CreateResult>> results;
    std::size_t index;
  };
  std::mutex mutex;
  std::unordered_map<const natsMsg*, Slot> pending;  // messages nats.c owns, not yet acknowledged

  static CreateAcks& instance() {
    static auto* acks = new CreateAcks;  // never destroyed: handlers may outlive static destruction
    return *acks;
  }
};

CreateResult to_create_result(const jsPubAck* ack, const jsPubAckErr* error) {
  if (ack != nullptr) return {CreateResult::Status::created, ack->Sequence, {}};
  if (error != nullptr && error->ErrCode == JSStreamWrongLastSequenceErr) return {CreateResult::Status::taken, 0, {}};
  if (error != nullptr && error->Err == NATS_NO_RESPONDERS) return {CreateResult::Status::missing, 0, "no stream answered"};
  return {CreateResult::Status::failed, 0,
          error == nullptr ? "no acknowledgment"
          : error->ErrText != nullptr && *error->ErrText != '\0' ? error->ErrText
                                                                 : natsStatus_GetText(error->Err)};
}

void on_create_ack(jsCtx*, natsMsg* msg, jsPubAck* ack, jsPubAckErr* error, void*) {
  {
    CreateAcks& acks = CreateAcks::instance();
    std::lock_guard guard(acks.mutex);
    if (const auto it = acks.pending.find(msg); it != acks.pending.end()) {
      (*it->second.results)[it->second.index] = to_create_result(ack, error);
      acks.pending.erase(it);
    }
  }
  natsMsg_Destroy(msg);
}

}  // namespace

std::vector<CreateResult> Bucket::create_many(std::span<const std::string> keys, std::string_view value) {
  if (keys.empty()) return {};
  (void)impl_->bound();  // the bucket exists (created from its configuration if need be)
  (void)impl_->js();     // connected, or the connect error
  const std::string unanswered = "no acknowledgment within the request timeout (it may have been written)";
  auto results = std::make_shared<std::vector<CreateResult>>(keys.size(), CreateResult{CreateResult::Status::failed, 0, unanswered});
  jsOptions options;
  jsOptions_Init(&options);
  options.Wait = impl_->connection->impl_->options.request_timeout.count();
  options.PublishAsync.MaxPending = static_cast<int64_t>(keys.size());
  options.PublishAsync.AckHandler = on_create_ack;
  jsCtx* raw_js = nullptr;
  detail::check(natsConnection_JetStream(&raw_js, impl_->connection->impl_->nc.load(), &options), impl_->where(),
                "create in " + impl_->name);
  const std::unique_ptr<jsCtx, void (*)(jsCtx*)> js(raw_js, jsCtx_Destroy);
  CreateAcks& acks = CreateAcks::instance();
  std::vector<const natsMsg*> sent(keys.size(), nullptr);
  for (std::size_t i = 0; i < keys.size(); ++i) {
    const std::string subject = "$KV." + impl_->name + "." + key_string(keys[i]);
    natsMsg* msg = nullptr;
    natsStatus status = natsMsg_Create(&msg, subject.c_str(), nullptr, value.data(), static_cast<int>(value.size()));
    if (status == NATS_OK) status = natsMsgHeader_Set(msg, "Nats-Expected-Last-Subject-Sequence", "0");
    if (status == NATS_OK) {
      {
        std::lock_guard guard(acks.mutex);
        acks.pending[msg] = {results, i};  // before publishing: the ack may come at once
      }
      sent[i] = msg;
      status = js_PublishMsgAsync(js.get(), &msg, nullptr);
    }
    if (status != NATS_OK) {
      std::lock_guard guard(acks.mutex);
      if (sent[i] != nullptr) acks.pending.erase(sent[i]);  // not published: still ours
      sent[i] = nullptr;
      (*results)[i] = {CreateResult::Status::failed, 0, natsStatus_GetText(status)};
    }
    natsMsg_Destroy(msg);  // null once nats.c owns it
  }
  jsPubOptions wait;
  jsPubOptions_Init(&wait);
  wait.MaxWait = options.Wait;
  (void)js_PublishAsyncComplete(js.get(), &wait);
  // Unanswered ones come back to us; an acknowledgment after this finds no slot.
  natsMsgList pending{};
  std::vector<CreateResult> out;
  {
    std::lock_guard guard(acks.mutex);
    for (const natsMsg* msg : sent) {
      // Only ours: an acknowledged message's address may be another batch's by now.
      const auto it = msg != nullptr ? acks.pending.find(msg) : acks.pending.end();
      if (it != acks.pending.end() && it->second.results == results) acks.pending.erase(it);
    }
    out = *results;
  }
  if (js_PublishAsyncGetPendingList(&pending, js.get()) == NATS_OK) natsMsgList_Destroy(&pending);
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (out[i].status == CreateResult::Status::failed) {
      out[i].error = fmt::format("{}: create {}/{}: {}", impl_->where(), impl_->name, key_string(keys[i]), out[i].error);
    }
  }
  return out;
}

namespace {

using ServerTime = std::chrono::sys_time<std::chrono::nanoseconds>;

/// One round of pipelined direct gets for the revisions whose time is not
/// known yet, on `sub` (replies to inbox.<index>), until `deadline`.
void direct_get_round(natsConnection* nc, natsSubscription* sub, const std::string& inbox, const std::string& subject,
                      std::span<const std::uint64_t> revisions, std::vector<std::optional<ServerTime>>& times,
                      std::chrono::steady_clock::time_point deadline) {
  std::size_t asked = 0;
  for (std::size_t i = 0; i < revisions.size(); ++i) {
    if (times[i]) continue;
    const std::string reply = fmt::format("{}.{}", inbox, i);
    const std::string body = fmt::format("{{\"seq\":{}}}", revisions[i]);
    if (natsConnection_PublishRequestString(nc, subject.c_str(), reply.c_str(), body.c_str()) == NATS_OK) ++asked;
  }
  for (std::size_t got = 0; got < asked; ++got) {
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    natsMsg* raw = nullptr;
    if (left.count() <= 0 || natsSubscription_NextMsg(&raw, sub, left.count()) != NATS_OK) return;
    const std::unique_ptr<natsMsg, void (*)(natsMsg*)> msg(raw, natsMsg_Destroy);
    const std::string_view reply = natsMsg_GetSubject(raw);
    std::size_t i = 0;
    const auto [end, error] = std::from_chars(reply.data() + reply.rfind('.') + 1, reply.data() + reply.size(), i);
    const char* stamp = nullptr;
    const char* sequence = nullptr;
    // A reply without the headers (404 from a replica that has not applied
    // the write yet, 503) leaves the time unknown for the next round.
    if (error != std::errc{} || i >= times.size() || times[i] ||
        natsMsgHeader_Get(raw, "Nats-Sequence", &sequence) != NATS_OK || std::to_string(revisions[i]) != sequence ||
        natsMsgHeader_Get(raw, "Nats-Time-Stamp", &stamp) != NATS_OK) {
      continue;
    }
    try {
      times[i] = ServerTime{parse_rfc3339(stamp).time_since_epoch()};
    } catch (const std::exception&) {
      // unparsable: asked again
    }
  }
}

}  // namespace

std::vector<std::optional<ServerTime>> Bucket::written_times(std::span<const std::uint64_t> revisions) {
  std::vector<std::optional<ServerTime>> times(revisions.size());
  if (revisions.empty()) return times;
  (void)impl_->js();  // connected, or the connect error
  natsConnection* nc = impl_->connection->impl_->nc.load();
  const auto timeout = impl_->connection->impl_->options.request_timeout;
  const auto deadline = std::chrono::steady_clock::now() + timeout;  // one bound for the whole call
  natsInbox* raw_inbox = nullptr;
  detail::check(natsInbox_Create(&raw_inbox), impl_->where(), "an inbox");
  const std::unique_ptr<char, void (*)(natsInbox*)> inbox(raw_inbox, natsInbox_Destroy);
  natsSubscription* raw_sub = nullptr;
  detail::check(natsConnection_SubscribeSync(&raw_sub, nc, (std::string(inbox.get()) + ".*").c_str()), impl_->where(),
                "subscribing to direct gets");
  const std::unique_ptr<natsSubscription, void (*)(natsSubscription*)> sub(raw_sub, natsSubscription_Destroy);
  (void)natsSubscription_SetPendingLimits(sub.get(), -1, -1);
  const std::string subject = "$JS.API.DIRECT.GET.KV_" + impl_->name;
  // A cluster's followers answer direct gets too and may not have applied
  // a write just acknowledged: ask again (for half the time) what they
  // could not answer, then the stream's leader, one by one, in what is left.
  const auto direct_until = std::chrono::steady_clock::now() + timeout / 2;
  for (int round = 0; round < 8 && std::chrono::steady_clock::now() < direct_until; ++round) {
    direct_get_round(nc, sub.get(), inbox.get(), subject, revisions, times, direct_until);
    if (std::all_of(times.begin(), times.end(), [](const auto& t) { return t.has_value(); })) return times;
  }
  const std::string stream = "KV_" + impl_->name;
  for (std::size_t i = 0; i < times.size(); ++i) {
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;  // the rest stay unknown: those claims fail closed
    if (times[i]) continue;
    jsOptions options;
    jsOptions_Init(&options);
    options.Wait = left.count();
    natsMsg* raw = nullptr;
    jsErrCode code = static_cast<jsErrCode>(0);
    const natsStatus status = js_GetMsg(&raw, impl_->js(), stream.c_str(), revisions[i], &options, &code);
    const std::unique_ptr<natsMsg, void (*)(natsMsg*)> msg(raw, natsMsg_Destroy);
    if (status == NATS_OK) times[i] = server_time(natsMsg_GetTime(raw));
  }
  return times;
}

WriteTimes Bucket::stream_times() {
  const std::string stream = "KV_" + impl_->name;
  jsStreamInfo* info = nullptr;
  jsErrCode code = static_cast<jsErrCode>(0);
  const natsStatus status = js_GetStreamInfo(&info, impl_->js(), stream.c_str(), nullptr, &code);
  std::unique_ptr<jsStreamInfo, void (*)(jsStreamInfo*)> owned(info, jsStreamInfo_Destroy);
  detail::check(status, impl_->where(), "stream info " + stream);
  return {server_time(info->State.LastTime), server_time(info->Created)};
}

WriteTimes Bucket::write_times(std::uint64_t revision) {
  const std::string stream = "KV_" + impl_->name;
  auto* js = impl_->js();
  jsStreamInfo* info = nullptr;
  jsErrCode code = static_cast<jsErrCode>(0);
  const natsStatus info_status = js_GetStreamInfo(&info, js, stream.c_str(), nullptr, &code);
  std::unique_ptr<jsStreamInfo, void (*)(jsStreamInfo*)> owned(info, jsStreamInfo_Destroy);  // owned before any throw
  detail::check(info_status, impl_->where(), "stream info " + stream);
  WriteTimes times{server_time(info->State.LastTime), server_time(info->Created)};
  if (info->State.LastSeq == revision) return times;
  natsMsg* raw = nullptr;
  const natsStatus status = js_GetMsg(&raw, js, stream.c_str(), revision, nullptr, &code);
  std::unique_ptr<natsMsg, void (*)(natsMsg*)> msg(raw, natsMsg_Destroy);
  detail::check(status, impl_->where(), fmt::format("message {} of {}", revision, stream));
  times.written = server_time(natsMsg_GetTime(raw));
  return times;
}

void Bucket::recreate() {
  if (!impl_->config) {
    throw ProtocolError(fmt::format("{}: bucket {} is missing and was bound by name: no configuration to create it "
                                    "again with", impl_->where(), impl_->name),
                        NATS_ILLEGAL_STATE);
  }
  {
    std::lock_guard guard(impl_->mutex);
    if (impl_->kv != nullptr) {
      kvStore* kv = nullptr;
      detail::check(create_key_value(&kv, impl_->js(), *impl_->config), impl_->where(), "recreating bucket " + impl_->name);
      kvStore_Destroy(kv);  // the handle this Bucket holds names the same subjects
      return;
    }
  }
  (void)impl_->bound();  // never bound yet: binding creates it
}

std::unique_ptr<Watcher> Bucket::watch(std::string_view key) {
  kvWatchOptions options;
  kvWatchOptions_Init(&options);
  auto watcher = std::make_unique<Watcher::Impl>();
  watcher->connection = impl_->connection;
  const std::string k = key_string(key);
  detail::check(kvStore_Watch(&watcher->watcher, impl_->bound(), k.c_str(), &options), impl_->where(),
                "watch " + impl_->name + "/" + k);
  return std::unique_ptr<Watcher>(new Watcher(std::move(watcher)));
}

// ---- Watcher

Watcher::Watcher(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Watcher::~Watcher() = default;

void Watcher::stop() { (void)kvWatcher_Stop(impl_->watcher); }

std::optional<Entry> Watcher::next(std::chrono::milliseconds timeout) {
  kvEntry* raw = nullptr;
  const natsStatus status = kvWatcher_Next(&raw, impl_->watcher, timeout.count());
  EntryPtr entry(raw);  // owned whatever the status: a stopped watcher may still hand one back
  if (status == NATS_TIMEOUT || status == NATS_ILLEGAL_STATE) return std::nullopt;  // nothing new, or stopped
  detail::check(status, impl_->connection->impl_->description, "watching");
  if (raw == nullptr) return std::nullopt;  // the end of the initial values
  return to_entry(raw);
}

}  // namespace fleetcron::nats
