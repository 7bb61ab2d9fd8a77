// OutageBackoff (common/outage_backoff) as tables: the doubling, the cap, one log line per
// outage, one recovery line, a reset after success.
#include "common/outage_backoff.hpp"

#include <gtest/gtest.h>

#include <vector>

namespace sqlstreams {
namespace {

using std::chrono::milliseconds;

// 'F' = a failed attempt, 'S' = a successful one; per step what the loop is told.
struct Expect {
  char event;
  int64_t delay_ms;  // for 'F'
  bool log;          // 'F': log the outage now; 'S': log the recovery now
};

void run(OutageBackoff& b, const std::vector<Expect>& steps) {
  for (size_t i = 0; i < steps.size(); ++i) {
    SCOPED_TRACE(testing::Message() << "step " << i << " '" << steps[i].event << "'");
    if (steps[i].event == 'F') {
      auto step = b.on_failure();
      EXPECT_EQ(step.delay.count(), steps[i].delay_ms);
      EXPECT_EQ(step.log_now, steps[i].log);
      EXPECT_TRUE(b.down());
    } else {
      EXPECT_EQ(b.on_success(), steps[i].log);
      EXPECT_FALSE(b.down());
    }
  }
}

TEST(OutageBackoff, DoublesUpToTheCapAndLogsOncePerOutage) {
  OutageBackoff b(milliseconds(100), milliseconds(5000));
  run(b, {{'F', 100, true},
          {'F', 200, false},
          {'F', 400, false},
          {'F', 800, false},
          {'F', 1600, false},
          {'F', 3200, false},
          {'F', 5000, false},
          {'F', 5000, false}});
}

TEST(OutageBackoff, LogsTheRecoveryOnceAndResetsTheDelay) {
  OutageBackoff b(milliseconds(10), milliseconds(5000));
  run(b, {{'S', 0, false},  // no outage yet: nothing to log
          {'F', 10, true},
          {'F', 20, false},
          {'F', 40, false},
          {'S', 0, true},   // the outage ends
          {'S', 0, false},  // and is not logged again
          {'F', 10, true},  // a new outage: logged again, from the initial delay
          {'S', 0, true}});
}

TEST(OutageBackoff, EqualInitialAndCapIsAConstantDelay) {
  OutageBackoff b(milliseconds(500), milliseconds(500));
  run(b, {{'F', 500, true}, {'F', 500, false}, {'F', 500, false}, {'S', 0, true}});
}

TEST(OutageBackoff, AnInitialDelayAboveTheCapIsUsedOnceThenTheCap) {
  // As the loops always did: a poll_interval longer than the 5 s cap waits one poll_interval.
  OutageBackoff b(milliseconds(8000), milliseconds(5000));
  run(b, {{'F', 8000, true}, {'F', 5000, false}, {'S', 0, true}, {'F', 8000, true}});
}

TEST(OutageBackoff, NextDelayShowsWhatTheNextFailureWaits) {
  OutageBackoff b(milliseconds(100), milliseconds(300));
  EXPECT_EQ(b.next_delay(), milliseconds(100));
  (void)b.on_failure();
  EXPECT_EQ(b.next_delay(), milliseconds(200));
  (void)b.on_failure();
  EXPECT_EQ(b.next_delay(), milliseconds(300));
  (void)b.on_success();
  EXPECT_EQ(b.next_delay(), milliseconds(100));
}

}  // namespace
}  // namespace sqlstreams
