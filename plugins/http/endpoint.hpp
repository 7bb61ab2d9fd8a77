// plugins/http — where requests go and what goes on the wire before their body: the configured
// URL taken apart (scheme, host, port, target) and an HTTP/1.1 request head built from a
// request's "Name: value" headers. Pure functions, table-tested in tests/plugins/http.
// Threading: an Endpoint is built once per handler instance, then read-only.
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

// "METHOD target HTTP/1.1", Host, `header_lines` (add_header's) and Content-Length, then the
// blank line.
std::string request_head(const Endpoint& endpoint, std::string_view method,
                         std::string_view header_lines, size_t body_bytes);

}  // namespace sqlstreams_http
