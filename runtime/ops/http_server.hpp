// ops/http_server — the host's small HTTP server (docs/design.md#the-host): /healthz, /readyz,
// /metrics and the status page are served through civetweb (Debian's libcivetweb, the server
// prometheus-cpp bundles), never hand-written sockets. One handler function sees every GET/HEAD
// request and answers with a status, a content type and a body; routing lives with the caller.
// Listens on host.http_listen ("127.0.0.1:9187" by default: loopback only). Connections are
// closed after each response (no keep-alive). Slow clients cannot starve health checks
// (HttpLimits): a connection whose request has not fully arrived within request_timeout is
// dropped (civetweb checks after each receive: a client trickling bytes holds a thread up to
// about request_timeout + its byte interval), and `threads` connections are served at once.
// Accepted connections beyond `threads` wait first in, first out in a queue of `queue`, then in
// the kernel's backlog (`queue` + 1): a new connection waits for every one ahead of it, each of
// which may hold a thread for a request timeout. So threads >= 2 × queue + 2: everything ahead
// of a new connection gets a thread within one request timeout, and up to threads + 2 × queue
// stalled connections delay /healthz by about one request timeout at most (threads - 1 of them
// not at all). More than that fill the backlog: the kernel drops new connections' SYNs, and a
// check waits for its own retransmits (docs/operating/security.md#logs-and-http). With 16 threads
// behind 32 + 33 queued, a trickling load once held /healthz 5–11 s.
// Threading: the handler runs on civetweb's worker threads (up to `threads` at once) and must
// be thread-safe. The destructor stops the server and waits for running requests.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>

struct mg_context;
struct mg_connection;

namespace sqlstreams::ops {

struct HttpRequest {
  std::string method;                        // "GET", "HEAD", ...
  std::string path;                          // URL-decoded, without the query string
  std::map<std::string, std::string> query;  // URL-decoded parameters
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
};

using HttpHandler = std::function<HttpResponse(const HttpRequest&)>;

class HttpError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct HttpLimits {
  int threads = 64;  // connections served at once
  int queue = 16;    // accepted connections waiting for a thread (and the listen backlog)
  std::chrono::milliseconds request_timeout{2000};  // to receive a whole request (and to send)
};

class HttpServer {
 public:
  // Starts listening on `listen` ("ip:port", "localhost:port" or "[ipv6]:port"); throws
  // HttpError naming the address when it cannot (bad address, port in use).
  HttpServer(const std::string& listen, HttpHandler handler, HttpLimits limits = {});
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  const std::string& listen() const { return listen_; }
  int port() const { return port_; }

 private:
  static int on_request(mg_connection* conn, void* self);

  std::string listen_;
  HttpHandler handler_;
  mg_context* ctx_ = nullptr;
  int port_ = 0;
};

// Parses "a=1&b=x%20y" into decoded pairs (later duplicates win).
std::map<std::string, std::string> parse_query(const std::string& query);

}  // namespace sqlstreams::ops
