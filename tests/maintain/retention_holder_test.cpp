// Who holds retention back (docs/operating/retention.md#who-holds-retention-back), against a real
// PostgreSQL: a group no running config mentions (a once-declared typo) keeps every partition; the
// janitor's report and `status` name it with its position and "never seen", a heartbeat marks the
// groups a host runs as seen, and once the group is dropped the janitor's run_once drops the
// partitions it held.
#include "maintain_fixture.hpp"
#include "process.hpp"
#include "store/fleet/worker_leases.hpp"
#include "store/reporting/group_lifecycle.hpp"
#include "store/reporting/status.hpp"

namespace sqlstreams::testing {
namespace {

class RetentionHolderTest : public MaintainTest {
 protected:
  store::JanitorReport pass() {
    store::StreamJanitor janitor(*session_, stream_.id);
    auto report = janitor.run_once(now_, store::JanitorSettings{});
    EXPECT_TRUE(report.errors.empty()) << report.errors.front();
    return report;
  }
};

TEST_F(RetentionHolderTest, AnUnseenGroupIsNamedAndDroppingItReleasesRetention) {
  // Partitions of 2 ids; messages 1..8 are past the 30-day retention; charge-cards (run by a
  // host) committed everything, audit-payments plays the typo group nobody runs.
  store::ensure_partitions(*session_, stream_.id, 40);  // ids 1..8 in one batch, no heal
  ASSERT_EQ(produce(8), 8);
  age(1, 8, 31);
  set_committed(charge_, 8);
  store::HostInfo host{"h", 1, "test", now_};
  const int64_t host_id = store::register_host(*session_, host, Millis(15'000));
  store::heartbeat_host(*session_, host_id, host, Millis(15'000), "", {charge_.id});

  auto kept = pass();
  EXPECT_TRUE(kept.dropped.empty());
  ASSERT_TRUE(kept.held_by.has_value()) << kept.kept_because;
  EXPECT_EQ(kept.held_by->group, "audit-payments");
  EXPECT_EQ(kept.held_by->committed, 0);
  EXPECT_EQ(kept.held_by->needs, 2);
  EXPECT_FALSE(kept.held_by->last_seen.has_value());
  EXPECT_NE(kept.kept_because.find("group 'audit-payments' has not committed through id 2 "
                                   "(committed 0, never seen by a running host)"),
            std::string::npos)
      << kept.kept_because;

  auto fleet = store::read_status(*session_, now_);
  ASSERT_EQ(fleet.streams.size(), 1u);
  const auto& st = fleet.streams[0];
  ASSERT_TRUE(st.retention_held_by.has_value());
  EXPECT_EQ(st.retention_held_by->group, "audit-payments");
  EXPECT_EQ(st.retention_held_by->committed, 0);
  EXPECT_EQ(st.retention_held_by->needs, 2);
  EXPECT_FALSE(st.retention_held_by->seen_recently);
  for (const auto& g : st.groups) {
    EXPECT_EQ(g.seen_recently, g.name == "charge-cards") << g.name;
    EXPECT_EQ(g.last_seen_at.has_value(), g.name == "charge-cards") << g.name;
  }

  store::pause_group(*session_, audit_, "cli:op@box");
  auto paused = store::read_status(*session_, now_).streams[0];
  ASSERT_TRUE(paused.retention_held_by.has_value());
  EXPECT_TRUE(paused.retention_held_by->paused);
  for (const auto& g : paused.groups) {
    EXPECT_EQ(g.paused_at.has_value(), g.name == "audit-payments") << g.name;
    if (g.paused_at) {
      EXPECT_EQ(g.paused_by, "cli:op@box");
    }
  }

  store::drop_group(*session_, audit_, "cli:op@box");
  auto released = pass();
  EXPECT_FALSE(released.held_by.has_value()) << released.kept_because;
  ASSERT_GE(released.dropped.size(), 3u) << released.kept_because;
  EXPECT_EQ(released.dropped[0].partition.table, family_.partition_name(0));
  EXPECT_FALSE(table_exists(family_.partition(0)));
  EXPECT_FALSE(table_exists(family_.partition(2)));
  EXPECT_FALSE(store::read_status(*session_, now_).streams[0].retention_held_by.has_value());
}

// Regression (docs/operating/retention.md#retention-and-maintenance): `status` showed a dead host's
// lease only as "leases 1" (and lag) for as long as the lease lived, without saying whose it was or
// when it would be reclaimed.
TEST_F(RetentionHolderTest, LeasesOfStoppedHostsAreNamedWithWhenTheyExpire) {
  store::HostInfo host{"h", 1, "test", now_};
  const int64_t host_id = store::register_host(*session_, host, Millis(15'000));
  store::heartbeat_host(*session_, host_id, host, Millis(15'000), "", {charge_.id});
  const std::string g = std::to_string(charge_.id);
  db_.sql("INSERT INTO " + family_.leases +
          " (group_id, token, low, high, expires_at, holder) VALUES (" + g +
          ", gen_random_uuid(), 1, 4, now() + interval '40 s', 'gone-host:99'), (" + g +
          ", gen_random_uuid(), 5, 8, now() + interval '40 s', 'h:1'), (" + g +
          ", gen_random_uuid(), 9, 10, now() - interval '5 s', 'gone-host:99'), (" + g +
          ", gen_random_uuid(), 11, 12, '-infinity', 'gone-host:99')");
  auto fleet = store::read_status(*session_, now_);
  ASSERT_EQ(fleet.streams.size(), 1u);
  const store::GroupStatus* charge = nullptr;
  for (const auto& gs : fleet.streams[0].groups) {
    if (gs.id == charge_.id) charge = &gs;
  }
  ASSERT_NE(charge, nullptr);
  // The handed-back one (11..12, expires_at '-infinity') once failed the whole status query
  // ("cannot subtract infinite timestamps").
  ASSERT_EQ(charge->orphan_leases.size(), 3u) << "the live host's lease (5..8) is not listed";
  EXPECT_EQ(charge->orphan_leases[2].low, 11);
  EXPECT_TRUE(charge->orphan_leases[2].handed_back);
  EXPECT_FALSE(charge->orphan_leases[1].handed_back);
  EXPECT_EQ(charge->orphan_leases[0].holder, "gone-host:99");
  EXPECT_EQ(charge->orphan_leases[0].low, 1);
  EXPECT_EQ(charge->orphan_leases[0].high, 4);
  EXPECT_GT(charge->orphan_leases[0].expires_in, Millis(30'000));
  EXPECT_LE(charge->orphan_leases[0].expires_in, Millis(40'000));
  EXPECT_EQ(charge->orphan_leases[1].low, 9);
  EXPECT_LE(charge->orphan_leases[1].expires_in, Millis(-4'000));

  auto [code, text] = run_command({SQLSTREAMS_BINARY, "status", "--database-url", db_.url()});
  ASSERT_EQ(code, 0) << text;
  EXPECT_NE(text.find("lease of a stopped host: charge-cards ids 1..4 held by gone-host:99 (no "
                      "live host); expires in "),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("lease of a stopped host: charge-cards ids 9..10 held by gone-host:99 (no "
                      "live host); expired "),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("ids 11..12 held by gone-host:99 (no live host); handed back: the next "
                      "claim of a running host reclaims it"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("ids 5..8"), std::string::npos) << text;
  auto [jcode, json_text] =
      run_command({SQLSTREAMS_BINARY, "status", "--json", "--database-url", db_.url()});
  ASSERT_EQ(jcode, 0) << json_text;
  EXPECT_NE(json_text.find("\"leases_of_stopped_hosts\""), std::string::npos) << json_text;
  EXPECT_NE(json_text.find("\"holder\": \"gone-host:99\""), std::string::npos) << json_text;
}

}  // namespace
}  // namespace sqlstreams::testing
