// Connection, Bucket and Watcher over nats.c.
#include "fleetcron/nats/connection.h"

#include <fmt/format.h>
#include <nats/nats.h>

#include <mutex>

#include "fleetcron/duration.h"
#include "nats/status.h"

namespace fleetcron::nats {

namespace {

constexpr auto min_timeout = std::chrono::milliseconds{1};
constexpr auto max_timeout = std::chrono::hours{1};

// nats.c's library threads, shared by every Connection of the process:
// opened by the first, closed (nats_CloseAndWait) after the last.
std::shared_ptr<void> open_library() {
  static std::mutex mutex;
  static std::weak_ptr<void> current;
  std::lock_guard guard(mutex);
  if (auto library = current.lock()) return library;
  const natsStatus status = nats_Open(-1);
  if (status != NATS_OK) throw detail::error(status, "opening the NATS library");
  std::shared_ptr<void> library(nullptr, [](void*) {
    std::lock_guard close_guard(mutex);
    // From a NATS thread this fails with NATS_ILLEGAL_STATE; nothing to do then.
    (void)nats_CloseAndWait(2000);
  });
  current = library;
  return library;
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

bool Error::timed_out() const noexcept { return status_ == NATS_TIMEOUT; }
bool Error::not_found() const noexcept { return status_ == NATS_NOT_FOUND; }
bool Error::missing() const noexcept { return status_ == NATS_NO_RESPONDERS; }

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

Connection::Connection(ConnectionOptions options)
    : options_(std::move(options)), description_(nats::describe(options_)), library_(open_library()) {}

std::shared_ptr<Connection> Connection::connect(ConnectionOptions options) {
  validate(options);
  std::shared_ptr<Connection> connection(new Connection(std::move(options)));
  const auto& o = connection->options_;
  const std::string& where = connection->description_;
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
  natsConnection* nc = nullptr;
  detail::check(natsConnection_Connect(&nc, raw), where, "connect");
  connection->nc_ = nc;
  jsOptions js_options;
  jsOptions_Init(&js_options);
  js_options.Wait = o.request_timeout.count();
  jsCtx* js = nullptr;
  detail::check(natsConnection_JetStream(&js, nc, &js_options), where, "JetStream");
  connection->js_ = js;
  return connection;
}

Connection::~Connection() {
  if (js_ != nullptr) jsCtx_Destroy(static_cast<jsCtx*>(js_));
  if (nc_ != nullptr) natsConnection_Destroy(static_cast<natsConnection*>(nc_));
  nats_ReleaseThreadMemory();
}

bool Connection::connected() const noexcept {
  return nc_ != nullptr && natsConnection_Status(static_cast<natsConnection*>(nc_)) == NATS_CONN_STATUS_CONNECTED;
}

void Connection::close() {
  if (nc_ != nullptr) natsConnection_Close(static_cast<natsConnection*>(nc_));
}

std::shared_ptr<Bucket> Connection::bucket(const std::string& name) {
  kvStore* kv = nullptr;
  detail::check(js_KeyValue(&kv, static_cast<jsCtx*>(js_), name.c_str()), description_, "bucket " + name);
  return std::shared_ptr<Bucket>(new Bucket(shared_from_this(), kv, name));
}

std::shared_ptr<Bucket> Connection::bucket(const BucketConfig& config) {
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
  kvStore* kv = nullptr;
  const natsStatus status = create_key_value(&kv, js_, config);
  if (status == NATS_OK) {
    std::shared_ptr<Bucket> created(new Bucket(shared_from_this(), kv, config.name));
    created->config_ = config;
    return created;
  }
  const Error failure = detail::error(status, description_ + ": bucket " + config.name);
  if (status != NATS_ERR) throw failure;
  // Most likely "existing configuration is different": say how.
  std::shared_ptr<Bucket> existing;
  try {
    existing = bucket(config.name);
  } catch (const Error&) {
    throw failure;
  }
  kvStatus* st = nullptr;
  if (kvStore_Status(&st, static_cast<kvStore*>(existing->native())) != NATS_OK) throw failure;
  const auto ttl = std::chrono::nanoseconds{kvStatus_TTL(st)};
  const auto history = kvStatus_History(st);
  const auto replicas = kvStatus_Replicas(st);
  kvStatus_Destroy(st);
  throw Error(status, fmt::format("{}: bucket {} exists with TTL {}, history {}, replicas {}; wanted TTL {}, history {}, "
                                  "replicas {}, {} storage ({})",
                                  description_, config.name, format_duration(ttl), history, replicas,
                                  format_duration(config.ttl), config.history, config.replicas,
                                  config.storage == Storage::memory ? "memory" : "file", failure.what()));
}

void Connection::delete_bucket(const std::string& name) {
  detail::check(js_DeleteKeyValue(static_cast<jsCtx*>(js_), name.c_str()), description_, "deleting bucket " + name);
}

// ---- Bucket

Bucket::Bucket(std::shared_ptr<Connection> connection, void* kv, std::string name)
    : connection_(std::move(connection)), kv_(kv), name_(std::move(name)) {}

Bucket::~Bucket() { kvStore_Destroy(static_cast<kvStore*>(kv_)); }

std::chrono::nanoseconds Bucket::ttl() {
  kvStatus* st = nullptr;
  detail::check(kvStore_Status(&st, static_cast<kvStore*>(kv_)), connection_->description_, "status of bucket " + name_);
  const auto ttl = std::chrono::nanoseconds{kvStatus_TTL(st)};
  kvStatus_Destroy(st);
  return ttl;
}

std::optional<std::uint64_t> Bucket::create(std::string_view key, std::string_view value) {
  uint64_t revision = 0;
  const std::string k = key_string(key);
  const natsStatus status =
      kvStore_Create(&revision, static_cast<kvStore*>(kv_), k.c_str(), value.data(), static_cast<int>(value.size()));
  if (status == NATS_OK) return revision;
  if (detail::is_wrong_last_sequence(status)) return std::nullopt;
  // nats.c 3.4 answers NATS_ERR with no text both when the key was taken
  // (and expired between its write attempt and its read-back) and when
  // JetStream refused the write (store full, account limits). "Taken" only
  // if a live value is there; otherwise it is an error, never a silent
  // already-claimed on every replica.
  if (status == NATS_ERR && detail::last_error_text().empty()) {
    const auto existing = get(key);
    if (existing && existing->operation == Entry::Operation::put) return std::nullopt;
    throw Error(NATS_ERR, fmt::format("{}: create {}/{}: the server refused the write without a reason and the key holds no "
                            "value (JetStream store full or over its account limits?)",
                            connection_->description_, name_, k));
  }
  throw detail::error(status, fmt::format("{}: create {}/{}", connection_->description_, name_, k));
}

std::optional<std::uint64_t> Bucket::update(std::string_view key, std::string_view value, std::uint64_t last) {
  uint64_t revision = 0;
  const std::string k = key_string(key);
  const natsStatus status = kvStore_Update(&revision, static_cast<kvStore*>(kv_), k.c_str(), value.data(),
                                           static_cast<int>(value.size()), last);
  if (status == NATS_OK) return revision;
  if (detail::is_wrong_last_sequence(status)) return std::nullopt;
  throw detail::error(status, fmt::format("{}: update {}/{}", connection_->description_, name_, k));
}

std::uint64_t Bucket::put(std::string_view key, std::string_view value) {
  uint64_t revision = 0;
  const std::string k = key_string(key);
  detail::check(kvStore_Put(&revision, static_cast<kvStore*>(kv_), k.c_str(), value.data(), static_cast<int>(value.size())),
                connection_->description_, "put " + name_ + "/" + k);
  return revision;
}

std::optional<Entry> Bucket::get(std::string_view key) {
  kvEntry* raw = nullptr;
  const std::string k = key_string(key);
  const natsStatus status = kvStore_Get(&raw, static_cast<kvStore*>(kv_), k.c_str());
  // Owned whatever the status: for a key whose latest value is a delete
  // marker nats.c answers NOT_FOUND and may still hand back the entry
  // (LeakSanitizer saw it once create() began reading keys back).
  EntryPtr entry(raw);
  if (status == NATS_NOT_FOUND) return std::nullopt;
  detail::check(status, connection_->description_, "get " + name_ + "/" + k);
  return to_entry(raw);
}

void Bucket::remove(std::string_view key) {
  const std::string k = key_string(key);
  detail::check(kvStore_Delete(static_cast<kvStore*>(kv_), k.c_str()), connection_->description_,
                "delete " + name_ + "/" + k);
}

bool Bucket::remove_if(std::string_view key, std::uint64_t last, bool resignation) {
  // A delete marker is a message with the header KV-Operation: DEL; the
  // expected last subject sequence makes it conditional.
  const std::string subject = "$KV." + name_ + "." + key_string(key);
  natsMsg* raw = nullptr;
  detail::check(natsMsg_Create(&raw, subject.c_str(), nullptr, nullptr, 0), connection_->description_, "delete " + subject);
  std::unique_ptr<natsMsg, void (*)(natsMsg*)> msg(raw, natsMsg_Destroy);
  detail::check(natsMsgHeader_Set(raw, "KV-Operation", "DEL"), connection_->description_, "delete " + subject);
  if (resignation) {
    detail::check(natsMsgHeader_Set(raw, resigned_header, "true"), connection_->description_, "delete " + subject);
  }
  jsPubOptions options;
  jsPubOptions_Init(&options);
  options.ExpectLastSubjectSeq = last;
  jsPubAck* ack = nullptr;
  jsErrCode code = static_cast<jsErrCode>(0);
  const natsStatus status = js_PublishMsg(&ack, static_cast<jsCtx*>(connection_->js_), raw, &options, &code);
  jsPubAck_Destroy(ack);
  if (status == NATS_OK) return true;
  if (code == JSStreamWrongLastSequenceErr || detail::is_wrong_last_sequence(status)) return false;
  throw detail::error(status, fmt::format("{}: delete {}/{} at revision {}", connection_->description_, name_, key, last));
}

bool Bucket::is_resignation(std::uint64_t revision) {
  const std::string stream = "KV_" + name_;
  natsMsg* raw = nullptr;
  jsErrCode code = static_cast<jsErrCode>(0);
  if (js_GetMsg(&raw, static_cast<jsCtx*>(connection_->js_), stream.c_str(), revision, nullptr, &code) != NATS_OK) {
    natsMsg_Destroy(raw);
    return false;
  }
  std::unique_ptr<natsMsg, void (*)(natsMsg*)> msg(raw, natsMsg_Destroy);
  const char* value = nullptr;
  return natsMsgHeader_Get(raw, resigned_header, &value) == NATS_OK && value != nullptr && std::string_view(value) == "true";
}

WriteTimes Bucket::write_times(std::uint64_t revision) {
  const std::string stream = "KV_" + name_;
  auto* js = static_cast<jsCtx*>(connection_->js_);
  jsStreamInfo* info = nullptr;
  jsErrCode code = static_cast<jsErrCode>(0);
  detail::check(js_GetStreamInfo(&info, js, stream.c_str(), nullptr, &code), connection_->description_,
                "stream info " + stream);
  std::unique_ptr<jsStreamInfo, void (*)(jsStreamInfo*)> owned(info, jsStreamInfo_Destroy);
  WriteTimes times{server_time(info->State.LastTime), server_time(info->Created)};
  if (info->State.LastSeq == revision) return times;
  natsMsg* raw = nullptr;
  detail::check(js_GetMsg(&raw, js, stream.c_str(), revision, nullptr, &code), connection_->description_,
                fmt::format("message {} of {}", revision, stream));
  std::unique_ptr<natsMsg, void (*)(natsMsg*)> msg(raw, natsMsg_Destroy);
  times.written = server_time(natsMsg_GetTime(raw));
  return times;
}

void Bucket::recreate() {
  if (!config_) {
    throw Error(NATS_ILLEGAL_STATE, fmt::format("{}: bucket {} is missing and was bound by name: no configuration to "
                                                "create it again with", connection_->description_, name_));
  }
  kvStore* kv = nullptr;
  detail::check(create_key_value(&kv, connection_->js_, *config_), connection_->description_, "recreating bucket " + name_);
  kvStore_Destroy(kv);  // the handle this Bucket holds names the same subjects
}

std::unique_ptr<Watcher> Bucket::watch(std::string_view key) {
  kvWatchOptions options;
  kvWatchOptions_Init(&options);
  kvWatcher* watcher = nullptr;
  const std::string k = key_string(key);
  detail::check(kvStore_Watch(&watcher, static_cast<kvStore*>(kv_), k.c_str(), &options), connection_->description_,
                "watch " + name_ + "/" + k);
  return std::unique_ptr<Watcher>(new Watcher(connection_, watcher));
}

// ---- Watcher

Watcher::Watcher(std::shared_ptr<Connection> connection, void* watcher)
    : connection_(std::move(connection)), watcher_(watcher) {}

Watcher::~Watcher() { kvWatcher_Destroy(static_cast<kvWatcher*>(watcher_)); }

void Watcher::stop() { (void)kvWatcher_Stop(static_cast<kvWatcher*>(watcher_)); }

std::optional<Entry> Watcher::next(std::chrono::milliseconds timeout) {
  kvEntry* raw = nullptr;
  const natsStatus status = kvWatcher_Next(&raw, static_cast<kvWatcher*>(watcher_), timeout.count());
  if (status == NATS_TIMEOUT || status == NATS_ILLEGAL_STATE) return std::nullopt;  // nothing new, or stopped
  detail::check(status, connection_->description_, "watching");
  if (raw == nullptr) return std::nullopt;  // the end of the initial values
  EntryPtr entry(raw);
  return to_entry(raw);
}

}  // namespace fleetcron::nats
