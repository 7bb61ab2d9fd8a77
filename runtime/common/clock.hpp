// common/clock — injected time. Owns: the Clock interface, the system clock and a manual clock
// for tests. Nothing in the runtime calls std::chrono::system_clock::now() directly.
// Threading: SystemClock is stateless; ManualClock is internally synchronised.
#pragma once

#include <chrono>
#include <mutex>

namespace sqlstreams {

using SysTime = std::chrono::time_point<std::chrono::system_clock, std::chrono::milliseconds>;

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
  static const SystemClock& instance() {
    static SystemClock clock;
    return clock;
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
