#include "daemon/observe/url_redaction.h"

namespace fleetcron::daemon {

std::string redact_url(std::string_view url) {
  const auto scheme_end = url.find("://");
  if (scheme_end == std::string_view::npos || scheme_end == 0) return "(not a URL)";
  std::string_view rest = url.substr(scheme_end + 3);
  const auto authority_end = rest.find_first_of("/?#");
  std::string_view authority = rest.substr(0, authority_end);
  if (const auto at = authority.rfind('@'); at != std::string_view::npos) authority.remove_prefix(at + 1);
  std::string out(url.substr(0, scheme_end + 3));
  out.append(authority);
  if (authority_end != std::string_view::npos && authority_end + 1 < rest.size()) out.append("/…");
  return out;
}

}  // namespace fleetcron::daemon
