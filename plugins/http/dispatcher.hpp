// plugins/http — the transfers in flight: `transfer_threads` TransferLoops, each a thread running
// one Boost.Asio io_context, so one handler instance holds thousands of requests without a thread
// each; submit() gives each request to the loop with the fewest in flight. A loop keeps its idle
// keep-alive connections (HTTP/1.1, TLS through OpenSSL when the URL is https://), reuses the most
// recently used one and closes one idle for kIdleCloseAfter; with a `proxy`, connections go to it
// (a plain request in absolute form, an https:// one through a CONNECT tunnel opened before its TLS
// handshake); a request that fails on a reused connection before any byte of an answer arrived (the
// peer closed it while it was idle) is sent once more on a new connection. Answers are read by
// Boost.Beast's parser, keeping at most Settings::answer_body_bytes() of the body. The request's
// deadline (`timeout_ms`) needs no timer of its own: every request of a loop has the same timeout,
// so the loop's requests in start order are in deadline order, and one timer armed at the oldest
// deadline closes the connection of any request past it. With pipeline_depth > 1 a connection (a
// Pipe, dispatcher.cpp) carries up to that many requests, written together and answered in order; a
// request past its deadline ends its pipe and the requests behind it are sent once more on a new
// one. Threading: submit() from any thread; each request's `done` runs once on its loop's thread
// (two requests' `done` may run at once on two loops). Destroying the dispatcher stops its threads
// and drops what is in flight (each `done` is destroyed uncalled).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "endpoint.hpp"
#include "outcome.hpp"
#include "settings.hpp"

namespace boost::asio::ssl {
class context;
}

namespace sqlstreams_http {

struct Request {
  std::string body;
  std::string header_lines;  // "Name: value\r\n" each (add_header)
  std::function<void(Answer)> done;
};

class TransferLoop;  // dispatcher.cpp
struct Route;        // dispatcher.cpp: the URL and the proxy that carries its requests

class Dispatcher {
 public:
  // A connection idle this long is closed (receivers close theirs after 5–75 s; one left open
  // on this side would hold a descriptor until it is reused).
  static constexpr std::chrono::milliseconds kIdleCloseAfter{std::chrono::seconds(30)};
  // Throws std::runtime_error naming the file when a TLS file cannot be loaded.
  explicit Dispatcher(const Settings& settings,
                      std::chrono::milliseconds idle_close_after = kIdleCloseAfter);
  ~Dispatcher();
  Dispatcher(const Dispatcher&) = delete;
  Dispatcher& operator=(const Dispatcher&) = delete;

  void submit(Request request);

 private:
  const Settings& settings_;
  std::unique_ptr<Route> route_;
  std::string target_;       // the request line's: origin form, or absolute through a proxy
  std::string proxy_lines_;  // Proxy-Authorization of a plain request through a proxy, or ""
  std::unique_ptr<boost::asio::ssl::context> tls_;  // https:// only
  std::vector<std::unique_ptr<TransferLoop>> loops_;
  std::atomic<size_t> next_{0};
};

}  // namespace sqlstreams_http
