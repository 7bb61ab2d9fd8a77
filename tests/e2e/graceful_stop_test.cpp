// SIGTERM (docs/design.md#signals-reload-and-a-lost-database,
// docs/design.md#range-leases-and-token-guarded-transitions): stop claiming, finish in-flight
// handlers, commit resolved prefixes, hand the rest back (immediately reclaimable), exit 0 within
// shutdown_timeout. A second signal during the drain exits at once; a handler that outlives
// shutdown_timeout does not keep the host alive.
#include <gtest/gtest.h>
#include <signal.h>

#include <fstream>

#include "e2e_support.hpp"

namespace sqlstreams::e2e {
namespace {

using SteadyClock = std::chrono::steady_clock;

// Leases that are neither handed back ('-infinity') nor deleted.
int64_t live_leases(const std::string& url) {
  return scalar<int64_t>(url, "SELECT count(*) FROM " +
                                  testing::stream_family(url, kStream).leases +
                                  " WHERE expires_at <> '-infinity'");
}

TEST(GracefulStop, SigtermWhileBusyDrainsExitsZeroAndAFreshHostFinishesTheRest) {
  testing::TestDatabase db;
  ScratchDir dir;
  const int64_t n = 4000;
  HostOptions busy;
  busy.name = "busy";
  busy.record_file = dir.file("handled.records");
  busy.sleep_ms = 5;  // 4 workers per group: ~800 messages/s, so the signal lands mid-work
  busy.batch_size = 100;
  busy.shutdown_timeout = "10s";
  // Only the stop may make a message run twice here. With the e2e default (1 s) a loaded CI
  // machine timed out 15 calls of the finisher's no-op handler; each was retried, so it ran twice.
  busy.handler_timeout = "30s";
  busy.lease_ttl = "40s";  // more than the handler timeout and its margin; nothing waits for it
  Host host(dir, busy, db.url());
  ASSERT_TRUE(host.wait_for_log("host-ready", 60s)) << host.log();
  produce_payments(db.url(), n);
  ASSERT_TRUE(wait_until([&] { return count_calls(busy.record_file, kCharge) >= 300; }, 60s))
      << tail(host.log());

  auto code = host.stop(60s);  // the drain's bound is checked below, by the host's log
  ASSERT_TRUE(code.has_value()) << "still running 60 s after SIGTERM:\n" << tail(host.log());
  EXPECT_EQ(*code, 0) << tail(host.log());
  const double drain = logged_seconds_between(host.log(), "host-draining", "host-stopped");
  EXPECT_GE(drain, 0) << "host-draining and host-stopped are logged\n" << tail(host.log());
  EXPECT_LT(drain, 10.0) << "nothing was stuck, the drain should not need the whole timeout";
  auto at_stop = read_records({busy.record_file});
  EXPECT_LT(calls(at_stop, kCharge), static_cast<size_t>(n)) << "the signal should land mid-work";
  EXPECT_EQ(live_leases(db.url()), 0) << "unfinished ranges are handed back, not left to expire";

  HostOptions rest = busy;
  rest.name = "finisher";
  rest.sleep_ms = 0;
  Host finisher(dir, rest, db.url());
  wait_drained(db.url(), 120s);
  auto code2 = finisher.stop(testing::kExitBound);
  ASSERT_TRUE(code2.has_value());
  EXPECT_EQ(*code2, 0) << tail(finisher.log());

  auto records = read_records({busy.record_file});
  for (const char* group : {kCharge, kAudit}) {
    EXPECT_EQ(missing_ids(records, group, n), "") << group;
    // Workers take messages in claim order, so what a drain finished is a prefix of each
    // range and is committed: the finisher re-runs (almost) nothing.
    auto dups = duplicates(records, group);
    EXPECT_LE(dups.size(), 8u) << group << ": " << dups.size() << " ids handled twice";
  }
}

HostOptions hung_host(const ScratchDir& dir, const std::string& shutdown_timeout) {
  HostOptions o;
  o.name = "hung";
  o.audit_group = false;
  o.record_file = dir.file("handled.records");
  o.shutdown_timeout = shutdown_timeout;
  o.charge_config = "hang_orders = [\"order-1\"]\nhang_ms = 600000\n";
  // Long enough that the handler-timeout watchdog never writes the hung handler off first.
  o.lease_ttl = "120s";
  o.handler_timeout = "60s";
  return o;
}

// Starts a host whose handler hangs on order-1 and waits until the other 9 messages are done.
void start_hung(Host& host, const testing::TestDatabase& db) {
  ASSERT_TRUE(host.wait_for_log("host-ready", 60s)) << host.log();
  produce_payments(db.url(), 10);
  ASSERT_TRUE(
      wait_until([&] { return count_calls(host.options().record_file, kCharge) >= 9; }, 60s))
      << tail(host.log());
}

TEST(GracefulStop, SecondSigtermDuringDrainExitsAtOnce) {
  testing::TestDatabase db;
  ScratchDir dir;
  Host host(dir, hung_host(dir, "60s"), db.url());
  ASSERT_NO_FATAL_FAILURE(start_hung(host, db));

  host.process().signal(SIGTERM);
  ASSERT_TRUE(host.wait_for_log("host-draining", 60s)) << tail(host.log());
  EXPECT_FALSE(host.process().wait(500ms).has_value())
      << "the drain waits for the hung handler (shutdown_timeout 60s)";

  auto second = SteadyClock::now();
  host.process().signal(SIGTERM);
  auto code = host.process().wait(30s);
  double took = seconds_since(second);
  ASSERT_TRUE(code.has_value()) << "a second SIGTERM must end the host:\n" << tail(host.log());
  // Well inside the 60-s drain it would otherwise wait for (2.7 s on a slow machine beside the
  // suite, 2026-12-06: the bound was 2 s); what is tested is "not after the drain".
  EXPECT_LT(took, 20.0);
  EXPECT_LT(*code, 128) << "the host exits by itself, it is not killed by the signal";
  EXPECT_NE(host.log().find("host-exit-now"), std::string::npos) << tail(host.log());
}

TEST(GracefulStop, HungHandlerDoesNotOutliveShutdownTimeout) {
  testing::TestDatabase db;
  ScratchDir dir;
  Host host(dir, hung_host(dir, "2s"), db.url());
  ASSERT_NO_FATAL_FAILURE(start_hung(host, db));

  auto signalled = SteadyClock::now();
  auto code = host.stop(45s);
  double took = seconds_since(signalled);
  ASSERT_TRUE(code.has_value()) << "still running 45 s after SIGTERM:\n" << tail(host.log());
  EXPECT_EQ(*code, 0) << tail(host.log());
  EXPECT_GE(took, 1.5) << "it waits for the handler up to shutdown_timeout";
  // What is tested is "not until the handler returns" (600 s) nor "until the handler timeout
  // writes it off" (60 s): 2 s of drain plus a sanitized host's exit, which took 8.8 s on a
  // loaded CI machine (2026-12-07; the bound was 8 s).
  EXPECT_LT(took, 30.0);
  EXPECT_NE(host.log().find("drain-timeout"), std::string::npos) << tail(host.log());
  EXPECT_NE(host.log().find("host-stopped"), std::string::npos) << tail(host.log());
  EXPECT_EQ(live_leases(db.url()), 0) << "the hung message's range is handed back";
}

}  // namespace
}  // namespace sqlstreams::e2e
