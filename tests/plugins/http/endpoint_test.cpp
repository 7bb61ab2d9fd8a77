// plugins/http's endpoint.hpp: the configured URL taken apart, and the request head built from
// a request's headers. Pure functions, table tests.
#include "endpoint.hpp"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

namespace sqlstreams_http {
namespace {

TEST(ParseEndpoint, TakesEveryPartOfTheUrl) {
  struct Case {
    const char* url;
    bool tls;
    const char* host;
    const char* port;
    const char* host_header;
    const char* target;
  };
  const Case cases[] = {
      {"http://127.0.0.1:8080/hooks/orders", false, "127.0.0.1", "8080", "127.0.0.1:8080",
       "/hooks/orders"},
      {"https://hooks.example.com/in?team=a&x=1", true, "hooks.example.com", "443",
       "hooks.example.com", "/in?team=a&x=1"},
      {"HTTP://Example.COM", false, "Example.COM", "80", "Example.COM", "/"},
      {"http://example.com?q=1", false, "example.com", "80", "example.com", "/?q=1"},
      {"http://example.com/a#fragment", false, "example.com", "80", "example.com", "/a"},
      {"http://example.com#fragment", false, "example.com", "80", "example.com", "/"},
      {"https://[::1]:8443/h", true, "::1", "8443", "[::1]:8443", "/h"},
      {"http://[fe80::1]/", false, "fe80::1", "80", "[fe80::1]", "/"},
      {"http://h:65535/", false, "h", "65535", "h:65535", "/"},
      {"http://h:/x", false, "h", "80", "h:", "/x"},  // an empty port is the default (RFC 3986)
  };
  for (const Case& c : cases) {
    const Endpoint e = parse_endpoint(c.url);
    EXPECT_EQ(e.tls, c.tls) << c.url;
    EXPECT_EQ(e.host, c.host) << c.url;
    EXPECT_EQ(e.port, c.port) << c.url;
    EXPECT_EQ(e.host_header, c.host_header) << c.url;
    EXPECT_EQ(e.target, c.target) << c.url;
  }
}

TEST(ParseEndpoint, RefusesWhatIsNotAUrlWithAHostAndAPort) {
  for (const char* url :
       {"ftp://h/", "h/path", "http://", "http:///path", "http://u:p@h/", "http://h:0/",
        "http://h:65536/", "http://h:80x/", "http://[::1/", "http://[::1]x/", "http://:80/"}) {
    EXPECT_THROW(parse_endpoint(url), std::invalid_argument) << url;
  }
}

TEST(RequestHead, CarriesTheHeaderLinesGiven) {
  const Endpoint e = parse_endpoint("http://127.0.0.1:9/hook?a=1");
  std::string lines;
  add_header(lines, "Content-Type", "application/json");
  add_header(lines, "webhook-id", "sqlstreams:s:1");
  EXPECT_EQ(request_head(e, e.target, "PUT", lines, 17),
            "PUT /hook?a=1 HTTP/1.1\r\nHost: 127.0.0.1:9\r\nContent-Type: application/json\r\n"
            "webhook-id: sqlstreams:s:1\r\nContent-Length: 17\r\n\r\n");
  EXPECT_EQ(request_head(e, e.target, "POST", "", 0),
            "POST /hook?a=1 HTTP/1.1\r\nHost: 127.0.0.1:9\r\nContent-Length: 0\r\n\r\n");
}

// Through a forward proxy: a plain request names the whole URL (absolute form) and carries the
// proxy's credentials after the request's own headers; an https:// one opens a tunnel with
// CONNECT to host:port (IPv6 in brackets) and its requests keep the origin form.
TEST(RequestHead, ThroughAProxy) {
  const struct {
    const char* url;
    bool through_proxy;
    const char* target;
  } targets[] = {
      {"http://hooks.example:8080/in?x=1#frag", true, "http://hooks.example:8080/in?x=1"},
      {"http://hooks.example", true, "http://hooks.example/"},
      {"http://[::1]:9/hook", true, "http://[::1]:9/hook"},
      {"http://hooks.example:8080/in?x=1", false, "/in?x=1"},
      {"https://hooks.example/in", false, "/in"},
  };
  for (const auto& c : targets) {
    EXPECT_EQ(request_target(parse_endpoint(c.url), c.through_proxy), c.target) << c.url;
  }
  const Endpoint plain = parse_endpoint("http://hooks.example:8080/in");
  std::string proxy_lines;
  add_header(proxy_lines, "Proxy-Authorization", "Basic dTpw");
  EXPECT_EQ(request_head(plain, request_target(plain, true), "POST", "X-A: 1\r\n", 2, proxy_lines),
            "POST http://hooks.example:8080/in HTTP/1.1\r\nHost: hooks.example:8080\r\n"
            "X-A: 1\r\nProxy-Authorization: Basic dTpw\r\nContent-Length: 2\r\n\r\n");

  const struct {
    const char* url;
    const char* head;
  } tunnels[] = {
      {"https://hooks.example/in",
       "CONNECT hooks.example:443 HTTP/1.1\r\nHost: hooks.example:443\r\n"},
      {"https://10.0.0.7:8443/in", "CONNECT 10.0.0.7:8443 HTTP/1.1\r\nHost: 10.0.0.7:8443\r\n"},
      {"https://[fd00::7]/in", "CONNECT [fd00::7]:443 HTTP/1.1\r\nHost: [fd00::7]:443\r\n"},
  };
  for (const auto& c : tunnels) {
    EXPECT_EQ(connect_head(parse_endpoint(c.url), proxy_lines),
              std::string(c.head) + proxy_lines + "\r\n")
        << c.url;
    EXPECT_EQ(connect_head(parse_endpoint(c.url), ""), std::string(c.head) + "\r\n") << c.url;
  }
}

}  // namespace
}  // namespace sqlstreams_http
