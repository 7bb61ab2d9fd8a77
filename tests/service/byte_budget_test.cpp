// A group's byte budgets (docs/operating/configuration.md#byte-budgets) on a real `sqlstreams run`:
// 300 payments of ~1 MiB each, batch_bytes 4 MiB and queue_bytes 16 MiB, a handler held shut by a
// gate file until the queue has filled. Before the budgets a claim took batch_size messages
// whatever their size, and the group held every claimed range (300 × 1 MiB measured as 634 MB RSS
// in release). Now: the gauge sqlstreams_group_queued_bytes, read throughout, never passes
// queue_bytes, and the host's peak RSS (VmHWM) grows by far less than the 300 MiB the stream holds.
// Every message is still handled. (The gate makes "the queue filled" certain: a handler merely
// slower than the claims was not, on a loaded CI machine — the claims there were slower than the
// handler.)
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <regex>
#include <thread>

#include "service_support.hpp"
#include "test_database.hpp"

namespace sqlstreams::service_test {
namespace {

constexpr int64_t kMiB = 1 << 20;

// A field of /proc/<pid>/status in kB (-1 when unreadable).
int64_t proc_status_kb(pid_t pid, const std::string& field) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(field + ":", 0) == 0) return std::atoll(line.c_str() + field.size() + 1);
  }
  return -1;
}

TEST(ByteBudget, AHostHoldsAtMostQueueBytesOfLargePayloads) {
  testing::TestDatabase db;
  ScratchDir dir;
  const int port = free_tcp_port();
  const std::string gate = dir.path() + "/gate";  // created once the queue has filled
  HostSpec spec;
  spec.http_listen = "127.0.0.1:" + std::to_string(port);
  spec.status_interval = "100ms";
  spec.groups = {GroupSpec{.plugin = "payments_faults.so",
                           .concurrency = 4,
                           .batch_size = 200,
                           .config = "wait_for_file = \"" + gate + "\"\n",
                           .extra = "batch_bytes = 4_194_304\nqueue_bytes = 16_777_216\n"
                                    "queue_ranges = 64\n",
                           .handler_timeout = "10m",  // the gate may stay shut for minutes
                           .lease_ttl = "20m"}};
  // A small ASan quarantine (ignored by other builds): freed payloads must not count as held.
  const char* asan = std::getenv("ASAN_OPTIONS");
  std::string asan_options = std::string(asan ? asan : "") + ":quarantine_size_mb=8";
  HostProcess host(dir, spec, db.url(), {{"ASAN_OPTIONS", asan_options}});
  ASSERT_TRUE(host.wait_for_log("host-ready", 60s)) << tail(host.log());
  ASSERT_TRUE(wait_until([&] { return http_get(port, "/readyz").status == 200; }, 15s))
      << tail(host.log());
  const int64_t baseline_kb = proc_status_kb(host.pid(), "VmHWM");
  ASSERT_GT(baseline_kb, 0);

  // 300 payments with a pad that makes each payload text 1 MiB less a few bytes.
  db.sql(
      "SELECT sqlstreams.produce('payments.requested', jsonb_build_object('order_id', 'order-' "
      "|| g, 'amount_cents', 100, 'currency', 'EUR', 'pad', repeat(md5(g::text), 32760))) FROM "
      "generate_series(1, 300) g");
  const std::string series =
      R"(sqlstreams_group_queued_bytes{stream="payments.requested",group="charge-cards"})";
  int64_t peak = 0;
  int samples = 0;
  const auto sample = [&] {
    const HttpResult page = http_get(port, "/metrics");
    const auto held = static_cast<int64_t>(metric_value(page.body, series));
    if (held >= 0) {
      peak = std::max(peak, held);
      ++samples;
    }
    return held;
  };
  // Gate shut: the claimer fills the queue up to queue_bytes (queue_ranges is set high, so the
  // bytes are the binding limit).
  ASSERT_TRUE(wait_until([&] { return sample() > 12 * kMiB; }, 300s))
      << "the queue never filled: peak " << peak << " B\n"
      << tail(host.log());
  // ... and stops there: nothing more is claimed while the handlers hold the gate.
  const auto plateau_end = std::chrono::steady_clock::now() + 2s;
  const testing::PollingConnections reuse;  // one connection for the polls (tests/support)
  while (std::chrono::steady_clock::now() < plateau_end) {
    sample();
    std::this_thread::sleep_for(50ms);
  }
  EXPECT_EQ(committed(db.url(), "charge-cards"), 0);
  EXPECT_LE(peak, 16 * kMiB) << "the group held more than queue_bytes with every handler blocked";
  // A full group waits for room for its next message, whose size its cut claim read: it does
  // not claim (reading and converting that message's range again) at every poll_interval. The
  // claimer before that claimed every 20 ms here, ~40 claims that took nothing in 2 s, each
  // reading two 1 MiB payloads.
  const auto full_claims = metric_value(
      http_get(port, "/metrics").body,
      R"(sqlstreams_claims_budget_full_total{stream="payments.requested",group="charge-cards"})");
  EXPECT_LE(full_claims, 3) << "claims that found no room while every handler was blocked";
  std::ofstream(gate).put('\n');
  const bool drained = wait_until(
      [&] {
        sample();
        return committed(db.url(), "charge-cards") == 300;
      },
      300s);  // ASan: parsing a 1 MiB payload takes the handler ~0.1 s
  ASSERT_TRUE(drained) << tail(host.log());
  EXPECT_GT(samples, 10);
  EXPECT_LE(peak, 16 * kMiB) << "the group held more than queue_bytes";
  EXPECT_GT(peak, 4 * kMiB) << "the queue filled (the handler is slower than the claims)";
  const int64_t grown_kb = proc_status_kb(host.pid(), "VmHWM") - baseline_kb;
  // Held 16 MiB, a claim's read of 4 MiB (its result and its messages), the handlers' parsed
  // copies, allocator slack (ASan: ~126 MB seen; without the budgets 636 MB): well under the
  // 300 MiB an unbounded claim takes in.
  EXPECT_LT(grown_kb, 256 * 1024) << "peak RSS grew by " << grown_kb << " kB";
  std::cout << "queued_bytes peak " << peak << " B over " << samples << " samples; VmHWM grew "
            << grown_kb << " kB\n";
  EXPECT_EQ(host.stop(testing::kExitBound), std::optional<int>(0)) << tail(host.log());
}

}  // namespace
}  // namespace sqlstreams::service_test
