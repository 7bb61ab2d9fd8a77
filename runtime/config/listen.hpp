// config/listen — the one grammar of host.http_listen (docs/operating/security.md#logs-and-http):
// exactly ONE address with a port — an IPv4 literal, a bracketed IPv6 literal, `localhost` (the
// IPv4 loopback) or `*` (every address). Lists ("a:1,b:2") and other host names are refused: the
// HTTP server binds numeric addresses only, and a name could resolve to anything. Loopback
// (127.0.0.0/8, [::1], localhost) is the default; anything else also needs
// host.http_allow_remote = true, because the dead-letter view shows message payloads.
// Threading: pure functions.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace sqlstreams::config {

struct ListenAddress {
  std::string host;  // as written, without brackets ("127.0.0.1", "::1", "localhost", "*")
  int port = 0;
  bool loopback = false;
};

// The parsed address, or nullopt with `*error` saying what is wrong.
std::optional<ListenAddress> parse_listen(std::string_view text, std::string* error);

}  // namespace sqlstreams::config
