// Several hosts on one database (docs/design.md#the-flow-of-one-message,
// docs/design.md#range-leases-and-token-guarded-transitions, docs/design.md#testing): three
// `sqlstreams run` processes share two groups; one is SIGKILLed mid-run. Its range leases expire
// and are reclaimed by the others. Afterwards: nothing is lost (every id handled in every group),
// both cursors reach the head, no lease is left, and the only ids handled twice lie inside ranges
// the killed host held when it died (or ranges a survivor logged as lost).
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <iterator>
#include <optional>

#include "e2e_support.hpp"

namespace sqlstreams::e2e {
namespace {

struct Range {
  std::string group;
  int64_t low = 0;          // exclusive
  int64_t high = 0;         // inclusive
  double seconds_left = 0;  // until the lease expires, by the database's clock
};

std::vector<Range> leases_held_by(const std::string& url, const std::string& holder) {
  std::vector<Range> out;
  const testing::StreamFamily t = testing::stream_family(url, kStream);
  pqxx::connection c(url);
  pqxx::work tx(c);
  for (const auto& r :
       tx.exec_params("SELECT g.name, l.low, l.high, CASE WHEN isfinite(l.expires_at) THEN "
                      "extract(epoch FROM l.expires_at - now())::float8 ELSE -1 END FROM " +
                          t.leases +
                          " l JOIN sqlstreams.groups g ON g.id = l.group_id "
                          "WHERE l.holder = $1",
                      holder)) {
    out.push_back({r[0].as<std::string>(), r[1].as<int64_t>(), r[2].as<int64_t>(),
                   r[3].is_null() ? 0.0 : r[3].as<double>()});
  }
  return out;
}

bool holds_both_groups(const std::vector<Range>& ranges) {
  bool charge = false, audit = false;
  for (const auto& r : ranges) {
    charge |= r.group == kCharge;
    audit |= r.group == kAudit;
  }
  return charge && audit;
}

// Ranges whose outcomes a host discarded because another host had reclaimed the lease
// ("lease-lost stream=S group=G low=L high=H: ...").
std::vector<Range> lost_ranges(const std::string& log) {
  std::vector<Range> out;
  auto field = [&](size_t from, const std::string& key) {
    size_t at = log.find(" " + key + "=", from);
    if (at == std::string::npos) return std::string();
    at += key.size() + 2;
    return log.substr(at, log.find_first_of(" :\"\n", at) - at);
  };
  for (size_t pos = log.find("lease-lost "); pos != std::string::npos;
       pos = log.find("lease-lost ", pos + 1)) {
    out.push_back(
        {field(pos, "group"), std::stoll(field(pos, "low")), std::stoll(field(pos, "high"))});
  }
  return out;
}

TEST(MultiHost, SigkillOfOneHostLosesNothingAndRepeatsOnlyItsRanges) {
  testing::TestDatabase db;
  ScratchDir dir;
  const int64_t n = 50000;
  std::vector<std::unique_ptr<Host>> hosts;
  std::vector<std::string> record_files;
  for (const char* name : {"host-a", "host-b", "host-c"}) {
    HostOptions o;
    o.name = name;
    o.record_file = dir.file(std::string(name) + ".records");
    // Enough per-message work that all three hosts share it. The victim (host-c) works 25 times
    // slower: each range it claims stays half-done for over a second, so the freeze below finds
    // one at once however slow the machine is, and the run cannot drain around it first (at the
    // same speed as the others, a loaded CI machine once let the whole run end between samples).
    o.sleep_ms = std::string(name) == "host-c" ? 25 : 1;
    // The looks below freeze the victim (SIGSTOP … SIGCONT) while its calls run: with the 1 s
    // default a look of over a second on a loaded machine timed its call out, and the retry of
    // that call's batch ran elsewhere as attempt 2 (a fresh clone at load 40: ids 15212-15215,
    // only 15215 named in its handler-timeout line). Its lease (6 s) still bounds a freeze.
    if (std::string(name) == "host-c") o.handler_timeout = "4s";
    o.batch_size = 200;
    o.lease_ttl = "6s";
    record_files.push_back(o.record_file);
    // Started together on an empty database: concurrent migrate + declare must be safe.
    hosts.push_back(std::make_unique<Host>(dir, o, db.url()));
  }
  for (auto& h : hosts) ASSERT_TRUE(h->wait_for_log("host-ready", 60s)) << tail(h->log());
  produce_payments(db.url(), n);

  Host& victim = *hosts[2];
  const std::string victim_records = victim.options().record_file;
  // Freeze the victim (SIGSTOP) to read its leases and records consistently; kill it only when
  // it holds ranges in both groups and has handled part, not all, of one of them — so the
  // reclaim must re-run work it had started. Otherwise let it run on and look again.
  std::vector<Range> held;
  std::optional<Range> partial;
  // Every host's records the moment the victim was found frozen mid-range, before the kill (a
  // read after it races the survivors, who reclaim once the lease's 3 s are up).
  decltype(read_records(record_files)) at_kill;
  std::string last_look = "the victim never handled 20 messages of each group";
  ASSERT_TRUE(wait_until(
      [&] {
        if (count_calls(victim_records, kCharge) < 20 || count_calls(victim_records, kAudit) < 20) {
          return false;
        }
        victim.process().signal(SIGSTOP);
        held = leases_held_by(db.url(), victim.holder());
        auto mine = read_records({victim_records});
        for (const auto& r : held) {
          const auto& ids = mine[r.group];
          auto done = std::distance(ids.upper_bound(r.low), ids.upper_bound(r.high));
          // Only a lease with time left: a victim starved on a loaded machine may hold a lease
          // that is about to expire, and the survivors would reclaim and finish that range
          // before the kill (CI once saw the whole run end that way).
          if (done > 0 && done < r.high - r.low && r.seconds_left >= 3) partial = r;
        }
        if (partial && holds_both_groups(held)) {
          at_kill = read_records(record_files);
          return true;
        }
        last_look = std::to_string(held.size()) + " leases held, none half-done in both groups:";
        for (const auto& r : held) {
          last_look +=
              " " + r.group + " (" + std::to_string(r.low) + ", " + std::to_string(r.high) + "]";
        }
        partial.reset();
        victim.process().signal(SIGCONT);
        return false;
      },
      120s, 100ms))
      << "last look: " << last_look << "\n"
      << tail(victim.log());
  victim.process().signal(SIGKILL);
  ASSERT_TRUE(victim.process().wait(10s).has_value());
  // What it held when it died: while it was frozen, a commit it had already sent may still have
  // removed a lease (that range is done) and a claim it had sent may have added one (never run).
  for (const auto& r : leases_held_by(db.url(), victim.holder())) held.push_back(r);
  // The premise: the group of the half-done range had not handled every message when the victim
  // froze. Only that group: the other may have ended by then (a fresh-clone run of 120d0c9 at
  // load 40 froze the victim with every charge handled, its charge lease done but uncommitted,
  // and this check, then on charges, failed a correct run). Distinct ids: the calls may already
  // include repeats (a range lost while frozen).
  ASSERT_TRUE(partial.has_value());
  EXPECT_LT(at_kill[partial->group].size(), static_cast<size_t>(n))
      << "frozen after " << partial->group << " ended";

  wait_drained(db.url(), 180s);
  EXPECT_EQ(head(db.url()), n);
  auto records = read_records(record_files);
  std::string survivor_logs = hosts[0]->log() + hosts[1]->log();
  std::vector<Range> allowed = held;
  // Ranges any host logged as lost run again elsewhere, the victim's too: frozen by the looks
  // above on a loaded machine, it once lost (2200, 2400] before the kill (CI, 2026-12-07: host-a
  // reclaimed it, and ids 2201-2240, which the victim had handled, ran twice).
  for (const auto& r : lost_ranges(survivor_logs + victim.log())) allowed.push_back(r);
  for (const char* group : {kCharge, kAudit}) {
    EXPECT_EQ(missing_ids(records, group, n), "") << group;
    std::string unexplained;
    auto dups = duplicates(records, group);
    // A call a survivor logged as timed out runs again too (a 1 s handler_timeout on a loaded
    // machine: two survivors' calls went past it in one CI run).
    const auto timed_out = failed_attempt_ids(survivor_logs, record_files, group);
    for (int64_t id : dups) {
      bool ok = timed_out.count(id) > 0 ||
                std::any_of(allowed.begin(), allowed.end(), [&](const Range& r) {
                  return r.group == group && id > r.low && id <= r.high;
                });
      if (!ok && unexplained.size() < 200) unexplained += std::to_string(id) + " ";
    }
    EXPECT_EQ(unexplained, "") << group << ": ids handled twice outside the killed host's ranges";
    if (partial->group == group) {
      EXPECT_FALSE(dups.empty()) << group << ": the half-done range (" << partial->low << ", "
                                 << partial->high << "] must run again elsewhere";
    }
    std::printf("%s: %zu calls for %lld messages, %zu ids handled twice\n", group,
                calls(records, group), static_cast<long long>(n), dups.size());
    for (const auto& file : record_files) {
      EXPECT_GT(count_calls(file, group), 0u) << file << " did no " << group << " work";
    }
  }
  EXPECT_NE(survivor_logs.find("lease-reclaimed"), std::string::npos)
      << "the killed host's ranges are reclaimed by the survivors";
  EXPECT_EQ(scalar<int64_t>(db.url(), "SELECT count(*) FROM " +
                                          testing::stream_family(db.url(), kStream).exceptions),
            0);
  for (int i = 0; i < 2; ++i) {
    auto code = hosts[i]->stop(testing::kExitBound);
    ASSERT_TRUE(code.has_value()) << tail(hosts[i]->log());
    EXPECT_EQ(*code, 0) << tail(hosts[i]->log());
  }
}

}  // namespace
}  // namespace sqlstreams::e2e
