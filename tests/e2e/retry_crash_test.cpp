// A host SIGKILLed while running a retry: the unfinished attempt is counted, and the message
// still ends succeeded (budget left) or dead (budget spent) — never stuck in flight.
#include <gtest/gtest.h>
#include <signal.h>

#include "e2e_support.hpp"

namespace sqlstreams::e2e {
namespace {

struct RetryCrash : ::testing::TestWithParam<int> {};

TEST_P(RetryCrash, KilledDuringARetryTheAttemptCountsAndTheMessageEndsResolved) {
  const int max_retries = GetParam();
  testing::TestDatabase db;
  ScratchDir dir;
  const std::string retry = "max_retries = " + std::to_string(max_retries) +
                            "\ninitial_backoff = \"200ms\"\nbase_delay = \"100ms\"\n";
  // 1. The provider is unreachable for order-1: the first attempt fails, a retry is scheduled.
  HostOptions first;
  first.name = "first";
  first.audit_group = false;
  first.record_file = dir.file("first.records");
  first.charge_config = "unreachable_orders = [\"order-1\"]\n";
  first.charge_retry =
      "max_retries = " + std::to_string(max_retries) + "\ninitial_backoff = \"1h\"\n";
  testing::StreamFamily t;
  {
    Host h(dir, first, db.url());
    ASSERT_TRUE(h.wait_for_log("host-ready", 60s)) << tail(h.log());
    t = testing::stream_family(db, kStream);  // the host declared it
    produce_payments(db.url(), 1);
    ASSERT_TRUE(wait_until(
        [&] {
          return scalar<int>(db.url(), "SELECT count(*) FROM " + t.exceptions +
                                           " WHERE attempts = 1 AND status = 'ready'") == 1;
        },
        30s))
        << tail(h.log());
    // 90 s: a hang's bound (a sanitized host's exit includes the leak check, slow under load).
    ASSERT_EQ(h.stop(90s), std::optional<int>(0));
  }
  query(db.url(), "UPDATE " + t.exceptions + " SET can_run_after = now()");  // due now
  // 2. A host whose retry hangs is SIGKILLed while the row is in flight under its lease.
  HostOptions doomed = first;
  doomed.charge_retry = retry;
  doomed.name = "doomed";
  doomed.record_file = dir.file("doomed.records");
  doomed.charge_config = "hang_orders = [\"order-1\"]\nhang_ms = 60000\n";
  // The kill must land while the attempt runs: between its start and handler_timeout, when the
  // attempt is failed and (max_retries 1) the row dead, so 'inflight' is never seen again. With
  // 2 s (lease 3 s) a loaded CI machine missed that window; 8 s leaves room for a slow poll and
  // a late renewal, and the healthy host still takes over within one lease (12 s) of the kill.
  doomed.handler_timeout = "8s";
  doomed.lease_ttl = "12s";
  {
    Host h(dir, doomed, db.url());
    ASSERT_TRUE(h.wait_for_log("host-ready", 60s)) << tail(h.log());
    ASSERT_TRUE(wait_until(
        [&] {
          return scalar<int>(db.url(), "SELECT count(*) FROM " + t.exceptions +
                                           " WHERE status = 'inflight'") == 1;
        },
        60s))
        << tail(h.log());
    h.process().signal(SIGKILL);
    ASSERT_TRUE(h.process().wait(10s).has_value());
  }
  // 3. A healthy host takes the row over once its lease expires.
  HostOptions healthy = first;
  healthy.name = "healthy";
  healthy.record_file = dir.file("healthy.records");
  healthy.charge_config = "";
  healthy.charge_retry = retry;
  Host h(dir, healthy, db.url());
  ASSERT_TRUE(wait_until(
      [&] {
        return scalar<int>(db.url(),
                           "SELECT count(*) FROM " + t.exceptions + " WHERE status <> 'dead'") == 0;
      },
      90s))  // host start + the doomed lease (12 s)
      << tail(h.log());
  EXPECT_GE(h.count_in_log("retry-lease-expired"), 1) << tail(h.log());
  auto records = read_records({healthy.record_file});
  if (max_retries >= 2) {
    // attempt 1 failed, attempt 2 died with its host (counted), attempt 3 succeeds
    EXPECT_EQ(scalar<int>(db.url(), "SELECT count(*) FROM " + t.exceptions), 0);
    EXPECT_EQ(records[kCharge][1], 1) << "the healthy host ran it once";
    EXPECT_EQ(count_of(h.log(), "dead-lettered"), 0);
  } else {
    // max_retries 1: the crashed attempt was the last one the budget allowed: dead, not rerun
    auto row = query(
        db.url(), "SELECT status, attempts, last_error, payload->>'order_id' FROM " + t.exceptions);
    ASSERT_EQ(row.size(), 1u);
    EXPECT_EQ(row[0][0].as<std::string>(), "dead");
    EXPECT_EQ(row[0][1].as<int>(), 2);
    EXPECT_NE(row[0][2].as<std::string>().find("its host stopped while running it"),
              std::string::npos);
    EXPECT_EQ(row[0][3].as<std::string>(), "order-1");
    EXPECT_EQ(records[kCharge].count(1), 0u) << "a spent budget is not run again";
  }
  EXPECT_EQ(h.stop(90s), std::optional<int>(0));
}

INSTANTIATE_TEST_SUITE_P(Budgets, RetryCrash, ::testing::Values(3, 1));

}  // namespace
}  // namespace sqlstreams::e2e
