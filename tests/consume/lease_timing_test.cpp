// lease_timing: a lease renewed on time keeps enough left for a message to start until its next
// renewal, for every valid (lease_ttl > handler_timeout) config. Regression
// (docs/design.md#range-leases-and-token-guarded-transitions): renewal every lease_ttl / 3 with a
// start needing handler_timeout + margin left made workers refuse tasks for part of every period
// when lease_ttl < 1.5 × handler_timeout + margin (e.g. 4 s / 2 s, 40 s / 30 s): hand-backs and
// reclaims with no crash.
#include "consume/lease_timing.hpp"

#include <gtest/gtest.h>

namespace sqlstreams::consume {
namespace {

using std::chrono::milliseconds;

void expect_keeps_up(milliseconds ttl, milliseconds timeout) {
  auto t = lease_timing(ttl, timeout);
  SCOPED_TRACE(testing::Message() << "lease_ttl " << ttl.count() << " ms, handler_timeout "
                                  << timeout.count() << " ms");
  EXPECT_GT(t.start_needed, timeout) << "a start keeps a margin for its commit";
  EXPECT_GT(t.renew_every, milliseconds(0));
  // Just before the next renewal, the lease still has start_needed left — with a late
  // renewal of up to one more period tolerated.
  EXPECT_LE(t.start_needed + 2 * t.renew_every, ttl);
}

TEST(LeaseTiming, ConfigsThatUsedToHandWorkBackNowKeepUp) {
  expect_keeps_up(milliseconds(4000), milliseconds(2000));
  expect_keeps_up(milliseconds(40000), milliseconds(30000));
}

TEST(LeaseTiming, EveryValidConfigOnAGridKeepsUp) {
  for (int64_t timeout : {10, 100, 1000, 2000, 5000, 30000, 600000}) {
    for (int64_t extra : {10, 100, 500, 1000, 2000, 10000, 60000}) {
      expect_keeps_up(milliseconds(timeout + extra), milliseconds(timeout));
    }
  }
}

TEST(LeaseTiming, DefaultConfigRenewsTwicePerWindow) {
  auto t = lease_timing(milliseconds(60000), milliseconds(30000));
  EXPECT_EQ(t.start_needed, milliseconds(31000));
  EXPECT_EQ(t.renew_every, milliseconds(14500));
}

}  // namespace
}  // namespace sqlstreams::consume
