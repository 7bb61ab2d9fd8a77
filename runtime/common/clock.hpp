// common/clock — injected time. Owns: the Clock interface (wall time: audit dates, the janitor's
// "now"), the SteadyClock interface (this host's own deadlines: handler timeouts, lease renewal
// and start checks, the maintenance runner's schedule), the real clocks and a manual one of each
// for tests. Nothing in the runtime calls std::chrono::system_clock::now() directly; the
// components that judge timeouts and renewals read an injected SteadyClock.
// Threading: SystemClock and RealSteadyClock are stateless; the manual clocks are internally
// synchronised.
#pragma once

#include <algorithm>
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

// This host's steady time, injected (docs/design.md#testing: timeout tests advance a manual clock
// instead of sleeping). A component that waits on a condition variable for a SteadyTime deadline
// converts it with to_real(); a deadline measured on the real steady clock elsewhere (the store
// takes a lease's deadline before its statement) comes in through from_real().
class SteadyClock {
 public:
  virtual ~SteadyClock() = default;
  virtual SteadyTime now() const = 0;
  // The std::chrono::steady_clock time at which to wake up to reach `t` on this clock.
  virtual std::chrono::steady_clock::time_point to_real(SteadyTime t) const = 0;
  // A std::chrono::steady_clock time as this clock sees it.
  virtual SteadyTime from_real(std::chrono::steady_clock::time_point t) const = 0;
};

class RealSteadyClock final : public SteadyClock {
 public:
  SteadyTime now() const override { return std::chrono::steady_clock::now(); }
  std::chrono::steady_clock::time_point to_real(SteadyTime t) const override { return t; }
  SteadyTime from_real(std::chrono::steady_clock::time_point t) const override { return t; }
  // Never destroyed, as SystemClock::instance().
  static const RealSteadyClock& instance() {
    static const RealSteadyClock* const clock = new RealSteadyClock();
    return *clock;
  }
};

// Moves only when advance() is called. It starts at the real steady time of its construction
// (or `start`). from_real() keeps the time left: from_real(real now + d) is now() + d. A waiter
// re-reads it at least every kRecheck of real time: to_real(now() + d) is the real now +
// min(d, kRecheck), so what a test advanced is seen within kRecheck (no wake-up is needed).
class ManualSteadyClock final : public SteadyClock {
 public:
  ManualSteadyClock() : now_(std::chrono::steady_clock::now()) {}
  explicit ManualSteadyClock(SteadyTime start) : now_(start) {}
  SteadyTime now() const override {
    std::lock_guard lock(mu_);
    return now_;
  }
  static constexpr std::chrono::milliseconds kRecheck{5};
  std::chrono::steady_clock::time_point to_real(SteadyTime t) const override {
    return std::chrono::steady_clock::now() + std::min<SteadyTime::duration>(t - now(), kRecheck);
  }
  SteadyTime from_real(std::chrono::steady_clock::time_point t) const override {
    return shift(now(), t - std::chrono::steady_clock::now());
  }
  void advance(std::chrono::milliseconds d) {
    std::lock_guard lock(mu_);
    now_ += d;
  }

 private:
  // base + d, saturating at the time_point's range (deadlines such as time_point::max() pass).
  static SteadyTime shift(SteadyTime base, SteadyTime::duration d) {
    using D = SteadyTime::duration;
    if (d > D::zero() && base > SteadyTime::max() - d) return SteadyTime::max();
    if (d < D::zero() && base < SteadyTime::min() - d) return SteadyTime::min();
    return base + d;
  }

  mutable std::mutex mu_;
  SteadyTime now_;
};

}  // namespace sqlstreams
