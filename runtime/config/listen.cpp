#include "config/listen.hpp"

#include <arpa/inet.h>

namespace sqlstreams::config {

std::optional<ListenAddress> parse_listen(std::string_view text, std::string* error) {
  auto fail = [&](std::string why) -> std::optional<ListenAddress> {
    *error = std::move(why);
    return std::nullopt;
  };
  if (text.find_first_of(", \t") != std::string_view::npos) {
    return fail("must be exactly one address (host:port), not a list");
  }
  const size_t colon = text.rfind(':');
  if (colon == std::string_view::npos || colon == 0) {
    return fail("must be host:port with a port 1..65535, or \"\" to disable the server");
  }
  const std::string_view port_text = text.substr(colon + 1);
  int port = 0;
  bool port_ok = !port_text.empty() && port_text.size() <= 5;
  for (char c : port_text) {
    port_ok = port_ok && c >= '0' && c <= '9';
    if (port_ok) port = port * 10 + (c - '0');
  }
  if (!port_ok || port < 1 || port > 65535) {
    return fail("must be host:port with a port 1..65535, or \"\" to disable the server");
  }
  ListenAddress out;
  out.port = port;
  std::string_view host = text.substr(0, colon);
  if (host.front() == '[') {
    if (host.size() < 3 || host.back() != ']')
      return fail("an IPv6 address goes in brackets: [::1]:9187");
    out.host = std::string(host.substr(1, host.size() - 2));
    in6_addr a6{};
    if (inet_pton(AF_INET6, out.host.c_str(), &a6) != 1) {
      return fail("\"" + out.host + "\" is not an IPv6 address");
    }
    out.loopback = IN6_IS_ADDR_LOOPBACK(&a6);
    return out;
  }
  out.host = std::string(host);
  if (out.host == "localhost") {
    out.loopback = true;
    return out;
  }
  if (out.host == "*") return out;
  in_addr a4{};
  if (inet_pton(AF_INET, out.host.c_str(), &a4) != 1) {
    return fail("\"" + out.host +
                "\" is not an IP address: use a numeric address (127.0.0.1, [::1], 0.0.0.0), "
                "localhost or *, not a host name");
  }
  out.loopback = (ntohl(a4.s_addr) >> 24) == 127;
  return out;
}

}  // namespace sqlstreams::config
