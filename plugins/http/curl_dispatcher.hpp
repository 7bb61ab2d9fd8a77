// plugins/http — the transfers in flight: one thread drives libcurl's multi interface
// (connection reuse, keep-alive, HTTP/2 where the server offers it), so one handler instance
// holds thousands of requests without a thread each. The thread waits in epoll on the sockets
// libcurl names (curl_multi_socket_action: the cost of a wake-up does not grow with the number
// of connections, as poll over all of them would) and on an eventfd that submit() signals.
// The transfers are spread over kShards multi handles (round robin), each with its own cache of
// connections: libcurl looks for an idle connection by walking every connection it holds to the
// host, so one multi handle holding thousands of them spends most of its time looking (measured:
// 4,000 connections, 2,700 requests/s on one core). submit() hands a request over from any
// thread; the dispatcher thread runs it and calls its `done` with the Answer (once, on the
// dispatcher thread). Easy handles are kept for reuse.
// Destroying the dispatcher stops its thread and drops what is in flight (each `done` is
// destroyed uncalled).
#pragma once

#include <curl/curl.h>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "outcome.hpp"
#include "settings.hpp"

namespace sqlstreams_http {

struct Request {
  std::string body;
  std::vector<std::string> headers;  // "Name: value"
  std::function<void(Answer)> done;
};

class CurlDispatcher {
 public:
  explicit CurlDispatcher(const Settings& settings);
  ~CurlDispatcher();
  CurlDispatcher(const CurlDispatcher&) = delete;
  CurlDispatcher& operator=(const CurlDispatcher&) = delete;

  void submit(Request request);

 private:
  static constexpr size_t kShards = 16;
  static constexpr long kIdleConnectionsPerShard = 512;
  struct Transfer;
  // One multi handle and its timer. Dispatcher thread only (after construction).
  struct Shard {
    CurlDispatcher* owner = nullptr;
    uint32_t index = 0;
    CURLM* multi = nullptr;
    // When libcurl wants CURL_SOCKET_TIMEOUT next (none: no timer).
    std::optional<std::chrono::steady_clock::time_point> timer_due;
  };
  void run();
  void start(std::unique_ptr<Transfer> t);
  void finish(Shard& shard, CURL* easy, CURLcode result);
  void read_done(Shard& shard);
  void run_due_timers();
  int next_wait_ms() const;
  CURL* new_easy();
  static int on_socket(CURL* easy, curl_socket_t fd, int what, void* shard, void* socket_data);
  static int on_timer(CURLM* multi, long timeout_ms, void* shard);

  const Settings& settings_;
  Shard shards_[kShards];
  size_t next_shard_ = 0;  // dispatcher thread only
  int epoll_ = -1;
  int wake_ = -1;  // eventfd: submit() and the destructor
  std::unordered_map<CURL*, std::unique_ptr<Transfer>> in_flight_;  // dispatcher thread only
  std::vector<CURL*> idle_easy_;                                    // dispatcher thread only
  std::mutex mu_;
  std::vector<Request> submitted_;  // guarded by mu_
  bool stopping_ = false;           // guarded by mu_
  std::thread thread_;              // last: starts after everything above exists
};

}  // namespace sqlstreams_http
