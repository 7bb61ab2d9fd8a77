// plugins/http — the transfers in flight: `transfer_threads` CurlLoops, each a thread driving
// libcurl's multi interface (connection reuse, keep-alive, HTTP/2 where the server offers it), so
// one handler instance holds thousands of requests without a thread each; submit() gives each
// request to the next loop in turn. A loop waits in epoll on the sockets libcurl names
// (curl_multi_socket_action: the cost of a wake-up does not grow with the number of connections,
// as poll over all of them would) and on an eventfd that submit() signals. A connection going
// idle into libcurl's cache stays in the epoll set, so reusing it costs no epoll_ctl; an event on
// it while idle (the peer closed it) takes it out.
// A loop spreads its transfers over kShards multi handles (round robin), each with its own cache
// of connections: libcurl looks for an idle connection by walking every connection it holds to
// the host, so one multi handle holding thousands of them spends most of its time looking
// (measured: 4,000 connections, 2,700 requests/s on one core). submit() hands a request over from
// any thread; a loop thread runs it and calls its `done` with the Answer (once, on that thread;
// two requests' `done` may run at once on two loops). Easy handles are kept for reuse.
// Destroying the dispatcher stops its threads and drops what is in flight (each `done` is
// destroyed uncalled).
#pragma once

#include <curl/curl.h>

#include <atomic>
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

// One transfer thread and what it drives (see the top of this file).
class CurlLoop {
 public:
  explicit CurlLoop(const Settings& settings);
  ~CurlLoop();
  CurlLoop(const CurlLoop&) = delete;
  CurlLoop& operator=(const CurlLoop&) = delete;

  void submit(Request request);

 private:
  static constexpr size_t kShards = 16;
  static constexpr long kIdleConnectionsPerShard = 512;
  struct Transfer;
  // One multi handle and its timer. Dispatcher thread only (after construction).
  struct Shard {
    CurlLoop* owner = nullptr;
    uint32_t index = 0;
    CURLM* multi = nullptr;
    // When libcurl wants CURL_SOCKET_TIMEOUT next (none: no timer).
    std::optional<std::chrono::steady_clock::time_point> timer_due;
  };
  // What the epoll set holds for one socket (fds_ is indexed by the socket).
  struct FdState {
    bool ours = false;    // opened by on_open_socket: its close passes on_close_socket
    bool wanted = false;  // libcurl watches it now (not idle in the connection cache)
    uint32_t events = 0;  // registered in the epoll set (0: not registered)
    uint32_t shard = 0;   // the shard in its epoll key
  };
  FdState& fd_state(curl_socket_t fd);
  void run();
  void start(std::unique_ptr<Transfer> t);
  void finish(Shard& shard, CURL* easy, CURLcode result);
  void read_done(Shard& shard);
  void run_due_timers();
  int next_wait_ms() const;
  CURL* new_easy();
  static int on_socket(CURL* easy, curl_socket_t fd, int what, void* shard, void* socket_data);
  static int on_timer(CURLM* multi, long timeout_ms, void* shard);
  static curl_socket_t on_open_socket(void* loop, curlsocktype purpose, curl_sockaddr* address);
  static int on_close_socket(void* loop, curl_socket_t fd);

  const Settings& settings_;
  Shard shards_[kShards];
  size_t next_shard_ = 0;  // dispatcher thread only
  int epoll_ = -1;
  int wake_ = -1;  // eventfd: submit() and the destructor
  std::unordered_map<CURL*, std::unique_ptr<Transfer>> in_flight_;  // dispatcher thread only
  std::vector<CURL*> idle_easy_;                                    // dispatcher thread only
  std::vector<FdState> fds_;                                        // dispatcher thread only
  std::mutex mu_;
  std::vector<Request> submitted_;  // guarded by mu_
  bool stopping_ = false;           // guarded by mu_
  std::thread thread_;              // last: starts after everything above exists
};

// The handler instance's transfers: `transfer_threads` CurlLoops, each request to the next one
// (round robin). submit() from any thread.
class CurlDispatcher {
 public:
  explicit CurlDispatcher(const Settings& settings);
  void submit(Request request);

 private:
  std::vector<std::unique_ptr<CurlLoop>> loops_;
  std::atomic<size_t> next_{0};
};

}  // namespace sqlstreams_http
