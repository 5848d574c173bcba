// One HTTP(S) POST, for webhooks and pings (implemented in http_server.cpp,
// the one translation unit that includes cpp-httplib). https:// verifies
// the server's certificate against the system's CA bundle.
#pragma once

#include <chrono>
#include <string>
#include <string_view>

namespace fleetcron::daemon {

struct HttpPostResult {
  bool delivered = false;  // a 2xx answer
  int status = 0;          // 0: no answer
  std::string error;       // why not delivered
};

/// Never throws. `timeout` bounds the connection and each read and write.
[[nodiscard]] HttpPostResult http_post(const std::string& url, std::string_view body, std::string_view content_type,
                                       std::chrono::milliseconds timeout);

}  // namespace fleetcron::daemon
