// common/clock — injected time. Owns: the Clock interface, the system clock and a manual clock
// for tests. Nothing in the runtime calls std::chrono::system_clock::now() directly.
// Threading: SystemClock is stateless; ManualClock is internally synchronised.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>

namespace sqlstreams {

using SysTime = std::chrono::time_point<std::chrono::system_clock, std::chrono::milliseconds>;
// A host-local deadline (when to renew, when a lease is too short to start a handler): steady,
// never compared with another host's clock. Expiries other hosts read live in the database, on
// the database's clock (store/core/sql_time.hpp).
using SteadyTime = std::chrono::steady_clock::time_point;
// A steady time as milliseconds since the steady clock's epoch (for atomics).
inline int64_t steady_ms(SteadyTime t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
}

class Clock {
 public:
  virtual ~Clock() = default;
  virtual SysTime now() const = 0;
};

class SystemClock final : public Clock {
 public:
  SysTime now() const override {
    return std::chrono::time_point_cast<std::chrono::milliseconds>(
        std::chrono::system_clock::now());
  }
  // Never destroyed: worker threads still read the clock while exit() runs static destructors
  // (a plugin calling exit() must end with the host's undecided-exit line, not a SIGSEGV on a
  // destroyed clock; the exit hook runs after every static created later than it).
  static const SystemClock& instance() {
    static const SystemClock* const clock = new SystemClock();
    return *clock;
  }
};

class ManualClock final : public Clock {
 public:
  explicit ManualClock(SysTime start) : now_(start) {}
  SysTime now() const override {
    std::lock_guard lock(mu_);
    return now_;
  }
  void advance(std::chrono::milliseconds d) {
    std::lock_guard lock(mu_);
    now_ += d;
  }
  void set(SysTime t) {
    std::lock_guard lock(mu_);
    now_ = t;
  }

 private:
  mutable std::mutex mu_;
  SysTime now_;
};

}  // namespace sqlstreams
