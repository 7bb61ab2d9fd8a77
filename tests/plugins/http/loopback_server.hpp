// tests/plugins/http — a real loopback HTTP/1.1 server for the Dispatcher's tests, in the test's
// own process: a thread per connection, every request answered in arrival order (pipelined
// requests too), and the helpers that send rounds of requests through a Dispatcher.
// Threading: the server's threads are its own; its accessors are safe from any thread.
#pragma once

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "dispatcher.hpp"

namespace sqlstreams_http::loopback {

using namespace std::chrono_literals;

// Answers every request 200, keep-alive (or `Connection: close` and closes, with
// `one_per_connection`), with an empty body (or the request's body, with `echo`), except one whose
// body is "hang": that one is never answered, nor any request after it on its connection (an
// HTTP/1.1 server answers in order). close_every_idle_connection() closes every connection that has
// no request pending (the test calls it between rounds, when the dispatcher holds them all idle).
class LoopbackServer {
 public:
  explicit LoopbackServer(bool one_per_connection = false, bool interim_first = false)
      : one_per_connection_(one_per_connection), interim_first_(interim_first) {
    listener_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (::bind(listener_, reinterpret_cast<sockaddr*>(&a), len) != 0 ||
        ::listen(listener_, 512) != 0 ||
        ::getsockname(listener_, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
      throw std::runtime_error("loopback server: cannot listen");
    }
    port_ = ntohs(a.sin_port);
    acceptor_ = std::thread([this] { accept_loop(); });
  }
  ~LoopbackServer() {
    stopping_ = true;
    ::shutdown(listener_, SHUT_RDWR);
    acceptor_.join();
    for (auto& t : connections_) t.join();
    ::close(listener_);
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_) + "/hook"; }
  int port() const { return port_; }
  int accepted() const { return accepted_.load(); }
  int closed_idle() const { return closed_idle_.load(); }
  int closed_by_client() const { return closed_by_client_.load(); }
  // From now on every request is answered with these bytes, and its connection closed.
  void answer_with(std::string raw) {
    std::lock_guard<std::mutex> lock(raw_mu_);
    raw_answer_ = std::move(raw);
  }
  // Closes every connection idle now (the dispatcher keeps them between rounds) and waits up to
  // 20 s for all to be closed; true when they were. Connections are kept again afterwards.
  bool close_every_idle_connection() {
    close_idle_ = true;
    for (int i = 0; i < 1000 && closed_idle() < accepted(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    close_idle_ = false;
    return closed_idle() == accepted();
  }
  // From now on every answer's body is its request's body.
  void echo(bool on) { echo_ = on; }
  // Requests that were already whole in the connection's buffer when the one before them was
  // answered: they came pipelined, before that answer.
  int pipelined() const { return pipelined_.load(); }
  // Request lines already received on a connection when it was closed after an answer with
  // `Connection: close` (one_per_connection): requests the client must send again.
  int left_behind_a_close() const { return left_behind_a_close_.load(); }
  // From now on each answer waits this long before it is sent.
  void delay_answers(std::chrono::milliseconds d) { delay_ms_ = static_cast<int>(d.count()); }
  // The head (request line and headers) of every request so far, in arrival order.
  std::vector<std::string> heads() {
    std::lock_guard<std::mutex> lock(raw_mu_);
    return heads_;
  }

 private:
  void accept_loop() {
    for (;;) {
      const int fd = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) return;  // shut down
      accepted_++;
      connections_.emplace_back([this, fd] { serve(fd); });
    }
  }
  void serve(int fd) {
    std::string in;
    char buf[4096];
    bool hung = false;       // a "hang" came: nothing more is answered here
    bool read_since = true;  // a recv since the last request was taken
    for (;;) {
      if (in.empty()) {  // idle between requests
        pollfd p{fd, POLLIN, 0};
        if (::poll(&p, 1, 10) == 0) {
          if (close_idle_) {
            closed_idle_++;
            break;
          }
          if (stopping_) break;
          continue;
        }
      }
      const size_t end = in.find("\r\n\r\n");
      if (end == std::string::npos) {
        const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
        if (n == 0 && in.empty() && !stopping_) closed_by_client_++;  // between requests
        if (n <= 0 || stopping_) break;
        in.append(buf, static_cast<size_t>(n));
        read_since = true;
        continue;
      }
      size_t body = 0;
      const size_t cl = in.find("Content-Length: ");
      if (cl != std::string::npos && cl < end) body = std::stoul(in.substr(cl + 16));
      if (in.size() < end + 4 + body) {
        const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
        if (n <= 0 || stopping_) break;
        in.append(buf, static_cast<size_t>(n));
        read_since = true;
        continue;
      }
      if (!read_since) pipelined_++;
      read_since = false;
      {
        std::lock_guard<std::mutex> lock(raw_mu_);
        heads_.push_back(in.substr(0, end));
      }
      hung = hung || in.compare(end + 4, 6, "\"hang\"") == 0;
      const std::string request_body = in.substr(end + 4, body);
      in.erase(0, end + 4 + body);
      if (hung) continue;  // never answered: the client gives up on it
      if (std::string raw = raw_answer(); !raw.empty()) {
        (void)::send(fd, raw.data(), raw.size(), MSG_NOSIGNAL);
        break;
      }
      static constexpr char kAnswer[] = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";
      static constexpr char kLast[] =
          "HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
      if (interim_first_) {  // interim answers first, sent apart from the final one
        static constexpr char kInterim[] =
            "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n";
        if (::send(fd, kInterim, sizeof kInterim - 1, MSG_NOSIGNAL) < 0) break;
        std::this_thread::sleep_for(1ms);
      }
      const std::string answer =
          echo_
              ? "HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(request_body.size()) +
                    (one_per_connection_ ? "\r\nConnection: close" : "") + "\r\n\r\n" + request_body
              : std::string(one_per_connection_ ? kLast : kAnswer);
      if (delay_ms_ > 0) std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms_.load()));
      if (::send(fd, answer.data(), answer.size(), MSG_NOSIGNAL) < 0) break;
      if (one_per_connection_) {
        for (size_t at = in.find(" HTTP/1.1\r\n"); at != std::string::npos;
             at = in.find(" HTTP/1.1\r\n", at + 1)) {
          left_behind_a_close_++;
        }
        break;
      }
    }
    ::close(fd);
  }

  std::string raw_answer() {
    std::lock_guard<std::mutex> lock(raw_mu_);
    return raw_answer_;
  }

  const bool one_per_connection_;
  const bool interim_first_;
  std::mutex raw_mu_;
  std::string raw_answer_;          // guarded by raw_mu_
  std::vector<std::string> heads_;  // guarded by raw_mu_
  int listener_ = -1;
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  std::atomic<bool> close_idle_{false};
  std::atomic<bool> echo_{false};
  std::atomic<int> pipelined_{0};
  std::atomic<int> left_behind_a_close_{0};
  std::atomic<int> delay_ms_{0};
  std::atomic<int> accepted_{0};
  std::atomic<int> closed_idle_{0};
  std::atomic<int> closed_by_client_{0};
  std::thread acceptor_;
  std::vector<std::thread> connections_;  // acceptor thread only, then the destructor
};

// Sends `n` requests at once and waits for every answer; returns the answers' statuses ("200"
// or the transport error), sorted by how often.
inline std::map<std::string, int> round_of(Dispatcher& d, int n) {
  std::mutex mu;
  std::condition_variable cv;
  std::map<std::string, int> seen;
  int done = 0;
  for (int i = 0; i < n; ++i) {
    Request r;
    r.body = "{\"n\":" + std::to_string(i) + "}";
    add_header(r.header_lines, "Content-Type", "application/json");
    r.done = [&](Answer a) {
      std::lock_guard<std::mutex> lock(mu);
      seen[a.transport_error.empty() ? std::to_string(a.status) : a.transport_error]++;
      if (++done == n) cv.notify_one();
    };
    d.submit(std::move(r));
  }
  std::unique_lock<std::mutex> lock(mu);
  cv.wait_for(lock, 60s, [&] { return done == n; });
  if (done != n) seen["(no answer within 60 s)"] = n - done;
  return seen;
}

// `rounds` rounds of `n` requests, every one answered 200; after each, every connection the
// dispatcher keeps idle is closed by the server, so the next round finds them closed.
inline void rounds_closing_idle(Dispatcher& d, LoopbackServer& server, int rounds, int n) {
  for (int round = 0; round < rounds; ++round) {
    EXPECT_EQ(round_of(d, n), (std::map<std::string, int>{{"200", n}})) << "round " << round;
    ASSERT_TRUE(server.close_every_idle_connection())
        << server.closed_idle() << " of " << server.accepted() << " closed";
  }
}

// A dispatcher with `s` and an idle_close_after of 300 ms closes each connection it kept idle
// that long (the server sees every one closed by the client), and the next round opens new ones.
inline void expect_the_client_closes_idle_connections(LoopbackServer& server, const Settings& s) {
  Dispatcher d(s, 300ms);
  EXPECT_EQ(round_of(d, 50), (std::map<std::string, int>{{"200", 50}}));
  const int opened = server.accepted();
  for (int i = 0; i < 250 && server.closed_by_client() < opened; ++i) {
    std::this_thread::sleep_for(20ms);
  }
  EXPECT_EQ(server.closed_by_client(), opened) << "idle connections left open";
  EXPECT_EQ(round_of(d, 50), (std::map<std::string, int>{{"200", 50}}));
  EXPECT_GE(server.accepted(), opened + 1) << "the second round opened new connections";
}

inline Settings settings_for(const LoopbackServer& server, int64_t threads) {
  Settings s;
  s.url = server.url();
  s.timeout_ms = 20000;
  s.transfer_threads = threads;
  return s;
}

}  // namespace sqlstreams_http::loopback
