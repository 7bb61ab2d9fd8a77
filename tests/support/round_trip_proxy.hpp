// tests/support/round_trip_proxy — a loopback TCP proxy in front of the test database that counts
// round trips: a "turn" is each time the client sends after the server last answered (or first),
// however many packets either side's message takes. A test points a Session at url() and
// compares turns() before and after the call it measures (a claim: four; an empty one: two).
// Threading: one forwarding thread of its own; url(), turns() and reset() from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <thread>

namespace sqlstreams::testing {

class RoundTripProxy {
 public:
  // Forwards to the host and port that `database_url` connects to.
  explicit RoundTripProxy(const std::string& database_url);
  ~RoundTripProxy();
  RoundTripProxy(const RoundTripProxy&) = delete;
  RoundTripProxy& operator=(const RoundTripProxy&) = delete;

  // `database_url` with host=127.0.0.1 and the proxy's port (libpq: the last setting wins).
  std::string url() const;
  int64_t turns() const { return turns_.load(); }
  void reset() { turns_ = 0; }

 private:
  void run();

  std::string database_url_;
  std::string upstream_host_;
  int upstream_port_ = 0;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<int64_t> turns_{0};
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace sqlstreams::testing
