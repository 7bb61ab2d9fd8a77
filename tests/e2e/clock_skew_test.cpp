// Hosts whose wall clocks disagree by far more than a lease agree on every lease
// (docs/how-it-works.md#clocks): every expiry is set and judged on the database's clock. Each host
// runs under libfaketime (package faketime, scripts/install-deps.sh) shifted by an hour.
// Regression: expiries were `to_timestamp(<host wall clock> + ttl)` compared with another host's
// wall clock, so a host an hour ahead reclaimed every live lease at once (duplicates,
// `lease-lost`), and a host an hour behind left a dead host's leases alone for two hours.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <cstdlib>

#include "e2e_support.hpp"

namespace sqlstreams::e2e {
namespace {

constexpr const char* kFaketime = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1";

// A host whose wall clock (CLOCK_REALTIME) is shifted by `offset` ("+1h", "-1h"); its steady
// clock is left alone. ASan must not insist on coming first in the preload list.
HostOptions skewed(HostOptions o, const std::string& offset) {
  o.env["LD_PRELOAD"] = kFaketime;
  o.env["FAKETIME"] = offset;
  o.env["FAKETIME_DONT_FAKE_MONOTONIC"] = "1";
  const char* asan = std::getenv("ASAN_OPTIONS");
  o.env["ASAN_OPTIONS"] =
      std::string(asan ? asan : "") + (asan && *asan ? ":" : "") + "verify_asan_link_order=0";
  return o;
}

class ClockSkew : public ::testing::Test {
 protected:
  void SetUp() override {
    if (access(kFaketime, R_OK) != 0) {
      GTEST_SKIP() << kFaketime << " is missing: install the `faketime` package "
                   << "(scripts/install-deps.sh) to run the skewed-host tests";
    }
  }
  HostOptions options(const std::string& name) {
    HostOptions o;
    o.name = name;
    o.lease_ttl = "6s";
    o.handler_timeout = "1s";
    o.batch_size = 20;
    o.concurrency = 2;
    o.audit_group = false;
    o.record_file = dir_.file(name + ".records");
    return o;
  }
  testing::TestDatabase db_;
  ScratchDir dir_;
};

TEST_F(ClockSkew, AHostAnHourAheadDoesNotStealTheLiveLeasesOfAHostAnHourBehind) {
  auto so = options("behind");
  so.sleep_ms = 20;  // ~4 s of work in all: leases stay live (renewed) throughout
  Host behind(dir_, skewed(so, "-1h"), db_.url());
  ASSERT_TRUE(behind.wait_for_log("host-ready", 60s)) << behind.log();
  const int64_t n = 400;
  produce_payments(db_.url(), n);
  const std::string leases =
      "SELECT count(*) FROM " + testing::stream_family(db_.url(), kStream).leases;
  ASSERT_TRUE(wait_until([&] { return scalar<int64_t>(db_.url(), leases) > 0; }, 30s));
  auto fo = options("ahead");
  fo.sleep_ms = 20;
  Host ahead(dir_, skewed(fo, "+1h"), db_.url());
  ASSERT_TRUE(ahead.wait_for_log("host-ready", 60s)) << ahead.log();
  wait_drained(db_.url(), 120s);
  auto records = read_records({so.record_file, fo.record_file});
  EXPECT_EQ(missing_ids(records, kCharge, n), "");
  // No repeat but for a call that failed its attempt (timed out on a loaded machine).
  const auto timed_out =
      failed_attempt_ids(behind.log() + ahead.log(), {so.record_file, fo.record_file}, kCharge);
  for (int64_t id : duplicates(records, kCharge)) {
    EXPECT_TRUE(timed_out.count(id) > 0)
        << "message " << id << " ran twice: a live lease was taken over although no host failed";
  }
  EXPECT_EQ(ahead.count_in_log("lease-reclaimed"), 0) << tail(ahead.log());
  EXPECT_EQ(behind.count_in_log("lease-lost"), 0) << tail(behind.log());
  EXPECT_EQ(ahead.stop(testing::kExitBound), std::optional<int>(0)) << tail(ahead.log());
  EXPECT_EQ(behind.stop(testing::kExitBound), std::optional<int>(0)) << tail(behind.log());
}

TEST_F(ClockSkew, AHostAnHourBehindReclaimsTheLeasesOfADeadHostAnHourAhead) {
  auto ko = options("killed-ahead");
  ko.sleep_ms = 500;  // holds its first ranges for seconds
  Host killed(dir_, skewed(ko, "+1h"), db_.url());
  ASSERT_TRUE(killed.wait_for_log("host-ready", 60s)) << killed.log();
  const int64_t n = 60;
  produce_payments(db_.url(), n);
  const std::string held = "SELECT count(*) FROM " +
                           testing::stream_family(db_.url(), kStream).leases + " WHERE holder = '" +
                           killed.holder() + "'";
  ASSERT_TRUE(wait_until([&] { return scalar<int64_t>(db_.url(), held) > 0; }, 30s));
  ASSERT_EQ(::kill(killed.pid(), SIGKILL), 0);
  auto so = options("behind");
  Host behind(dir_, skewed(so, "-1h"), db_.url());
  ASSERT_TRUE(behind.wait_for_log("host-ready", 60s)) << behind.log();
  // The dead host's leases expire 6 s (lease_ttl) after their last renewal, by the database's
  // clock; then `behind` takes them over, whatever its own clock says.
  wait_drained(db_.url(), 60s);
  EXPECT_GT(behind.count_in_log("lease-reclaimed"), 0) << tail(behind.log());
  auto records = read_records({ko.record_file, so.record_file});
  EXPECT_EQ(missing_ids(records, kCharge, n), "");
  EXPECT_EQ(behind.stop(testing::kExitBound), std::optional<int>(0)) << tail(behind.log());
}

}  // namespace
}  // namespace sqlstreams::e2e
