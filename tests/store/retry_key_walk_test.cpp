// The ordered retry claim's key walk (runtime/store/group/README.md#per-key-ordering, "The key
// walk"): it looks at the group's keys that have an open row in byte order from where the last
// claim stopped, stops when its room is full or its step budget is spent, skips keys that have
// only dead rows, and leaves deferred rows out of the due index (V014). Real PostgreSQL; rows
// are written by SQL beside messages produced for real.
#include <algorithm>

#include "store/schema/migrate.hpp"
#include "store_fixture.hpp"

namespace sqlstreams::testing {
namespace {

using store::OrderingMode;
using Pick = store::GroupStore::RetryPick;

constexpr Millis kWalkTtl{30'000};

class RetryKeyWalkTest : public StoreTest {
 protected:
  // `n` messages of keys `prefix`0000 .. `prefix`<n-1> (zero-padded: byte order = number order;
  // all of key `prefix` when `one_key`), each with one row of `status` for `group` due `due_sql`,
  // and the cursor past them.
  void keyed_rows(const store::GroupRef& group, const std::string& prefix, int n,
                  const std::string& status, const std::string& due_sql = "now() - interval '1 s'",
                  bool one_key = false) {
    store::Producer p(*session_);
    std::vector<store::NewMessage> batch;
    for (int i = 0; i < n; ++i) batch.push_back({"{}", 1, one_key ? prefix : prefix + padded(i)});
    const auto ids = p.produce_batch("payments.requested", batch);
    db_.sql(
        "INSERT INTO " + family_.exceptions +
        " (group_id, message_id, status, attempts, can_run_after, lane_key, message_key) SELECT " +
        std::to_string(group.id) + ", m.id, '" + status + "', 0, " + due_sql +
        ", m.message_key, m.message_key FROM " + family_.messages + " m WHERE m.id BETWEEN " +
        std::to_string(ids.front()) + " AND " + std::to_string(ids.back()));
    db_.sql("UPDATE " + family_.cursors + " SET claimed = greatest(claimed, " +
            std::to_string(ids.back()) + ") WHERE group_id = " + std::to_string(group.id));
  }
  static std::string padded(int i) {
    std::string s = std::to_string(i);
    return std::string(4 - std::min<size_t>(4, s.size()), '0') + s;
  }
  store::GroupRef declare(const std::string& name, OrderingMode mode) {
    return store::declare_group(*session_, stream_, name, store::StartAt::kBeginning,
                                store::kDeclareProofTimeout, mode)
        .group;
  }
  store::GroupStore ordered(const store::GroupRef& g, OrderingMode mode) {
    auto gs = group_store(*session_, g.id, "walk:1");
    gs.set_ordering(mode);
    return gs;
  }
  // The claims' keys, sorted ("-" = keyless).
  static std::vector<std::string> keys(const std::vector<store::RetryClaim>& claims) {
    std::vector<std::string> out;
    for (const auto& c : claims) out.push_back(c.lane_key.value_or("-"));
    std::sort(out.begin(), out.end());
    return out;
  }
  // Hands every claim back unrun (a deferred row returns to `deferred`).
  static void hand_back(store::GroupStore& gs, const std::vector<store::RetryClaim>& claims) {
    std::vector<store::RetryResult> back;
    for (const auto& c : claims) {
      store::RetryResult r;
      r.message_id = c.message_id;
      r.token = c.token;
      r.hand_back = true;
      back.push_back(std::move(r));
    }
    (void)gs.commit_retries(back);
  }
};

// Each claim goes on after the last key the previous one looked at, so a claim of room 4 on 10
// claimable keys takes a0000-a0003, then a0004-a0007, then a0008, a0009 and (wrapping) a0000,
// a0001 — even though every claim is handed back: the oldest heads are not taken again and again
// while later keys wait. (Before V014 each claim took the oldest heads of the whole group: the
// second claim took a0000-a0003 again.)
TEST_F(RetryKeyWalkTest, EachClaimGoesOnWhereTheLastOneStoppedAndWrapsAround) {
  const auto g = declare("walk-fair", OrderingMode::kKeyRelease);
  keyed_rows(g, "a", 10, "deferred");
  auto gs = ordered(g, OrderingMode::kKeyRelease);
  const std::vector<std::vector<std::string>> want = {
      {"a0000", "a0001", "a0002", "a0003"},
      {"a0004", "a0005", "a0006", "a0007"},
      {"a0000", "a0001", "a0008", "a0009"},
  };
  for (const auto& expected : want) {
    auto got = gs.claim_due_retries(kWalkTtl, 4, Pick::kReady, 3, 0);
    EXPECT_EQ(keys(got), expected);
    EXPECT_TRUE(gs.retry_claim_left_keys()) << "the room filled: the walk stopped early";
    hand_back(gs, got);
  }
}

// A key whose rows are all dead is not in the walk's index (V014 exceptions_N_open_keys): 1,500
// of them before the one claimable key cost the walk nothing, under either dead-row setting —
// under `hold` a key with a dead head and a deferred row behind it is walked, and not taken.
TEST_F(RetryKeyWalkTest, KeysWithOnlyDeadRowsAreNotWalked) {
  for (const auto mode : {OrderingMode::kKeyRelease, OrderingMode::kKeyHold}) {
    SCOPED_TRACE(mode == OrderingMode::kKeyHold ? "hold" : "release");
    const auto g = declare(mode == OrderingMode::kKeyHold ? "walk-hold" : "walk-release", mode);
    keyed_rows(g, mode == OrderingMode::kKeyHold ? "dh" : "dr", 1500, "dead");
    keyed_rows(g, "z", 1, "deferred");
    auto gs = ordered(g, mode);
    auto got = gs.claim_due_retries(kWalkTtl, 10, Pick::kReady, 3, 0);
    EXPECT_EQ(keys(got), std::vector<std::string>{"z0000"});
    EXPECT_FALSE(gs.retry_claim_left_keys()) << "one key walked, all of them";
  }
  // Under hold, a dead head holds its key: its deferred successor is walked and not taken.
  const auto g = declare("walk-held-key", OrderingMode::kKeyHold);
  keyed_rows(g, "h", 1, "dead");
  keyed_rows(g, "h", 1, "deferred");
  auto gs = ordered(g, OrderingMode::kKeyHold);
  EXPECT_TRUE(gs.claim_due_retries(kWalkTtl, 10, Pick::kReady, 3, 0).empty());
  EXPECT_FALSE(gs.retry_claim_left_keys());
}

// 1,200 keys whose heads are not due (ready, an hour ahead) sort before the one claimable key:
// the first claim spends its 1,000 steps on them, takes nothing and says it stopped early; the
// next one goes on from there and takes the claimable key.
TEST_F(RetryKeyWalkTest, AWalkOutOfStepsGoesOnNextClaimFromWhereItStopped) {
  const auto g = declare("walk-steps", OrderingMode::kKeyRelease);
  keyed_rows(g, "b", 1200, "ready", "now() + interval '1 hour'");
  keyed_rows(g, "c", 1, "deferred");
  auto gs = ordered(g, OrderingMode::kKeyRelease);
  EXPECT_TRUE(gs.claim_due_retries(kWalkTtl, 10, Pick::kReady, 3, 0).empty());
  EXPECT_TRUE(gs.retry_claim_left_keys());
  auto got = gs.claim_due_retries(kWalkTtl, 10, Pick::kReady, 3, 0);
  EXPECT_EQ(keys(got), std::vector<std::string>{"c0000"});
  // 200 keys after its start, c0000, and 799 after the wrap: its 1,000 steps are spent again.
  EXPECT_TRUE(gs.retry_claim_left_keys());
}

// The walk's start is the last key of the previous claim, sent back as a parameter: an empty
// key, quotes and backslashes, multibyte UTF-8 and a 1,024-byte key (the longest a producer may
// send) are each walked once per wrap, in byte order, whatever the database's collation.
TEST_F(RetryKeyWalkTest, NastyKeysAreEachReachedOncePerWrap) {
  const auto g = declare("walk-nasty", OrderingMode::kKeyRelease);
  const std::vector<std::string> nasty = {"", "\"'\\;--", "\xc3\xa9", std::string(1024, 'z'),
                                          "\xc3\xbf"};
  for (const auto& k : nasty) keyed_rows(g, k, 1, "deferred", "now() - interval '1 s'", true);
  auto gs = ordered(g, OrderingMode::kKeyRelease);
  std::vector<std::string> seen;
  for (int i = 0; i < 3; ++i) {  // room 2, three claims: six keys
    auto got = gs.claim_due_retries(kWalkTtl, 2, Pick::kReady, 3, 0);
    for (const auto& k : keys(got)) seen.push_back(k);
    hand_back(gs, got);
  }
  ASSERT_EQ(seen.size(), 6u);
  std::vector<std::string> first_wrap(seen.begin(), seen.begin() + 5);
  std::sort(first_wrap.begin(), first_wrap.end());
  std::vector<std::string> want = nasty;
  std::sort(want.begin(), want.end());
  EXPECT_EQ(first_wrap, want);
  // The first walk starts after '' (the empty key comes last, in the wrap); the third claim
  // takes it and, wrapping past its start, the lowest key after it again.
  EXPECT_EQ(seen[4], "");
  EXPECT_EQ(seen[5], nasty[1]);
}

// Keyless rows are claimed beside the walk's heads, oldest first, from the due index, which has
// no deferred row any more (V014): 500 deferred rows of one key in front of them change nothing.
TEST_F(RetryKeyWalkTest, KeylessRowsComeFromTheDueIndexBesideTheHeads) {
  const auto g = declare("walk-keyless", OrderingMode::kKeyRelease);
  keyed_rows(g, "d", 1, "deferred", "now() - interval '1 s'", true);
  keyed_rows(g, "e", 500, "deferred", "now() - interval '1 s'", true);
  store::Producer p(*session_);
  const auto loose = p.produce_batch("payments.requested", {{"{}", 1, std::nullopt}});
  db_.sql("INSERT INTO " + family_.exceptions +
          " (group_id, message_id, status, attempts, can_run_after) VALUES (" +
          std::to_string(g.id) + ", " + std::to_string(loose.front()) +
          ", 'ready', 1, now() - interval '1 hour')");
  db_.sql("UPDATE " + family_.cursors + " SET claimed = " + std::to_string(loose.front()) +
          " WHERE group_id = " + std::to_string(g.id));
  const std::string due = "exceptions_" + std::to_string(family_.id) + "_due";
  EXPECT_EQ(
      db_.scalar<std::string>("SELECT indexdef FROM pg_indexes WHERE indexname = '" + due + "'"),
      "CREATE INDEX " + due + " ON " + family_.exceptions +
          " USING btree (group_id, can_run_after) WHERE (status <> ALL (ARRAY['dead'::text, "
          "'deferred'::text]))");
  auto gs = ordered(g, OrderingMode::kKeyRelease);
  auto got = gs.claim_due_retries(kWalkTtl, 10, Pick::kReady, 3, 0);
  EXPECT_EQ(keys(got), (std::vector<std::string>{"-", "d", "e"}));
}

// V014 on a database whose family was made by V012's template, with rows: the family gets the
// indexes the new template makes.
TEST(RetryKeyWalkMigrationTest, V014GivesAnExistingFamilyWhatTheNewTemplateMakes) {
  TestDatabase db(TestDatabase::Schema::kEmpty);
  apply_migrations_before(db, 14);
  db.sql("INSERT INTO sqlstreams.streams (id, name, partition_size) VALUES (1, 'old', 1000)");
  db.sql("SELECT sqlstreams.create_stream_family(1)");
  db.sql("INSERT INTO " + stream_family(db, "old").exceptions +
         " (group_id, message_id, status, can_run_after, lane_key) VALUES (1, 1, 'ready', now(), "
         "NULL), (1, 2, 'deferred', now(), 'k'), (1, 3, 'dead', now(), 'k')");
  apply_migration(db, 14);
  db.sql("INSERT INTO sqlstreams.streams (id, name, partition_size) VALUES (2, 'new', 1000)");
  db.sql("SELECT sqlstreams.create_stream_family(2)");
  auto indexes = [&](int n) {
    const std::string table = "exceptions_" + std::to_string(n);
    return db.scalar<std::string>("SELECT string_agg(replace(indexdef, '" + table +
                                  "', 'T'), '; ' ORDER BY indexname) FROM pg_indexes WHERE "
                                  "schemaname = 'sqlstreams' AND tablename = '" +
                                  table + "'");
  };
  EXPECT_EQ(indexes(1), indexes(2));
  EXPECT_NE(indexes(1).find("T_open_keys"), std::string::npos) << indexes(1);
  EXPECT_NE(indexes(1).find("'deferred'"), std::string::npos) << indexes(1);
}

}  // namespace
}  // namespace sqlstreams::testing
