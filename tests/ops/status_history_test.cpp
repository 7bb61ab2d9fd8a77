// ops/status_history: the poller's samples kept per group — spacing, the window, the count and
// byte bounds, eviction, a wall clock stepping back — and the rates drawn from them (counter
// resets, groups added by a reload, gaps). Time comes from a ManualClock.
#include "ops/status_history.hpp"

#include <gtest/gtest.h>

#include <cmath>

namespace sqlstreams::ops {
namespace {

const SysTime kStart = SysTime(Millis(1'700'000'000'000));

HistoryInput history_input(const std::string& group, double lag,
                           std::optional<uint64_t> succeeded = {}, uint64_t retried = 0,
                           uint64_t dead = 0) {
  HistoryInput in{"payments.requested", group, {}};
  in.point.lag = lag;
  if (succeeded) {
    in.point.local = true;
    in.point.succeeded = *succeeded;
    in.point.retried = retried;
    in.point.dead = dead;
  }
  return in;
}

TEST(StatusHistory, KeepsOnePointPerSpacingAndTheNewestIsTheLatestSample) {
  // An hour of 720 points: one every 5 s; samples every second.
  StatusHistory h;
  ManualClock clock(kStart);
  for (int i = 0; i <= 12; ++i) {
    h.record(clock.now(), {history_input("charge-cards", i)});
    clock.advance(Millis(1000));
  }
  auto points = h.points("payments.requested", "charge-cards");
  ASSERT_EQ(points.size(), 4u);  // 0 s, 5 s, 10 s and the latest (12 s)
  EXPECT_EQ(points[0].at, kStart);
  EXPECT_EQ(points[1].at, kStart + Millis(5000));
  EXPECT_EQ(points[2].at, kStart + Millis(10'000));
  EXPECT_EQ(points[3].at, kStart + Millis(12'000));
  EXPECT_EQ(points[3].lag, 12);
  EXPECT_TRUE(h.points("payments.requested", "other").empty());
}

TEST(StatusHistory, DropsPointsOlderThanTheWindowAndBoundsTheCount) {
  StatusHistory h({.window = Millis(60'000), .max_points = 6, .max_bytes = 1 << 20});
  ManualClock clock(kStart);
  for (int i = 0; i < 100; ++i) {  // a sample every 10 s: spacing 10 s
    h.record(clock.now(), {history_input("g", i)});
    clock.advance(Millis(10'000));
  }
  auto points = h.points("payments.requested", "g");
  ASSERT_LE(points.size(), 6u);
  EXPECT_GE(points.size(), 5u);
  EXPECT_EQ(points.back().lag, 99);
  EXPECT_GE(points.front().at, points.back().at - Millis(60'000));
  for (size_t i = 1; i < points.size(); ++i) EXPECT_LT(points[i - 1].at, points[i].at);
}

TEST(StatusHistory, AGroupGoneForTheWindowIsForgotten) {
  StatusHistory h({.window = Millis(60'000), .max_points = 60, .max_bytes = 1 << 20});
  ManualClock clock(kStart);
  h.record(clock.now(), {history_input("a", 1), history_input("b", 1)});
  EXPECT_EQ(h.groups(), 2u);
  const size_t both = h.bytes();
  clock.advance(Millis(30'000));
  h.record(clock.now(), {history_input("a", 2)});
  EXPECT_EQ(h.groups(), 2u) << "b is still within the window";
  clock.advance(Millis(31'000));
  h.record(clock.now(), {history_input("a", 3)});
  EXPECT_EQ(h.groups(), 1u);
  EXPECT_LT(h.bytes(), both);
  EXPECT_EQ(h.bytes(), h.ring_bytes("payments.requested", "a"));
}

TEST(StatusHistory, TheByteBudgetEvictsAbsentGroupsThenRefusesNewOnes) {
  StatusHistory probe({.window = Millis(60'000), .max_points = 100, .max_bytes = 1 << 20});
  const size_t ring = probe.ring_bytes("payments.requested", "g0");
  // Room for three rings of names this long.
  StatusHistory h({.window = Millis(60'000), .max_points = 100, .max_bytes = 3 * ring + 10});
  ManualClock clock(kStart);
  h.record(clock.now(), {history_input("g0", 0), history_input("g1", 0), history_input("g2", 0),
                         history_input("g3", 0)});
  EXPECT_EQ(h.groups(), 3u);
  EXPECT_EQ(h.groups_refused(), 1u);
  EXPECT_LE(h.bytes(), 3 * ring + 10);
  EXPECT_TRUE(h.points("payments.requested", "g3").empty());
  // g0 disappears (dropped, moved away): g3 takes its place.
  clock.advance(Millis(1000));
  h.record(clock.now(), {history_input("g1", 0), history_input("g2", 0), history_input("g3", 0)});
  EXPECT_EQ(h.groups(), 3u);
  EXPECT_EQ(h.groups_refused(), 0u);
  EXPECT_TRUE(h.points("payments.requested", "g0").empty());
  EXPECT_EQ(h.points("payments.requested", "g3").size(), 1u);
}

TEST(StatusHistory, ManyGroupsStayWithinTheBudget) {
  StatusHistory h;  // 720 points, 8 MiB: about 240 groups
  ManualClock clock(kStart);
  std::vector<HistoryInput> inputs;
  for (int i = 0; i < 400; ++i) inputs.push_back(history_input("group-" + std::to_string(i), i, i));
  for (int s = 0; s < 800; ++s) {
    h.record(clock.now(), inputs);
    clock.advance(Millis(5000));
  }
  EXPECT_LE(h.bytes(), h.limits().max_bytes);
  EXPECT_GT(h.groups(), 100u);
  EXPECT_EQ(h.groups() + h.groups_refused(), 400u);
  EXPECT_EQ(h.points("payments.requested", "group-0").size(), 720u);
}

TEST(StatusHistory, AllThinsEachRingToEvenlySpreadPointsKeepingTheEnds) {
  StatusHistory h;
  ManualClock clock(kStart);
  for (int i = 0; i < 100; ++i) {
    h.record(clock.now(), {history_input("g", i)});
    clock.advance(Millis(5000));
  }
  const std::pair<std::string, std::string> g{"payments.requested", "g"};
  ASSERT_EQ(h.all()[g].size(), 100u);
  auto thin = h.all(10)[g];
  ASSERT_EQ(thin.size(), 10u);
  EXPECT_EQ(thin.front().lag, 0);
  EXPECT_EQ(thin.back().lag, 99);
  for (size_t i = 1; i < thin.size(); ++i) {
    EXPECT_NEAR(thin[i].lag - thin[i - 1].lag, 11, 1) << i;
  }
  EXPECT_EQ(h.all(1000)[g].size(), 100u);
}

TEST(StatusHistory, AWallClockSteppingBackRestartsTheHistory) {
  StatusHistory h;
  ManualClock clock(kStart);
  h.record(clock.now(), {history_input("g", 1)});
  clock.advance(Millis(10'000));
  h.record(clock.now(), {history_input("g", 2)});
  clock.set(kStart - Millis(3'600'000));
  h.record(clock.now(), {history_input("g", 3)});
  auto points = h.points("payments.requested", "g");
  ASSERT_EQ(points.size(), 1u);
  EXPECT_EQ(points[0].lag, 3);
}

TEST(HistoryInputs, MergesTheFleetsLagWithThisHostsCounters) {
  store::FleetStatus fleet;
  store::StreamStatus s;
  s.name = "payments.requested";
  store::GroupStatus a;
  a.name = "a";
  a.lag = 7;
  store::GroupStatus b;
  b.name = "b";
  b.lag = 9;
  s.groups = {a, b};
  fleet.streams.push_back(s);
  GroupSample local;
  local.stream = "payments.requested";
  local.group = "b";
  local[GroupCounter::kSucceeded] = 10;
  local[GroupCounter::kRetried] = 2;
  local[GroupCounter::kDead] = 1;
  GroupSample only_here = local;
  only_here.group = "new";
  auto in = history_inputs(&fleet, true, {local, only_here});
  ASSERT_EQ(in.size(), 3u);
  EXPECT_EQ(in[0].group, "a");
  EXPECT_EQ(in[0].point.lag, 7);
  EXPECT_FALSE(in[0].point.local);
  EXPECT_EQ(in[1].group, "b");
  EXPECT_EQ(in[1].point.lag, 9);
  EXPECT_TRUE(in[1].point.local);
  EXPECT_EQ(in[1].point.succeeded, 10u);
  EXPECT_EQ(in[1].point.retried, 2u);
  EXPECT_EQ(in[1].point.dead, 1u);
  EXPECT_EQ(in[2].group, "new");
  EXPECT_TRUE(std::isnan(in[2].point.lag));
  // A failed read: the last good list of groups, the lag unknown.
  in = history_inputs(&fleet, false, {});
  ASSERT_EQ(in.size(), 2u);
  EXPECT_TRUE(std::isnan(in[0].point.lag));
  EXPECT_TRUE(history_inputs(nullptr, false, {}).empty());
}

HistoryPoint point(int64_t seconds, std::optional<uint64_t> succeeded, double lag = 0) {
  HistoryPoint p;
  p.at = kStart + Millis(seconds * 1000);
  p.lag = lag;
  if (succeeded) {
    p.local = true;
    p.succeeded = *succeeded;
    p.retried = *succeeded / 2;
    p.dead = *succeeded / 10;
  }
  return p;
}

TEST(RateSeries, PerSecondBetweenPoints) {
  auto rates = rate_series({point(0, 0), point(5, 50), point(10, 60)}, HistoryCounter::kSucceeded);
  ASSERT_EQ(rates.size(), 2u);
  EXPECT_EQ(rates[0].t_ms, (kStart + Millis(5000)).time_since_epoch().count());
  EXPECT_DOUBLE_EQ(rates[0].value, 10);
  EXPECT_DOUBLE_EQ(rates[1].value, 2);
  auto retried = rate_series({point(0, 0), point(5, 50)}, HistoryCounter::kRetried);
  EXPECT_DOUBLE_EQ(retried[0].value, 5);
  auto dead = rate_series({point(0, 0), point(5, 50)}, HistoryCounter::kDead);
  EXPECT_DOUBLE_EQ(dead[0].value, 1);
}

TEST(RateSeries, NoRateFromFewerThanTwoPoints) {
  EXPECT_TRUE(rate_series({}, HistoryCounter::kSucceeded).empty());
  EXPECT_TRUE(rate_series({point(0, 5)}, HistoryCounter::kSucceeded).empty());
}

TEST(RateSeries, ACounterResetCountsFromZeroNotANegativeSpike) {
  // The pipeline was re-created between 5 s and 10 s: its counter starts again.
  auto rates =
      rate_series({point(0, 100), point(5, 200), point(10, 30)}, HistoryCounter::kSucceeded);
  ASSERT_EQ(rates.size(), 2u);
  EXPECT_DOUBLE_EQ(rates[1].value, 6);
  for (const auto& r : rates) EXPECT_GE(r.value, 0);
}

TEST(RateSeries, AGroupAddedByAReloadStartsWithoutASpike) {
  // Not run here at 0 s and 5 s (fleet figures only), added by a reload with 40 handled by 10 s.
  auto rates =
      rate_series({point(0, std::nullopt), point(5, std::nullopt), point(10, 40), point(15, 90)},
                  HistoryCounter::kSucceeded);
  ASSERT_EQ(rates.size(), 3u);
  EXPECT_TRUE(std::isnan(rates[0].value));
  EXPECT_TRUE(std::isnan(rates[1].value)) << "no rate from before the group ran here";
  EXPECT_DOUBLE_EQ(rates[2].value, 10);
}

TEST(RateSeries, TimeThatDidNotAdvanceIsAGap) {
  auto rates = rate_series({point(5, 0), point(5, 10)}, HistoryCounter::kSucceeded);
  ASSERT_EQ(rates.size(), 1u);
  EXPECT_TRUE(std::isnan(rates[0].value));
}

TEST(LagSeries, OnePointPerSampleWithGaps) {
  auto lag = lag_series({point(0, 0, 5), point(5, 0, std::nan(""))});
  ASSERT_EQ(lag.size(), 2u);
  EXPECT_EQ(lag[0].value, 5);
  EXPECT_TRUE(std::isnan(lag[1].value));
}

}  // namespace
}  // namespace sqlstreams::ops
