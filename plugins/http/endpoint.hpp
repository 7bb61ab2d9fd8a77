// plugins/http — where requests go and what goes on the wire before their body: the configured
// URL (and proxy) taken apart (scheme, host, port, target), an HTTP/1.1 request head built from a
// request's "Name: value" headers, and the CONNECT request that opens a tunnel through a proxy.
// Pure functions, table-tested in tests/plugins/http. Threading: an Endpoint is built once per
// handler instance, then read-only.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace sqlstreams_http {

struct Endpoint {
  bool tls = false;          // https://
  std::string host;          // a name or an address, without IPv6 brackets
  std::string port;          // as given, or "80" / "443"
  std::string host_header;   // the Host header: the URL's authority as written
  std::string target = "/";  // path and query (never a fragment)
};

// Takes apart a URL that Settings::read accepted (http:// or https://, a host, no user
// information). Throws std::invalid_argument naming what is wrong with anything else.
Endpoint parse_endpoint(std::string_view url);

// Appends the header line "name: value\r\n" to `lines` (the caller checked both).
void add_header(std::string& lines, std::string_view name, std::string_view value);

// The request line's target: the URL's path and query (origin form), or, for a plain http://
// request that a forward proxy carries, the URL itself without a fragment (absolute form,
// RFC 9112 3.2.2).
std::string request_target(const Endpoint& endpoint, bool through_proxy);

// "METHOD target HTTP/1.1", Host, `header_lines` and `more_lines` (add_header's) and
// Content-Length, then the blank line; built in `header_lines`' buffer (no allocation when it has
// room for the rest, as the plugin reserves it).
std::string request_head(const Endpoint& endpoint, std::string_view target, std::string_view method,
                         std::string header_lines, size_t body_bytes,
                         std::string_view more_lines = {});

// "host:port" of the endpoint, an IPv6 address in brackets: what CONNECT names.
std::string host_and_port(const Endpoint& endpoint);

// "CONNECT host:port HTTP/1.1", Host (the same authority), `header_lines`, the blank line: what
// asks a forward proxy for a tunnel to an https:// endpoint (RFC 9110 9.3.6).
std::string connect_head(const Endpoint& endpoint, std::string_view header_lines);

}  // namespace sqlstreams_http
