// A lost database (docs/design.md#signals-reload-and-a-lost-database,
// docs/design.md#errors-and-trust): PostgreSQL is crash-restarted (pg_ctl -m immediate) under two
// busy hosts. Each host logs the outage once per loop (not a flood), reconnects by itself and goes
// on; in-flight outcomes are retried or left to lease expiry, so every message is still handled at
// least once in every group. Runs on its own PostgreSQL cluster so the shared test cluster is not
// disturbed.
#include <gtest/gtest.h>

#include <map>
#include <sstream>

#include "e2e_support.hpp"

namespace sqlstreams::e2e {
namespace {

// Lines naming a "...database-unavailable" event, by loop (the message up to its first ':',
// e.g. "database-unavailable stream=S group=G kind=connection").
std::map<std::string, int> outage_lines_per_loop(const std::string& log) {
  std::map<std::string, int> out;
  std::istringstream lines(log);
  std::string line;
  while (std::getline(lines, line)) {
    auto msg = line.find("\"msg\":\"");
    if (msg == std::string::npos || line.find("database-unavailable", msg) == std::string::npos) {
      continue;
    }
    msg += 7;
    out[line.substr(msg, line.find(':', msg) - msg)]++;
  }
  return out;
}

TEST(DatabaseRestart, HostsLogTheOutageOnceReconnectAndLoseNothing) {
  OwnCluster pg;
  ScratchDir dir;
  const int64_t n = 20000;
  std::vector<std::unique_ptr<Host>> hosts;
  std::vector<std::string> record_files;
  for (const char* name : {"restart-a", "restart-b"}) {
    HostOptions o;
    o.name = name;
    o.record_file = dir.file(std::string(name) + ".records");
    o.sleep_ms = 2;
    o.env["LSAN_OPTIONS"] = lsan_options_for_lost_connections();  // libpqxx 6.4, see lsan.supp
    record_files.push_back(o.record_file);
    hosts.push_back(std::make_unique<Host>(dir, o, pg.url()));
    ASSERT_TRUE(hosts.back()->wait_for_log("host-ready", 60s)) << tail(hosts.back()->log());
  }
  produce_payments(pg.url(), n);
  auto charged = [&] {
    return count_calls(record_files[0], kCharge) + count_calls(record_files[1], kCharge);
  };
  ASSERT_TRUE(wait_until([&] { return charged() >= 3000; }, 120s)) << tail(hosts[0]->log());

  auto [code, out] = pg.restart_immediate();
  ASSERT_EQ(code, 0) << out;
  EXPECT_LT(charged(), static_cast<size_t>(n)) << "the restart should land mid-work";

  wait_drained(pg.url(), 180s);
  auto records = read_records(record_files);
  for (const char* group : {kCharge, kAudit}) {
    EXPECT_EQ(missing_ids(records, group, n), "") << group;
  }
  for (auto& h : hosts) {
    ASSERT_TRUE(h->process().running()) << "a lost database must not end the host:\n"
                                        << tail(h->log());
    std::string log = h->log();
    auto outages = outage_lines_per_loop(log);
    EXPECT_FALSE(outages.empty()) << "the outage is logged:\n" << tail(log);
    for (const auto& [loop, lines] : outages) {
      EXPECT_EQ(lines, 1) << "once per loop, not a flood: " << loop << "\n" << tail(log, 60);
    }
    EXPECT_GE(count_of(log, "database-reconnected"), 1) << tail(log);
    EXPECT_LE(count_of(log, "\"level\":\"error\""), 20) << tail(log, 60);
    // A hang's bound, not the stop's speed (shutdown_timeout is 10 s): in a fresh-clone run on a
    // loaded machine a host was still there after 30 s (2026-12-06); ASan's leak check at exit
    // alone took 19 s at load 43 (CONTRIBUTING.md). stop() prints the threads of a host that
    // does not stop.
    auto stopped = h->stop(90s);
    ASSERT_TRUE(stopped.has_value()) << tail(h->log());
    EXPECT_EQ(*stopped, 0) << tail(h->log());
  }
}

}  // namespace
}  // namespace sqlstreams::e2e
