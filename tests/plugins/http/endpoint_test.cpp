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
  EXPECT_EQ(request_head(e, "PUT", lines, 17),
            "PUT /hook?a=1 HTTP/1.1\r\nHost: 127.0.0.1:9\r\nContent-Type: application/json\r\n"
            "webhook-id: sqlstreams:s:1\r\nContent-Length: 17\r\n\r\n");
  EXPECT_EQ(request_head(e, "POST", "", 0),
            "POST /hook?a=1 HTTP/1.1\r\nHost: 127.0.0.1:9\r\nContent-Length: 0\r\n\r\n");
}

}  // namespace
}  // namespace sqlstreams_http
