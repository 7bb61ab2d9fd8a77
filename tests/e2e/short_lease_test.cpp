// A valid config with a lease barely longer than the handler timeout hands nothing back while
// nothing fails (docs/design.md#range-leases-and-token-guarded-transitions). Regression: with
// lease_ttl 4 s and handler_timeout 2 s the committer renewed every 1.33 s while a start needed 3 s
// left, so for a third of every period workers refused tasks: ranges were handed back and reclaimed
// with no crash. The test runs lease_ttl 12 s and handler_timeout 8 s, with ranges that run 2.5 s
// and wait in the queue: the old period (4 s) leaves a start 1 s of every period with less than
// the 9 s it needs (that period planted back: 34 reclaims), while today's (1.5 s, half the 3-s
// window: consume/lease_timing.hpp) lets a renewal come 1.5 s late. With 4 s / 2 s that slack was
// 0.5 s, and a fresh clone at load ~40 (sanitizers, both lanes) once exceeded it: a late renewal
// made workers hand three ranges back, which the host then reclaimed, as it must.
#include <gtest/gtest.h>

#include "e2e_support.hpp"

namespace sqlstreams::e2e {
namespace {

TEST(ShortLease, LeaseJustAboveTheHandlerTimeoutRunsEverythingOnceWithoutReclaims) {
  testing::TestDatabase db;
  ScratchDir dir;
  HostOptions o;
  o.name = "short-lease";
  o.lease_ttl = "12s";
  o.handler_timeout = "8s";
  o.batch_size = 500;  // a range runs 2.5 s and waits in the queue behind another: well past
                       // a lease's 3-s window unless renewals keep it
  o.concurrency = 2;
  o.sleep_ms = 10;  // ~12.5 s of work per group: spans three of the old renewal periods
  o.record_file = dir.file("calls.records");
  Host host(dir, o, db.url());
  ASSERT_TRUE(host.wait_for_log("host-ready", 60s)) << host.log();
  const int64_t n = 2500;
  produce_payments(db.url(), n);
  wait_drained(db.url(), 120s);
  auto records = read_records({o.record_file});
  EXPECT_EQ(missing_ids(records, kCharge, n), "");
  // No repeat but for a call that failed its attempt (timed out on a loaded machine).
  const auto timed_out = failed_attempt_ids(host.log(), {o.record_file}, kCharge);
  for (int64_t id : duplicates(records, kCharge)) {
    EXPECT_TRUE(timed_out.count(id) > 0) << "message " << id << " ran twice without a failure";
  }
  EXPECT_EQ(host.count_in_log("lease-reclaimed"), 0) << tail(host.log());
  EXPECT_EQ(host.stop(testing::kExitBound), std::optional<int>(0)) << tail(host.log());
}

}  // namespace
}  // namespace sqlstreams::e2e
