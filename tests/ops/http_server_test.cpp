// ops/http_server: civetweb serves the handler's status, type and body; only GET/HEAD; an
// exception becomes 500; query strings are decoded; a busy port is refused with its address.
#include "ops/http_server.hpp"

#include <civetweb.h>
#include <gtest/gtest.h>

#include <atomic>

namespace sqlstreams::ops {
namespace {

struct Reply {
  int status = 0;
  std::string body;
};

Reply request(int port, const std::string& method, const std::string& path) {
  char error[256] = {};
  mg_connection* c = mg_download("127.0.0.1", port, 0, error, sizeof error,
                                 "%s %s HTTP/1.0\r\n\r\n", method.c_str(), path.c_str());
  if (!c) return {0, error};
  Reply r;
  r.status = mg_get_response_info(c)->status_code;
  char buf[1024];
  for (int n; (n = mg_read(c, buf, sizeof buf)) > 0;) r.body.append(buf, n);
  mg_close_connection(c);
  return r;
}

HttpResponse handle(const HttpRequest& r) {
  if (r.path == "/boom") throw std::runtime_error("exploded");
  if (r.path == "/echo") {
    auto it = r.query.find("q");
    return {200, "text/plain", it == r.query.end() ? "" : it->second};
  }
  if (r.path == "/") return {200, "text/html", "<p>home</p>"};
  return {404, "text/plain", "nope"};
}

TEST(HttpServer, ServesTheHandlersAnswers) {
  HttpServer server("127.0.0.1:0", handle);
  ASSERT_GT(server.port(), 0);
  EXPECT_EQ(request(server.port(), "GET", "/").body, "<p>home</p>");
  EXPECT_EQ(request(server.port(), "GET", "/missing").status, 404);
  EXPECT_EQ(request(server.port(), "GET", "/echo?q=a%20b%26c").body, "a b&c");
  auto boom = request(server.port(), "GET", "/boom");
  EXPECT_EQ(boom.status, 500);
  EXPECT_NE(boom.body.find("exploded"), std::string::npos);
  EXPECT_EQ(request(server.port(), "POST", "/").status, 405);
  auto head = request(server.port(), "HEAD", "/");
  EXPECT_EQ(head.status, 200);
  EXPECT_EQ(head.body, "");
}

TEST(HttpServer, ABusyPortIsRefusedNamingTheAddress) {
  HttpServer first("127.0.0.1:0", handle);
  std::string busy = "127.0.0.1:" + std::to_string(first.port());
  try {
    HttpServer second(busy, handle);
    FAIL() << "a second server on " << busy << " started";
  } catch (const HttpError& e) {
    EXPECT_NE(std::string(e.what()).find(busy), std::string::npos) << e.what();
  }
}

TEST(HttpServer, StopsWhileRequestsAreServed) {
  std::atomic<int> served{0};
  {
    HttpServer server("localhost:0", [&](const HttpRequest&) {
      served++;
      return HttpResponse{200, "text/plain", "ok"};
    });
    EXPECT_EQ(request(server.port(), "GET", "/").status, 200);
  }
  EXPECT_EQ(served.load(), 1);
}

TEST(ParseQuery, DecodesPairs) {
  auto q = parse_query("a=1&b=x+y&c=%2F&flag");
  EXPECT_EQ(q["a"], "1");
  EXPECT_EQ(q["b"], "x y");
  EXPECT_EQ(q["c"], "/");
  EXPECT_TRUE(q.count("flag"));
}

}  // namespace
}  // namespace sqlstreams::ops
