// The injected steady clocks (common/clock): the real one is the std steady clock unchanged;
// the manual one moves only when advanced, keeps the time left when converting a real deadline,
// and never asks a waiter to sleep longer than kRecheck of real time.
#include "common/clock.hpp"

#include <gtest/gtest.h>

namespace sqlstreams {
namespace {

using namespace std::chrono_literals;
using Real = std::chrono::steady_clock;

TEST(RealSteadyClock, IsTheStdSteadyClockAndConvertsNothing) {
  const SteadyClock& c = RealSteadyClock::instance();
  const auto before = Real::now();
  const auto now = c.now();
  EXPECT_LE(before, now);
  EXPECT_LE(now, Real::now());
  const auto t = before + 123ms;
  EXPECT_EQ(c.to_real(t), t);
  EXPECT_EQ(c.from_real(t), t);
  EXPECT_EQ(c.to_real(SteadyTime::max()), SteadyTime::max());
}

TEST(ManualSteadyClock, MovesOnlyWhenAdvanced) {
  const SteadyTime start = Real::now();
  ManualSteadyClock c(start);
  EXPECT_EQ(c.now(), start);
  EXPECT_EQ(c.now(), start) << "no real time passes on it";
  c.advance(250ms);
  EXPECT_EQ(c.now(), start + 250ms);
  c.advance(10s);
  EXPECT_EQ(c.now(), start + 250ms + 10s);
}

TEST(ManualSteadyClock, FromRealKeepsTheTimeLeft) {
  ManualSteadyClock c(SteadyTime(1h));  // far from the real steady time
  const auto real_deadline = Real::now() + 5s;
  const auto seen = c.from_real(real_deadline);
  // The real clock moved a little between the two reads: at most that much less is left.
  EXPECT_LE(seen, c.now() + 5s);
  EXPECT_GT(seen, c.now() + 4s);
  EXPECT_GT(c.from_real(SteadyTime::max()), c.now() + 24h * 365) << "no overflow";
  ManualSteadyClock ahead(Real::now() + 1h);
  EXPECT_EQ(ahead.from_real(SteadyTime::max()), SteadyTime::max()) << "saturates";
}

TEST(ManualSteadyClock, ToRealWakesAWaiterWithinTheRecheckPeriod) {
  ManualSteadyClock c;
  const auto before = Real::now();
  const auto far = c.to_real(c.now() + 1h);
  EXPECT_GE(far, before);
  EXPECT_LE(far, Real::now() + ManualSteadyClock::kRecheck)
      << "an hour of manual time is never waited in real time";
  const auto never = c.to_real(SteadyTime::max());  // read before the bound below
  EXPECT_LE(never, Real::now() + ManualSteadyClock::kRecheck);
  // A deadline already reached on the manual clock: wake now (or in the past).
  c.advance(2s);
  EXPECT_LE(c.to_real(c.now() - 1s), Real::now());
}

}  // namespace
}  // namespace sqlstreams
