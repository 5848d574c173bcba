#include "redis/tls_context.h"

#include <fmt/format.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

#include <stdexcept>

#include <sys/stat.h>
#include <unistd.h>

namespace fleetcron::redis::detail {

std::string take_openssl_errors() {
  std::string out;
  while (const unsigned long code = ERR_get_error()) {
    char text[256];
    ERR_error_string_n(code, text, sizeof text);
    if (!out.empty()) out += "; ";
    out += text;
  }
  return out;
}

namespace {

[[noreturn]] void refuse(std::string_view option, const std::string& file, std::string_view what) {
  const std::string reason = take_openssl_errors();
  throw std::invalid_argument(fmt::format("redis::ClientOptions.{} {}: {}{}", option, file, what,
                                          reason.empty() ? "" : " (" + reason + ")"));
}

}  // namespace

void TlsContext::Free::operator()(ssl_ctx_st* context) const noexcept { SSL_CTX_free(context); }

TlsContext::TlsContext(const ClientOptions& options) {
  ERR_clear_error();
  context_.reset(SSL_CTX_new(TLS_client_method()));
  if (!context_) throw std::runtime_error("redis TLS: SSL_CTX_new failed: " + take_openssl_errors());
  SSL_CTX* context = context_.get();
  SSL_CTX_set_min_proto_version(context, TLS1_2_VERSION);
  SSL_CTX_set_mode(context, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  if (!options.tls_ca_dir.empty()) {
    // OpenSSL only notes a directory, and reads it at each verification:
    // a missing one would be found at the first handshake, as a refusal.
    struct stat info {};
    if (::stat(options.tls_ca_dir.c_str(), &info) != 0 || !S_ISDIR(info.st_mode) ||
        ::access(options.tls_ca_dir.c_str(), R_OK | X_OK) != 0) {
      throw std::invalid_argument(fmt::format("redis::ClientOptions.tls_ca_dir {}: not a readable directory",
                                              options.tls_ca_dir));
    }
  }
  if (!options.tls_ca_file.empty() || !options.tls_ca_dir.empty()) {
    const char* file = options.tls_ca_file.empty() ? nullptr : options.tls_ca_file.c_str();
    const char* dir = options.tls_ca_dir.empty() ? nullptr : options.tls_ca_dir.c_str();
    if (SSL_CTX_load_verify_locations(context, file, dir) != 1) {
      refuse(file != nullptr ? "tls_ca_file" : "tls_ca_dir", file != nullptr ? options.tls_ca_file : options.tls_ca_dir,
             "cannot load the CAs");  // the directory was checked above: a failure here is the file's
    }
  } else if (SSL_CTX_set_default_verify_paths(context) != 1) {
    refuse("tls_ca_file", "(the system's default store)", "cannot load");
  }
  if (!options.tls_cert_file.empty()) {
    if (SSL_CTX_use_certificate_chain_file(context, options.tls_cert_file.c_str()) != 1) {
      refuse("tls_cert_file", options.tls_cert_file, "cannot load the certificate");
    }
    if (SSL_CTX_use_PrivateKey_file(context, options.tls_key_file.c_str(), SSL_FILETYPE_PEM) != 1 ||
        SSL_CTX_check_private_key(context) != 1) {
      refuse("tls_key_file", options.tls_key_file, "cannot load the private key");  // also: not tls_cert_file's
    }
  }
  SSL_CTX_set_verify(context, options.tls_verify ? SSL_VERIFY_PEER : SSL_VERIFY_NONE, nullptr);
}

TlsContext::~TlsContext() = default;

}  // namespace fleetcron::redis::detail
