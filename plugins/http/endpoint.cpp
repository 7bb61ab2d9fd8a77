#include "endpoint.hpp"

#include <algorithm>
#include <cctype>
#include <stdexcept>

namespace sqlstreams_http {

Endpoint parse_endpoint(std::string_view url) {
  Endpoint e;
  const size_t scheme_end = url.find("://");
  if (scheme_end == std::string_view::npos) throw std::invalid_argument("no scheme in the URL");
  std::string scheme(url.substr(0, scheme_end));
  std::transform(scheme.begin(), scheme.end(), scheme.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (scheme != "http" && scheme != "https") {
    throw std::invalid_argument("the URL's scheme is neither http nor https");
  }
  e.tls = scheme == "https";
  const size_t authority_begin = scheme_end + 3;
  const size_t authority_end = url.find_first_of("/?#", authority_begin);
  const std::string_view authority = url.substr(
      authority_begin, authority_end == std::string_view::npos ? std::string_view::npos
                                                               : authority_end - authority_begin);
  if (authority.empty() || authority.find('@') != std::string_view::npos) {
    throw std::invalid_argument("the URL has no host, or carries user information");
  }
  e.host_header = std::string(authority);
  std::string_view host = authority;
  std::string_view port;
  if (host.front() == '[') {  // [IPv6]:port
    const size_t close = host.find(']');
    if (close == std::string_view::npos) throw std::invalid_argument("an unclosed '[' in the URL");
    const std::string_view rest = host.substr(close + 1);
    if (!rest.empty()) {
      if (rest.front() != ':') throw std::invalid_argument("text after the IPv6 address");
      port = rest.substr(1);
    }
    host = host.substr(1, close - 1);
  } else if (const size_t colon = host.rfind(':'); colon != std::string_view::npos) {
    port = host.substr(colon + 1);
    host = host.substr(0, colon);
  }
  if (host.empty()) throw std::invalid_argument("the URL has no host");
  if (!port.empty()) {
    const bool digits =
        std::all_of(port.begin(), port.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (!digits || port.size() > 5 || std::stoi(std::string(port)) == 0 ||
        std::stoi(std::string(port)) > 65535) {
      throw std::invalid_argument("the URL's port is not 1..65535");
    }
  }
  e.host = std::string(host);
  e.port = port.empty() ? (e.tls ? "443" : "80") : std::string(port);
  if (authority_end != std::string_view::npos) {
    std::string_view target = url.substr(authority_end);
    target = target.substr(0, target.find('#'));
    if (!target.empty())
      e.target = target.front() == '?' ? "/" + std::string(target) : std::string(target);
  }
  return e;
}

void add_header(std::string& lines, std::string_view name, std::string_view value) {
  lines.append(name).append(": ").append(value).append("\r\n");
}

std::string request_target(const Endpoint& endpoint, bool through_proxy) {
  if (!through_proxy) return endpoint.target;
  return (endpoint.tls ? "https://" : "http://") + endpoint.host_header + endpoint.target;
}

std::string request_head(const Endpoint& endpoint, std::string_view target, std::string_view method,
                         std::string header_lines, size_t body_bytes, std::string_view more_lines) {
  // Built inside header_lines' own buffer: the plugin reserves room for the request line and the
  // lines after, so a request's head costs no allocation of its own.
  size_t at = 0;
  auto put = [&](std::string_view piece) {
    header_lines.insert(at, piece.data(), piece.size());
    at += piece.size();
  };
  put(method);
  put(" ");
  put(target);
  put(" HTTP/1.1\r\nHost: ");
  put(endpoint.host_header);
  put("\r\n");
  header_lines.append(more_lines)
      .append("Content-Length: ")
      .append(std::to_string(body_bytes))  // within the short-string buffer: no allocation
      .append("\r\n\r\n");
  return header_lines;
}

std::string host_and_port(const Endpoint& endpoint) {
  const bool ipv6 = endpoint.host.find(':') != std::string::npos;
  return (ipv6 ? "[" + endpoint.host + "]" : endpoint.host) + ":" + endpoint.port;
}

std::string connect_head(const Endpoint& endpoint, std::string_view header_lines) {
  const std::string authority = host_and_port(endpoint);
  std::string head = "CONNECT " + authority + " HTTP/1.1\r\nHost: " + authority + "\r\n";
  head.append(header_lines).append("\r\n");
  return head;
}

}  // namespace sqlstreams_http
