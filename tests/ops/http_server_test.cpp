// ops/http_server: civetweb serves the handler's status, type and body; only GET/HEAD; an
// exception becomes 500; query strings are decoded; a busy port is refused with its address.
#include "ops/http_server.hpp"

#include <arpa/inet.h>
#include <civetweb.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <vector>

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

// A TCP connection that sent `partial` (maybe nothing) and then stalls: a half-open client.
int half_open(int port, const std::string& partial) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
  EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  if (!partial.empty()) {
    EXPECT_EQ(send(fd, partial.data(), partial.size(), 0), ssize_t(partial.size()));
  }
  return fd;
}

// True when the server has answered or closed `fd` within `timeout` (readable: data or EOF).
bool server_gave_up(int fd, std::chrono::milliseconds timeout) {
  pollfd p{fd, POLLIN, 0};
  return poll(&p, 1, static_cast<int>(timeout.count())) == 1;
}

TEST(HttpServer, HalfOpenConnectionsDoNotBlockHealthChecks) {
  // Regression (docs/operating/security.md#logs-and-http): stalled connections each held a
  // worker for 10 s, so /healthz waited.
  // A long request timeout here makes the order the proof: /healthz must be answered while
  // every stalled connection is still open (not after they timed out).
  HttpLimits limits;
  limits.request_timeout = std::chrono::seconds(120);
  HttpServer server("127.0.0.1:0", handle, limits);
  std::vector<int> stalled;
  for (int i = 0; i < limits.threads - 1; ++i) {
    stalled.push_back(half_open(server.port(), i % 2 ? "GET /healthz HTTP/1.1\r\n" : ""));
  }
  EXPECT_EQ(request(server.port(), "GET", "/").status, 200);
  for (int fd : stalled) {
    EXPECT_FALSE(server_gave_up(fd, std::chrono::milliseconds(0)))
        << "the health check was answered only after the stalled connections timed out";
    close(fd);
  }
}

TEST(HttpServer, AStalledRequestIsDroppedAfterTheRequestTimeout) {
  HttpLimits limits;
  limits.request_timeout = std::chrono::milliseconds(200);
  HttpServer server("127.0.0.1:0", handle, limits);
  std::vector<int> stalled{half_open(server.port(), ""),
                           half_open(server.port(), "GET / HTTP/1.1\r\nHost: x\r\n")};
  for (int fd : stalled) {
    EXPECT_TRUE(server_gave_up(fd, std::chrono::seconds(60))) << "never dropped";
    close(fd);
  }
  EXPECT_EQ(request(server.port(), "GET", "/").status, 200);
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
