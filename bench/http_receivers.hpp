// bench/http_receivers — the loopback HTTP/1.1 receivers phase `http` delivers to, each on one
// thread of its own in the bench process, answering every request 204 over keep-alive:
// - BeastReceiver: Boost.Beast (a request object parsed per request), optionally answering after
//   a delay (the 50 ms row);
// - MinimalReceiver: one epoll loop that only frames requests (head, Content-Length) and writes
//   the fixed answer, every complete request of one read answered with one write. It costs the
//   shared two cores about half what the Beast receiver does (~11 against ~20 µs a request), so
//   that the immediate row measures the delivery rather than the receiver (a deployment's
//   receiver runs elsewhere): bench/results/README.md "A receiver that costs less than the
//   client".
// Threading: constructed and destroyed on the bench's thread; the counters are atomics read from
// any thread; cpu_seconds() reads the receiver thread's /proc task.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>

namespace bench {

class LoopbackReceiver {
 public:
  virtual ~LoopbackReceiver() = default;
  virtual int port() const = 0;
  uint64_t requests() const { return requests_.load(); }
  uint64_t connections() const { return connections_.load(); }
  // CPU seconds of the receiver's thread (utime + stime of its /proc task).
  double cpu_seconds() const;
  std::string url() const;  // http://127.0.0.1:<port>/hook

 protected:
  std::atomic<uint64_t> requests_{0};
  std::atomic<uint64_t> connections_{0};
  std::atomic<pid_t> tid_{0};
};

class BeastReceiver final : public LoopbackReceiver {
 public:
  explicit BeastReceiver(std::chrono::milliseconds delay);
  ~BeastReceiver() override;
  int port() const override;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

class MinimalReceiver final : public LoopbackReceiver {
 public:
  MinimalReceiver();
  ~MinimalReceiver() override;
  int port() const override { return port_; }

 private:
  void run();
  int listener_ = -1, epoll_ = -1, wake_ = -1, port_ = 0;
  std::thread thread_;
};

}  // namespace bench
