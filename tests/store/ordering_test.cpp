// Per-key ordering's store layer (runtime/store/group/README.md#per-key-ordering):
// the key hashes on a lease, the one-statement key gate, the ordered retry claim, lane keys on
// rows (failures, deferrals, quarantine, operator retries), hold vs release, and declaring a
// group's ordering. Sessions of two or three "hosts" are stepped by hand on a real PostgreSQL.
#include <algorithm>
#include <set>

#include "store/core/pq.hpp"
#include "store/errors.hpp"
#include "store/reporting/operator_actions.hpp"
#include "store/reporting/status.hpp"
#include "store/schema/migrate.hpp"
#include "store_fixture.hpp"

namespace sqlstreams::testing {
namespace {

using store::ExceptionStatus;
using store::OrderingMode;

constexpr Millis kTtl{30'000};

// Message i (1..30): key "k" at 5, 9, 15 and 25, "j" at 7 and 17, none at even ids, "x<i>" at
// the other odd ids (a key of its own).
std::optional<std::string> key_of(int i) {
  if (i == 5 || i == 9 || i == 15 || i == 25) return "k";
  if (i == 7 || i == 17) return "j";
  if (i % 2 == 0) return std::nullopt;
  return "x" + std::to_string(i);
}

class OrderingTest : public StoreTest {
 protected:
  void SetUp() override {
    StoreTest::SetUp();
    store::Producer p(*session_);
    std::vector<store::NewMessage> batch;
    for (int i = 1; i <= 30; ++i) {
      batch.push_back({R"({"n":)" + std::to_string(i) + "}", 1, key_of(i)});
    }
    p.produce_batch("payments.requested", batch);
    ordered_ = store::declare_group(*session_, stream_, "ledger", store::StartAt::kBeginning,
                                    store::kDeclareProofTimeout, OrderingMode::kKeyRelease)
                   .group;
    held_ = store::declare_group(*session_, stream_, "ledger-held", store::StartAt::kBeginning,
                                 store::kDeclareProofTimeout, OrderingMode::kKeyHold)
                .group;
  }
  store::GroupStore ordered_store(store::Session& s, const store::GroupRef& g,
                                  const std::string& holder,
                                  OrderingMode mode = OrderingMode::kKeyRelease) {
    auto gs = group_store(s, g.id, holder);
    gs.set_ordering(mode);
    return gs;
  }
  store::ClaimedRange claim(store::GroupStore& gs, int32_t batch) {
    for (int i = 0; i < 3; ++i) {
      auto r = poll(gs, batch);
      if (r.range) return *r.range;
    }
    ADD_FAILURE() << "nothing claimed";
    return {};
  }
  // "key:blocked_from:gated" for each gate, in key order ("-" = no row).
  static std::string gates(const std::vector<store::KeyGate>& g) {
    std::string out;
    for (const auto& k : g) {
      if (!out.empty()) out += " ";
      out += k.key + ":" + (k.blocked_from ? std::to_string(*k.blocked_from) : "-") + ":" +
             (k.gated_by_other ? "gated" : "free");
    }
    return out;
  }
  static std::string ids(const std::vector<store::RetryClaim>& claims) {
    std::string out;
    for (const auto& c : claims) out += (out.empty() ? "" : ",") + std::to_string(c.message_id);
    return "[" + out + "]";
  }
  static store::FailedMessage failure(int64_t id, ExceptionStatus status,
                                      std::optional<std::string> lane_key) {
    store::FailedMessage f{id, status,    status == ExceptionStatus::kDeferred ? 0 : 1,
                           0,  Millis(0), "provider down",
                           {}};
    f.lane_key = std::move(lane_key);
    return f;
  }
  // A complete range commit with these rows.
  static store::RangeCommit commit(const store::ClaimedRange& r,
                                   std::vector<store::FailedMessage> failures = {}) {
    return store::RangeCommit{r.token, r.high, true, std::move(failures), {}};
  }
  std::string row(int64_t group, int64_t id) {
    auto r = db_.sql("SELECT status || '/' || coalesce(lane_key, 'NULL') FROM " +
                     family_.exceptions + " WHERE group_id = " + std::to_string(group) +
                     " AND message_id = " + std::to_string(id));
    return r.empty() ? "none" : r[0][0].as<std::string>();
  }
  void insert_row(int64_t group, int64_t id, const std::string& status,
                  const std::optional<std::string>& lane_key) {
    db_.sql(
        "INSERT INTO " + family_.exceptions +
        " (group_id, message_id, status, attempts, can_run_after, lane_key, message_key) VALUES (" +
        std::to_string(group) + ", " + std::to_string(id) + ", '" + status + "', " +
        (status == "deferred" ? "0" : "1") + ", now() - interval '1 s', " +
        (lane_key ? "'" + *lane_key + "'" : "NULL") + ", " +
        (lane_key ? "'" + *lane_key + "'" : "NULL") + ")");
    // A row exists only for a message the cursor has claimed (the ordered retry claim takes
    // nothing above `claimed`: AfterARewindARowAboveTheClaimedPositionWaitsForTheReDelivery).
    db_.sql("UPDATE " + family_.cursors + " SET claimed = greatest(claimed, " + std::to_string(id) +
            ") WHERE group_id = " + std::to_string(group));
  }

  store::GroupRef ordered_, held_;
};

// The lease of an ordered range carries the distinct hashtext() of its keys; the gate of a
// later range of another holder says `gated` for the shared key until the earlier range
// commits, then nothing.
TEST_F(OrderingTest, GateWaitsForAnEarlierRangeOfAnotherHolderUntilItCommits) {
  auto sa = session();
  auto sb = session();
  auto a = ordered_store(*sa, ordered_, "a:1");
  auto b = ordered_store(*sb, ordered_, "b:1");
  auto l1 = claim(a, 10);  // (0,10]: k@5, k@9, j@7
  auto l2 = claim(b, 10);  // (10,20]: k@15, j@17
  ASSERT_EQ(l1.high, 10);
  ASSERT_EQ(l2.high, 20);
  EXPECT_TRUE(
      db_.scalar<bool>("SELECT ARRAY(SELECT DISTINCT h FROM unnest(key_hashes) AS u(h) ORDER BY 1) "
                       "= ARRAY(SELECT DISTINCT hashtext(message_key) FROM " +
                       family_.messages +
                       " WHERE id BETWEEN 1 AND 10 AND message_key IS NOT NULL ORDER BY 1) AND "
                       "cardinality(key_hashes) = 4 FROM " +
                       family_.leases + " WHERE low = 0"))
      << "the lease holds exactly the hashes of the range's four distinct keys (x1 x3 k j)";
  EXPECT_EQ(
      db_.scalar<int>("SELECT cardinality(key_hashes) FROM " + family_.leases + " WHERE low = 0"),
      4)
      << "x1, x3, k (twice) and j: each key once";
  EXPECT_EQ(gates(b.gate_keys(l2, {l2.token})), "j:-:gated k:-:gated");
  EXPECT_EQ(gates(a.gate_keys(l1, {l1.token})), "") << "nothing below the first range";
  EXPECT_EQ(gates(b.gate_keys(l2, {l1.token, l2.token})), "")
      << "this host's own earlier ranges are ordered in memory, not by the gate";
  EXPECT_EQ(a.commit_ranges({commit(l1)}), std::vector<bool>{true});
  EXPECT_EQ(gates(b.gate_keys(l2, {l2.token})), "") << "L1 resolved every message: free";
}

// L1 commits a failure of k@5 (lane_key k): the later range sees the key blocked from 5.
TEST_F(OrderingTest, AFailureRowOfAnEarlierRangeBlocksItsKey) {
  auto sa = session();
  auto sb = session();
  auto a = ordered_store(*sa, ordered_, "a:1");
  auto b = ordered_store(*sb, ordered_, "b:1");
  auto l1 = claim(a, 10);
  auto l2 = claim(b, 10);
  EXPECT_EQ(a.commit_ranges({commit(l1, {failure(5, ExceptionStatus::kReady, "k"),
                                         failure(9, ExceptionStatus::kDeferred, "k")})}),
            std::vector<bool>{true});
  EXPECT_EQ(row(ordered_.id, 5), "ready/k");
  EXPECT_EQ(row(ordered_.id, 9), "deferred/k");
  EXPECT_EQ(db_.scalar<int>("SELECT attempts FROM " + family_.exceptions + " WHERE message_id = 9"),
            0);
  EXPECT_EQ(gates(b.gate_keys(l2, {l2.token})), "k:5:free") << "j resolved in L1: free";
  EXPECT_EQ(b.advance_cursor().committed_after, 4) << "the open rows hold the cursor at 4";
}

// The gate reads a group's open keyed rows in one scan when there are at most as many as the
// range has keys, and probes the index per key otherwise: both ways give the same answer, under
// release and under hold (a dead row blocks its key only under hold).
TEST_F(OrderingTest, TheGateAgreesWhetherItScansTheOpenRowsOrProbesEachKey) {
  auto sa = session();
  auto sb = session();
  auto a = ordered_store(*sa, ordered_, "a:1");
  auto b = ordered_store(*sb, ordered_, "b:1");
  auto b_hold = ordered_store(*sb, ordered_, "b:1", OrderingMode::kKeyHold);
  auto l1 = claim(a, 10);  // (0,10]
  auto l2 = claim(b, 10);  // (10,20]: k@15, j@17, x11, x13, x19 — five keys
  EXPECT_EQ(a.commit_ranges({commit(l1, {failure(5, ExceptionStatus::kReady, "k"),
                                         failure(9, ExceptionStatus::kDeferred, "k"),
                                         failure(7, ExceptionStatus::kDead, "j")})}),
            std::vector<bool>{true});
  // Two open rows under release, three under hold: fewer than the five keys — one scan.
  EXPECT_EQ(gates(b.gate_keys(l2, {l2.token})), "k:5:free");
  EXPECT_EQ(gates(b_hold.gate_keys(l2, {l2.token})), "j:7:free k:5:free");
  // Six more open rows of other keys below the range: more rows than keys — a probe per key.
  for (int id : {1, 2, 3, 4, 6, 8})
    insert_row(ordered_.id, id, "deferred", "q" + std::to_string(id));
  EXPECT_EQ(gates(b.gate_keys(l2, {l2.token})), "k:5:free");
  EXPECT_EQ(gates(b_hold.gate_keys(l2, {l2.token})), "j:7:free k:5:free");
  // A row above the range's low does not block it, either way.
  insert_row(ordered_.id, 12, "deferred", "x13");
  EXPECT_EQ(gates(b.gate_keys(l2, {l2.token})), "k:5:free");
  db_.sql("DELETE FROM " + family_.exceptions + " WHERE lane_key LIKE 'q%'");
  EXPECT_EQ(gates(b.gate_keys(l2, {l2.token})), "k:5:free");
}

// A host vanishes: its lease expires but still gates its keys until another host has reclaimed
// it (the key set travels with the lease; the token rotates) and committed it.
TEST_F(OrderingTest, AnExpiredLeaseOfAVanishedHolderStillGatesUntilReclaimedAndCommitted) {
  auto sa = session();
  auto sb = session();
  auto gone = ordered_store(*sa, ordered_, "gone:1");
  auto b = ordered_store(*sb, ordered_, "b:1");
  auto l1 = claim(gone, 10);
  auto l2 = claim(b, 10);
  const std::string hashes =
      db_.scalar<std::string>("SELECT key_hashes::text FROM " + family_.leases + " WHERE low = 0");
  expire_leases();
  EXPECT_EQ(gates(b.gate_keys(l2, {l2.token})), "j:-:gated k:-:gated");
  // L2 expired too and is the later one: the oldest expired lease is reclaimed first.
  auto re = b.reclaim_expired(kTtl, 3);
  ASSERT_TRUE(re.range);
  EXPECT_EQ(re.range->low, 0);
  EXPECT_NE(re.range->token, l1.token);
  EXPECT_EQ(
      db_.scalar<std::string>("SELECT key_hashes::text FROM " + family_.leases + " WHERE low = 0"),
      hashes)
      << "a reclaim keeps the key set";
  EXPECT_EQ(gates(b.gate_keys(l2, {l2.token})), "j:-:gated k:-:gated")
      << "not in own_tokens: still gates";
  EXPECT_EQ(gates(b.gate_keys(l2, {re.range->token, l2.token})), "");
  EXPECT_EQ(gone.commit_ranges({commit(l1)}), std::vector<bool>{false});
  EXPECT_EQ(gates(b.gate_keys(l2, {l2.token})), "j:-:gated k:-:gated")
      << "the vanished holder's late commit changes nothing";
  EXPECT_EQ(b.commit_ranges({commit(*re.range)}), std::vector<bool>{true});
  EXPECT_EQ(gates(b.gate_keys(l2, {l2.token})), "");
}

// Research §5 E2a: reading rows, then leases, in two statements, with the earlier range
// committing its failure in between, finds neither and would run k@15 while k@5 is unresolved.
// gate_keys() is one statement: before that commit it says gated, after it blocked — never free.
TEST_F(OrderingTest, ASplitGateCheckLetsAMessageThroughOneStatementDoesNot) {
  for (bool split : {true, false}) {
    SCOPED_TRACE(split ? "split" : "one statement");
    const store::GroupRef g =
        store::declare_group(*session_, stream_, split ? "split" : "whole",
                             store::StartAt::kBeginning, store::kDeclareProofTimeout,
                             OrderingMode::kKeyRelease)
            .group;
    auto sa = session();
    auto sb = session();
    auto a = ordered_store(*sa, g, "a:1");
    auto b = ordered_store(*sb, g, "b:1");
    auto l1 = claim(a, 10);
    auto l2 = claim(b, 10);
    auto l1_fails = [&] {
      EXPECT_EQ(a.commit_ranges({commit(l1, {failure(5, ExceptionStatus::kReady, "k"),
                                             failure(7, ExceptionStatus::kReady, "j")})}),
                std::vector<bool>{true});
    };
    if (split) {
      EXPECT_EQ(gates(b.gate_keys_split(l2, {l2.token}, l1_fails)), "")
          << "the split check finds neither the lease nor the row: k@15 and j@17 would run";
    } else {
      EXPECT_EQ(gates(b.gate_keys(l2, {l2.token})), "j:-:gated k:-:gated");
      l1_fails();
      EXPECT_EQ(gates(b.gate_keys(l2, {l2.token})), "j:7:free k:5:free");
    }
  }
}

// Research §5 E3: rows 5 (ready, k), 7 (ready, j), 15 and 25 (deferred, k), a lease (20,24]
// holding k, two claimers on their own connections.
TEST_F(OrderingTest, RetryClaimTakesOnlyTheLowestRowOfAKeyThatNoLeaseBelowItHolds) {
  const int64_t g = ordered_.id;
  insert_row(g, 5, "ready", "k");
  insert_row(g, 7, "ready", "j");
  insert_row(g, 15, "deferred", "k");
  insert_row(g, 25, "deferred", "k");
  db_.sql("INSERT INTO " + family_.leases +
          " (group_id, token, low, high, expires_at, holder, key_hashes) VALUES (" +
          std::to_string(g) +
          ", gen_random_uuid(), 20, 24, now() + interval '1 h', 'other:1', ARRAY[hashtext('k')])");
  auto sx = session();
  auto sy = session();
  auto x = ordered_store(*sx, ordered_, "x:1");
  auto y = ordered_store(*sy, ordered_, "y:1");
  {
    // X's claim statement holds its row locks: Y skips 5 and 7, and must still not take 15
    // (5 is unresolved whatever its lock).
    pqxx::connection c(db_.url());
    pqxx::work locker(c);
    locker.exec("SELECT 1 FROM " + family_.exceptions + " WHERE message_id IN (5, 7) FOR UPDATE");
    EXPECT_EQ(ids(y.claim_due_retries(kTtl, 10)), "[]");
  }
  auto got = x.claim_due_retries(kTtl, 10);
  EXPECT_EQ(ids(got), "[5,7]");
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].lane_key, "k");
  EXPECT_FALSE(got[0].deferred);
  EXPECT_EQ(ids(y.claim_due_retries(kTtl, 10)), "[]") << "5 is inflight: unresolved";
  store::RetryResult ok5{5, got[0].token, std::nullopt, false, std::nullopt};
  EXPECT_EQ(x.commit_retries({ok5}), std::vector<bool>{true});
  auto next = y.claim_due_retries(kTtl, 10);
  EXPECT_EQ(ids(next), "[15]");
  ASSERT_EQ(next.size(), 1u);
  EXPECT_TRUE(next[0].deferred);
  EXPECT_EQ(next[0].attempts, 0) << "a deferred row's run is its first attempt";
  store::RetryResult ok15{15, next[0].token, std::nullopt, false, std::nullopt};
  EXPECT_EQ(y.commit_retries({ok15}), std::vector<bool>{true});
  EXPECT_EQ(ids(x.claim_due_retries(kTtl, 10)), "[]") << "the lease (20,24] holds k below 25";
  db_.sql("DELETE FROM " + family_.leases + " WHERE low = 20");
  EXPECT_EQ(ids(x.claim_due_retries(kTtl, 10)), "[25]");
}

// Retry chains: a key's head brings the rows behind it that are `deferred` (never ran), in id
// order, up to an earlier lease holding the key or a row that is not deferred; heads come
// first within the limit, and a head locked by another claim takes its chain with it.
TEST_F(OrderingTest, RetryClaimTakesEachHeadWithItsDeferredChain) {
  const int64_t g = ordered_.id;
  insert_row(g, 5, "deferred", "k");
  insert_row(g, 9, "deferred", "k");
  insert_row(g, 15, "deferred", "k");
  insert_row(g, 25, "deferred", "k");
  insert_row(g, 7, "ready", "j");
  insert_row(g, 17, "ready", "j");  // failed before: due, but not a chain row
  db_.sql("INSERT INTO " + family_.leases +
          " (group_id, token, low, high, expires_at, holder, key_hashes) VALUES (" +
          std::to_string(g) +
          ", gen_random_uuid(), 20, 24, now() + interval '1 h', 'other:1', ARRAY[hashtext('k')])");
  auto sx = session();
  auto sy = session();
  auto x = ordered_store(*sx, ordered_, "x:1");
  auto y = ordered_store(*sy, ordered_, "y:1");
  using Pick = store::GroupStore::RetryPick;
  const auto all = store::GroupStore::kNoRetryBudget;
  auto first = x.claim_due_retries(kTtl, 2, Pick::kAll, all, 10);
  ASSERT_EQ(ids(first), "[5,7]") << "heads first within the limit, then chains";
  EXPECT_EQ(x.commit_retries({store::RetryResult{5, first[0].token, {}, true, {}},
                              store::RetryResult{7, first[1].token, {}, true, {}}}),
            (std::vector<bool>{true, true}));
  {
    pqxx::connection c(db_.url());
    pqxx::work locker(c);
    locker.exec("SELECT 1 FROM " + family_.exceptions + " WHERE message_id = 5 FOR UPDATE");
    EXPECT_EQ(ids(y.claim_due_retries(kTtl, 10, Pick::kAll, all, 10)), "[7]")
        << "5 is locked by another claim: its chain 9, 15 stays with it; 17 is not deferred";
  }
  auto got = x.claim_due_retries(kTtl, 10, Pick::kAll, all, 10);
  ASSERT_EQ(ids(got), "[5,9,15]") << "25 is behind the lease (20,24] that holds k";
  EXPECT_FALSE(got[0].chained);
  EXPECT_TRUE(got[1].chained);
  EXPECT_TRUE(got[2].chained);
  EXPECT_TRUE(got[1].deferred);
  EXPECT_EQ(got[2].attempts, 0);
  EXPECT_EQ(ids(y.claim_due_retries(kTtl, 10, Pick::kAll, all, 10)), "[]")
      << "the key's rows are inflight: nothing of k for another host";
  // One commit: 9 and 15 succeed with 5 (15's check sees 9 as one of this statement's).
  std::vector<store::RetryResult> results;
  for (const auto& c : got) {
    store::RetryResult r{c.message_id, c.token, std::nullopt, false, std::nullopt};
    r.chained = c.chained;
    results.push_back(r);
  }
  EXPECT_EQ(x.commit_retries(results), (std::vector<bool>{true, true, true}));
  EXPECT_EQ(row(g, 9), "none");
  EXPECT_EQ(row(g, 15), "none");
  db_.sql("DELETE FROM " + family_.leases + " WHERE low = 20");
  insert_row(g, 29, "deferred", "k");
  db_.sql("UPDATE " + family_.exceptions +
          " SET status = 'ready', attempts = 1 WHERE message_id = 25");
  EXPECT_EQ(ids(x.claim_due_retries(kTtl, 10, Pick::kAll, all, 10)), "[25]")
      << "a head being retried brings no chain: it may well fail again";
}

// A chain's success must not become durable before an earlier row of its key: when the head's
// row lease expired and another host took it over, the chain's successes are refused and its
// rows go back to `deferred` (not left inflight to expire into suspects).
TEST_F(OrderingTest, AChainSuccessIsRefusedWhileAnEarlierRowOfItsKeyIsAnotherHosts) {
  const int64_t g = ordered_.id;
  insert_row(g, 5, "deferred", "k");
  insert_row(g, 9, "deferred", "k");
  insert_row(g, 15, "deferred", "k");
  auto sx = session();
  auto sy = session();
  auto x = ordered_store(*sx, ordered_, "x:1");
  auto y = ordered_store(*sy, ordered_, "y:1");
  using Pick = store::GroupStore::RetryPick;
  const auto all = store::GroupStore::kNoRetryBudget;
  auto got = x.claim_due_retries(kTtl, 10, Pick::kAll, all, 10);
  ASSERT_EQ(ids(got), "[5,9,15]");
  // x stalls past the head's row lease; y takes the head over (its chain rows are inflight:
  // not deferred, so y's claim is the head alone).
  db_.sql("UPDATE " + family_.exceptions +
          " SET lease_expires_at = now() - interval '1 s' WHERE message_id = 5");
  auto taken = y.claim_due_retries(kTtl, 10, Pick::kAll, all, 10);
  ASSERT_EQ(ids(taken), "[5]");
  std::vector<store::RetryResult> results;
  for (size_t i = 1; i < got.size(); ++i) {  // x ran 5 (lost), then 9 and 15 succeeded
    store::RetryResult r{got[i].message_id, got[i].token, std::nullopt, false, std::nullopt};
    r.chained = true;
    results.push_back(r);
  }
  EXPECT_EQ(x.commit_retries(results), (std::vector<bool>{false, false}));
  EXPECT_EQ(row(g, 9), "deferred/k") << "refused, back where it waits for 5";
  EXPECT_EQ(row(g, 15), "deferred/k");
  EXPECT_EQ(row(g, 5), "inflight/k");
  store::RetryResult ok5{5, taken[0].token, std::nullopt, false, std::nullopt};
  EXPECT_EQ(y.commit_retries({ok5}), std::vector<bool>{true});
  EXPECT_EQ(ids(y.claim_due_retries(kTtl, 10, Pick::kAll, all, 10)), "[9,15]");
}

// A re-failed or handed-back row keeps its lane key; a row that never ran goes back to
// `deferred`; an operator's `dead retry` keeps the key, so the row re-enters key order.
TEST_F(OrderingTest, RowsKeepTheirLaneKeyThroughRetriesHandBacksAndOperatorRetries) {
  const int64_t g = ordered_.id;
  insert_row(g, 5, "ready", "k");
  insert_row(g, 15, "deferred", "k");
  auto s = session();
  auto gs = ordered_store(*s, ordered_, "a:1");
  auto c = gs.claim_due_retries(kTtl, 10);
  ASSERT_EQ(ids(c), "[5]");
  store::FailedMessage again{5, ExceptionStatus::kReady, 2, 0, Millis(0), "still down", {}};
  EXPECT_EQ(gs.commit_retries({store::RetryResult{5, c[0].token, again, false, std::nullopt}}),
            std::vector<bool>{true});
  EXPECT_EQ(row(g, 5), "ready/k") << "the host need not send the key again";
  c = gs.claim_due_retries(kTtl, 10);
  ASSERT_EQ(ids(c), "[5]");
  store::FailedMessage dead{5, ExceptionStatus::kDead, 3, 0, Millis(0), "gave up", {}};
  EXPECT_EQ(gs.commit_retries({store::RetryResult{5, c[0].token, dead, false, std::nullopt}}),
            std::vector<bool>{true});
  EXPECT_EQ(row(g, 5), "dead/k");
  c = gs.claim_due_retries(kTtl, 10);
  ASSERT_EQ(ids(c), "[15]") << "release: a dead row frees its key";
  EXPECT_EQ(gs.commit_retries({store::RetryResult{15, c[0].token, std::nullopt, true, {}}}),
            std::vector<bool>{true});
  EXPECT_EQ(row(g, 15), "deferred/k") << "handed back, never ran: deferred again";
  store::DeadFilter all;
  EXPECT_EQ(store::retry_dead(*session_, ordered_, all, "test"), std::vector<int64_t>{5});
  EXPECT_EQ(row(g, 5), "ready/k");
  EXPECT_EQ(ids(gs.claim_due_retries(kTtl, 10)), "[5]") << "back in key order: 15 waits";
  store::StreamStatus st;
  for (const auto& s2 : store::read_status(*session_, now_).streams) {
    if (s2.name == "payments.requested") st = s2;
  }
  auto it = std::find_if(st.groups.begin(), st.groups.end(),
                         [](const store::GroupStatus& x) { return x.name == "ledger"; });
  ASSERT_NE(it, st.groups.end());
  EXPECT_EQ(it->deferred, 1);
  EXPECT_EQ(it->inflight, 1);
  EXPECT_EQ(it->ordering, "key");
  EXPECT_EQ(it->ordering_dead, "release");
}

// A dead row blocks its key only under ordering_dead = "hold": in the gate and in the retry claim.
TEST_F(OrderingTest, ADeadRowHoldsItsKeyOnlyUnderHold) {
  for (OrderingMode mode : {OrderingMode::kKeyRelease, OrderingMode::kKeyHold}) {
    const bool hold = mode == OrderingMode::kKeyHold;
    SCOPED_TRACE(hold ? "hold" : "release");
    const store::GroupRef& g = hold ? held_ : ordered_;
    auto sa = session();
    auto sb = session();
    auto a = ordered_store(*sa, g, "a:1", mode);
    auto b = ordered_store(*sb, g, "b:1", mode);
    auto l1 = claim(a, 10);
    auto l2 = claim(b, 10);
    EXPECT_EQ(a.commit_ranges({commit(l1, {failure(5, ExceptionStatus::kDead, "k"),
                                           failure(9, ExceptionStatus::kDeferred, "k")})}),
              std::vector<bool>{true});
    EXPECT_EQ(gates(b.gate_keys(l2, {l2.token})), hold ? "k:5:free" : "k:9:free");
    EXPECT_EQ(ids(b.claim_due_retries(kTtl, 10)), hold ? "[]" : "[9]");
  }
}

// Quarantine writes lane_key = message_key on an ordered group's rows; the retry claim then runs
// them one per key.
TEST_F(OrderingTest, QuarantineCopiesTheKeyAndTheRowsRunOnePerKey) {
  auto s = session();
  auto gs = ordered_store(*s, ordered_, "a:1");
  claim(gs, 10);
  for (int i = 0; i < 3; ++i) {
    expire_leases();
    (void)gs.reclaim_expired(kTtl, 3);
  }
  EXPECT_EQ(db_.scalar<int>("SELECT count(*) FROM " + family_.leases), 0);
  EXPECT_EQ(db_.scalar<int>("SELECT count(*) FROM " + family_.exceptions +
                            " WHERE lane_key IS NOT DISTINCT FROM message_key AND group_id = " +
                            std::to_string(ordered_.id)),
            10);
  EXPECT_EQ(row(ordered_.id, 5), "ready/k");
  EXPECT_EQ(row(ordered_.id, 2), "ready/NULL") << "a keyless message stays unordered";
  EXPECT_EQ(ids(gs.claim_due_retries(kTtl, 100)), "[1,2,3,4,5,6,7,8,10]")
      << "9 waits behind 5, its key's lower row";
}

// An unordered group runs exactly the old statements: no key hashes on its leases, no lane key
// on its rows (also after quarantine), and its retry claim ignores keys.
TEST_F(OrderingTest, AnUnorderedGroupWritesNoKeysAndIgnoresThem) {
  auto s = session();
  auto gs = group_store(*s, charge_.id, "a:1");
  auto l1 = claim(gs, 10);
  EXPECT_TRUE(db_.scalar<bool>("SELECT key_hashes IS NULL FROM " + family_.leases));
  store::FailedMessage f5{5, ExceptionStatus::kReady, 1, 0, Millis(0), "e", {}};
  store::FailedMessage f9{9, ExceptionStatus::kReady, 1, 0, Millis(0), "e", {}};
  EXPECT_EQ(gs.commit_ranges({commit(l1, {f5, f9})}), std::vector<bool>{true});
  EXPECT_EQ(row(charge_.id, 5), "ready/NULL");
  EXPECT_EQ(ids(gs.claim_due_retries(kTtl, 10)), "[5,9]") << "unordered: both keys' rows run";
  claim(gs, 10);
  for (int i = 0; i < 3; ++i) {
    expire_leases();
    (void)gs.reclaim_expired(kTtl, 3);
  }
  EXPECT_EQ(
      db_.scalar<int>("SELECT count(*) FROM " + family_.exceptions + " WHERE lane_key IS NOT NULL"),
      0);
  EXPECT_EQ(row(charge_.id, 15), "ready/NULL");
}

// A group's ordering is recorded at creation and fixed: a differing declaration is refused,
// naming the group, both settings and what to do.
TEST_F(OrderingTest, DeclaringAnExistingGroupWithAnotherOrderingIsRefused) {
  auto r = db_.sql("SELECT name, ordering, ordering_dead FROM sqlstreams.groups ORDER BY name");
  std::string stored;
  for (const auto& x : r) {
    stored +=
        x[0].as<std::string>() + "=" + x[1].as<std::string>() + "/" + x[2].as<std::string>() + " ";
  }
  EXPECT_EQ(stored,
            "audit-payments=none/release charge-cards=none/release ledger=key/release "
            "ledger-held=key/hold ");
  auto declare = [&](const std::string& name, OrderingMode m) {
    return store::declare_group(*session_, stream_, name, store::StartAt::kBeginning,
                                store::kDeclareProofTimeout, m);
  };
  EXPECT_EQ(declare("ledger", OrderingMode::kKeyRelease).group.id, ordered_.id);
  for (auto [name, mode] :
       {std::pair{"ledger", OrderingMode::kNone}, std::pair{"ledger", OrderingMode::kKeyHold},
        std::pair{"charge-cards", OrderingMode::kKeyRelease}}) {
    try {
      declare(name, mode);
      ADD_FAILURE() << name << ": a differing ordering was accepted";
    } catch (const store::StoreError& e) {
      EXPECT_EQ(e.kind(), store::StoreError::Kind::kRejected);
      const std::string what = e.what();
      EXPECT_NE(what.find(std::string("group '") + name + "'"), std::string::npos) << what;
      EXPECT_NE(what.find("fixed when it is created"), std::string::npos) << what;
      EXPECT_NE(what.find("sqlstreams group drop"), std::string::npos) << what;
    }
  }
  try {
    declare("ledger", OrderingMode::kKeyHold);
  } catch (const store::StoreError& e) {
    EXPECT_NE(std::string(e.what()).find(
                  "created with ordering = \"key\", ordering_dead = \"release\", the config says "
                  "ordering = \"key\", ordering_dead = \"hold\""),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(declare("ledger-held", OrderingMode::kKeyHold).group.id, held_.id);
}

// The range's keys travel as a hand-built text[] literal (libpqxx 6.4 binds no containers):
// quotes, backslashes, commas, braces, blanks, the word NULL, an empty key and non-ASCII text
// reach the lease's hashes and the gate exactly, and a key repeated in the range is sent once.
TEST_F(OrderingTest, NastyKeysReachTheLeaseAndTheGateExactly) {
  const std::vector<std::string> nasty = {"a\"b", "c\\d", "x,y",           "{z}", " sp ",
                                          "NULL", "",     "\u00e9t\u00e9", "a\"b"};
  auto g = store::declare_group(*session_, stream_, "nasty", store::StartAt::kHead,
                                store::kDeclareProofTimeout, OrderingMode::kKeyRelease)
               .group;
  store::Producer p(*session_);
  std::vector<store::NewMessage> batch;
  for (const auto& k : nasty) batch.push_back({"{}", 1, k});
  const auto ids = p.produce_batch("payments.requested", batch);
  auto sa = session();
  auto sb = session();
  auto a = ordered_store(*sa, g, "a:1");
  auto b = ordered_store(*sb, g, "b:1");
  auto l1 = claim(a, static_cast<int32_t>(nasty.size()));
  ASSERT_EQ(l1.messages.size(), nasty.size());
  EXPECT_TRUE(db_.scalar<bool>(
      "SELECT ARRAY(SELECT h FROM unnest(key_hashes) AS u(h) ORDER BY 1) = ARRAY(SELECT DISTINCT "
      "hashtext(message_key) FROM " +
      family_.messages + " WHERE id >= " + std::to_string(ids.front()) + " ORDER BY 1) FROM " +
      family_.leases + " WHERE group_id = " + std::to_string(g.id)))
      << "one hash per distinct key, each hashtext() of the key as stored";
  // Another holder's later range with the same keys: every one of them is gated by l1.
  store::Producer p2(*session_);
  p2.produce_batch("payments.requested", batch);
  auto l2 = claim(b, static_cast<int32_t>(nasty.size()));
  const auto gated = b.gate_keys(l2, {l2.token});
  std::set<std::string> keys;
  for (const auto& k : gated) {
    EXPECT_TRUE(k.gated_by_other) << k.key;
    keys.insert(k.key);
  }
  EXPECT_EQ(keys, std::set<std::string>(nasty.begin(), nasty.end()));
}

// A claim served from the read cache (another group read the span) sets the same key hashes as
// one that reads: they come from the messages the range carries, whichever way they came.
TEST_F(OrderingTest, AClaimServedFromTheReadCacheCarriesTheSameKeyHashes) {
  struct OneSpan final : store::RangeCache {
    std::optional<store::CachedSpan> span;
    int64_t low = -1;
    int lookups_answered = 0;
    void await_read(int64_t) override {}
    std::optional<store::CachedSpan> lookup(int64_t l, int64_t h) override {
      if (!span || l != low || span->high > h) return std::nullopt;
      ++lookups_answered;
      return span;
    }
    void fill(int64_t l, int64_t h, const std::vector<store::StoredMessage>& m) override {
      low = l;
      span = store::CachedSpan{h, m};
    }
    void note_claimed(int64_t) override {}
    void forget_below(int64_t) override { span.reset(); }
  } cache;
  auto s = session();
  auto reader = group_store(*s, charge_.id, "a:1");  // unordered: reads and fills
  for (int i = 0; i < 3 && cache.low < 0; ++i) {
    auto obs = reader.observe();
    if (obs.worth_claiming()) (void)reader.claim(obs, 10, kTtl, &cache);
  }
  ASSERT_EQ(cache.low, 0);
  auto gs = ordered_store(*s, ordered_, "a:1");
  std::optional<store::ClaimedRange> r;
  for (int i = 0; i < 3 && !r; ++i) {
    auto obs = gs.observe();
    if (obs.worth_claiming()) r = gs.claim(obs, 10, kTtl, &cache).range;
  }
  ASSERT_TRUE(r);
  EXPECT_TRUE(r->from_cache);
  EXPECT_EQ(cache.lookups_answered, 1);
  EXPECT_EQ(r->messages.size(), 10u);
  EXPECT_EQ(db_.scalar<std::string>(
                "SELECT ARRAY(SELECT h FROM unnest(key_hashes) AS u(h) ORDER BY 1)::text FROM " +
                family_.leases + " WHERE group_id = " + std::to_string(ordered_.id)),
            db_.scalar<std::string>(
                "SELECT ARRAY(SELECT DISTINCT hashtext(message_key) FROM " + family_.messages +
                " WHERE id <= 10 AND message_key IS NOT NULL ORDER BY 1)::text"));
  EXPECT_TRUE(db_.scalar<bool>("SELECT key_hashes IS NULL FROM " + family_.leases +
                               " WHERE group_id = " + std::to_string(charge_.id)));
}

// Rewinding an ordered group revokes its leases that start at or above the new position (they
// would not gate the re-delivery of their own ids); a lease below it stays and gates. An
// unordered group's leases finish normally, as before.
TEST_F(OrderingTest, RewindOfAnOrderedGroupRevokesTheLeasesAboveThePosition) {
  for (bool ordered : {true, false}) {
    SCOPED_TRACE(ordered ? "ordered" : "unordered");
    const store::GroupRef& g = ordered ? ordered_ : charge_;
    auto sa = session();
    auto sb = session();
    auto a = ordered ? ordered_store(*sa, g, "a:1") : group_store(*sa, g.id, "a:1");
    auto b = ordered ? ordered_store(*sb, g, "b:1") : group_store(*sb, g.id, "b:1");
    auto l1 = claim(a, 10);
    auto l2 = claim(b, 10);
    auto l3 = claim(b, 10);  // (20,30]
    auto rewound = store::rewind_group(*session_, g, 15, std::nullopt, "test");
    EXPECT_EQ(rewound.position, 15);
    EXPECT_EQ(
        db_.scalar<std::string>("SELECT string_agg(low || '-' || high, ' ' ORDER BY low) FROM " +
                                family_.leases + " WHERE group_id = " + std::to_string(g.id)),
        ordered ? "0-10 10-20" : "0-10 10-20 20-30");
    EXPECT_EQ(b.commit_ranges({commit(l3)}), std::vector<bool>{!ordered});
    auto fresh = claim(a, 10);  // (15,25]: re-delivers (15,20], which l2 still holds
    EXPECT_EQ(fresh.low, 15);
    if (ordered) {
      EXPECT_EQ(gates(a.gate_keys(fresh, {fresh.token, l1.token})),
                "j:-:gated k:-:gated x19:-:gated")
          << "the keys of (15,20] that l2, below the position, still holds";
      EXPECT_NE(db_.scalar<std::string>(
                       "SELECT error FROM " + family_.deliveries +
                       " WHERE outcome = 'operator-rewind' AND group_id = " + std::to_string(g.id))
                    .find("revoked 1 lease(s)"),
                std::string::npos);
    }
    EXPECT_EQ(a.commit_ranges({commit(l1), commit(fresh)}), (std::vector<bool>{true, true}));
    EXPECT_EQ(b.commit_ranges({commit(l2)}), std::vector<bool>{true});
  }
}

// Found by a 30-minute chaos run: a rewind revokes the leases at or above its position, and the
// messages in them become unclaimed — under no lease, in no row. A `deferred` row above the
// position, written by the restarted history behind such a lease, then looked like the lowest
// unresolved row of its key, and the retry claim ran it before the re-delivery of the earlier
// messages of its key. Rows above the cursor's `claimed` wait until the claims pass them again.
// Found by the 30-minute chaos run of 2026-12-05 (seed 494630039, order=5): host B had claimed
// (10,20] while host A held (0,10] with the same keys, and a rewind to 0 revoked both leases
// before B's gate ran. The gate then found no earlier lease holding k or j and no row of them —
// free — and B ran 15 and 17 while 5, 7 and 9 were unresolved. The gate now also asks, in its
// snapshot, whether the range's own lease still exists; when it is gone nothing of it runs.
TEST_F(OrderingTest, AGateRunAfterARewindRevokedItsRangeFreesNoKey) {
  auto sa = session();
  auto sb = session();
  auto a = ordered_store(*sa, ordered_, "a:1");
  auto b = ordered_store(*sb, ordered_, "b:1");
  auto l1 = claim(a, 10);  // (0,10]: k@5, k@9, j@7
  auto l2 = claim(b, 10);  // (10,20]: k@15, j@17
  EXPECT_EQ(gates(b.gate_keys(l2, {l2.token})), "j:-:gated k:-:gated");
  store::rewind_group(*session_, ordered_, 0, std::nullopt, "test");  // revokes l1 and l2
  EXPECT_EQ(gates(b.gate_keys(l2, {l2.token})), "")
      << "the keys alone say free: what the claimer acted on before";
  EXPECT_TRUE(b.gate_range(l2, {l2.token}).lease_gone)
      << "5, 7 and 9 are under no lease and in no row: 15 and 17 must not run";
  auto again = claim(a, 10);  // (0,10] re-delivered
  const auto verdict = a.gate_range(again, {again.token});
  EXPECT_FALSE(verdict.lease_gone);
  EXPECT_TRUE(verdict.keys.empty()) << "nothing below the first range";
}

TEST_F(OrderingTest, AfterARewindARowAboveTheClaimedPositionWaitsForTheReDelivery) {
  auto sa = session();
  auto sb = session();
  auto a = ordered_store(*sa, ordered_, "a:1");
  auto b = ordered_store(*sb, ordered_, "b:1");
  auto l1 = claim(a, 10);  // (0,10]: k@5, k@9, j@7
  auto l2 = claim(b, 10);  // (10,20]: k@15, j@17 — behind l1, so deferred
  EXPECT_EQ(gates(b.gate_keys(l2, {l2.token})), "j:-:gated k:-:gated");
  EXPECT_EQ(b.commit_ranges({commit(l2, {failure(15, ExceptionStatus::kDeferred, "k"),
                                         failure(17, ExceptionStatus::kDeferred, "j")})}),
            std::vector<bool>{true});
  store::rewind_group(*session_, ordered_, 0, std::nullopt, "test");  // revokes l1
  EXPECT_EQ(ids(b.claim_due_retries(kTtl, 10)), "[]")
      << "5, 7 and 9 are unresolved and unclaimed: 15 and 17 must wait";
  auto again = claim(a, 10);  // (0,10] re-delivered
  EXPECT_EQ(again.low, 0);
  EXPECT_EQ(ids(b.claim_due_retries(kTtl, 10)), "[]") << "15 and 17 are still above claimed";
  EXPECT_EQ(a.commit_ranges({commit(again)}), std::vector<bool>{true});
  EXPECT_EQ(ids(b.claim_due_retries(kTtl, 10)), "[]") << "still above claimed (10)";
  auto l2b = claim(b, 10);  // (10,20] re-delivered: its lease holds k and j below 15 and 17
  EXPECT_EQ(ids(a.claim_due_retries(kTtl, 10)), "[]");
  EXPECT_EQ(b.commit_ranges({commit(l2b)}), std::vector<bool>{true});
  EXPECT_EQ(row(ordered_.id, 15), "none") << "the re-delivery's commit replaced the old row";
}

// V009 on a database that already has a family (made by V008's template, with rows): the
// family gets what the new template makes — the same columns, status check and indexes.
TEST(OrderingMigrationTest, V009GivesAnExistingFamilyWhatTheNewTemplateMakes) {
  TestDatabase db(TestDatabase::Schema::kEmpty);
  apply_migrations_before(db, 9);
  db.sql("INSERT INTO sqlstreams.streams (id, name, partition_size) VALUES (1, 'old', 1000)");
  db.sql("SELECT sqlstreams.create_stream_family(1)");
  const StreamFamily old_family = stream_family(db, "old");
  db.sql("INSERT INTO " + old_family.exceptions +
         " (group_id, message_id, status, can_run_after) VALUES (1, 1, 'ready', now()), (1, 2, "
         "'dead', now())");
  EXPECT_THROW(
      db.sql("INSERT INTO " + old_family.exceptions +
             " (group_id, message_id, status, can_run_after) VALUES (1, 3, 'deferred', now())"),
      std::exception)
      << "before V009 there is no deferred status";
  apply_migration(db, 9);
  db.sql("INSERT INTO sqlstreams.streams (id, name, partition_size) VALUES (2, 'new', 1000)");
  db.sql("SELECT sqlstreams.create_stream_family(2)");
  db.sql("INSERT INTO " + old_family.exceptions +
         " (group_id, message_id, status, can_run_after, lane_key) VALUES (1, 3, 'deferred', "
         "now(), 'k')");
  EXPECT_THROW(
      db.sql("INSERT INTO " + old_family.exceptions +
             " (group_id, message_id, status, can_run_after) VALUES (1, 4, 'parked', now())"),
      std::exception);
  auto shape = [&](int n) {
    std::string out;
    for (const auto& t : {"exceptions", "leases"}) {
      const std::string table = std::string(t) + "_" + std::to_string(n);
      out += db.scalar<std::string>(
          "SELECT string_agg(column_name || ' ' || data_type, ', ' ORDER BY column_name) FROM "
          "information_schema.columns WHERE table_schema = 'sqlstreams' AND table_name = '" +
          table + "'");
      out += " | " + db.scalar<std::string>(
                         "SELECT string_agg(replace(conname || ' ' || pg_get_constraintdef(oid), "
                         "'" +
                         table +
                         "', 'T'), '; ' ORDER BY conname) FROM pg_constraint WHERE "
                         "conrelid = 'sqlstreams." +
                         table + "'::regclass");
      out += " | " +
             db.scalar<std::string>(
                 "SELECT string_agg(replace(indexdef, '" + table +
                 "', 'T'), '; ' ORDER BY indexname) FROM pg_indexes WHERE schemaname = "
                 "'sqlstreams' AND tablename = '" +
                 table + "'") +
             "\n";
    }
    return out;
  };
  EXPECT_EQ(shape(1), shape(2));
  EXPECT_NE(shape(2).find("lane_key text"), std::string::npos) << shape(2);
  EXPECT_NE(shape(2).find("key_hashes ARRAY"), std::string::npos) << shape(2);
  EXPECT_NE(shape(2).find("WHERE (lane_key IS NOT NULL)"), std::string::npos) << shape(2);
  EXPECT_EQ(db.scalar<std::string>("SELECT string_agg(status || ':' || coalesce(lane_key, 'NULL'), "
                                   "' ' ORDER BY message_id) FROM " +
                                   old_family.exceptions),
            "ready:NULL dead:NULL deferred:k")
      << "the rows an older host wrote are kept, without a lane key";
  EXPECT_EQ(db.scalar<std::string>("SELECT ordering || '/' || ordering_dead FROM (SELECT "
                                   "column_default AS ordering FROM information_schema.columns "
                                   "WHERE table_name = 'groups' AND column_name = 'ordering') a, "
                                   "(SELECT column_default AS ordering_dead FROM "
                                   "information_schema.columns WHERE table_name = 'groups' AND "
                                   "column_name = 'ordering_dead') b"),
            "'none'::text/'release'::text");
}

// V010 (runtime/store/group/README.md#versions-a-group-does-not-accept) on a database whose
// family V009 made, with rows: its status check takes `parked` like the new template's, and the old
// rows stay.
TEST(KeptVersionsMigrationTest, V010GivesAnExistingFamilyTheParkedStatus) {
  TestDatabase db(TestDatabase::Schema::kEmpty);
  apply_migrations_before(db, 10);
  db.sql("INSERT INTO sqlstreams.streams (id, name, partition_size) VALUES (1, 'old', 1000)");
  db.sql("SELECT sqlstreams.create_stream_family(1)");
  const StreamFamily old_family = stream_family(db, "old");
  db.sql("INSERT INTO " + old_family.exceptions +
         " (group_id, message_id, status, can_run_after) VALUES (1, 1, 'deferred', now()), (1, 2, "
         "'dead', now())");
  const std::string parked =
      "INSERT INTO " + old_family.exceptions +
      " (group_id, message_id, status, can_run_after) VALUES (1, 3, 'parked', 'infinity')";
  EXPECT_THROW(db.sql(parked), std::exception) << "before V010 there is no parked status";
  apply_migration(db, 10);
  db.sql("INSERT INTO sqlstreams.streams (id, name, partition_size) VALUES (2, 'new', 1000)");
  db.sql("SELECT sqlstreams.create_stream_family(2)");
  const StreamFamily new_family = stream_family(db, "new");
  db.sql(parked);
  auto check = [&](int n) {
    return db.scalar<std::string>(
        "SELECT conname || ' ' || pg_get_constraintdef(oid) FROM pg_constraint WHERE conrelid = "
        "'sqlstreams.exceptions_" +
        std::to_string(n) + "'::regclass AND contype = 'c'");
  };
  EXPECT_EQ(check(1),
            "exceptions_1_status_check CHECK ((status = ANY (ARRAY['ready'::text, "
            "'inflight'::text, 'deferred'::text, 'parked'::text, 'dead'::text])))");
  EXPECT_EQ(check(2),
            "exceptions_2_status_check CHECK ((status = ANY (ARRAY['ready'::text, "
            "'inflight'::text, 'deferred'::text, 'parked'::text, 'dead'::text])))");
  EXPECT_EQ(db.scalar<std::string>("SELECT string_agg(status, ' ' ORDER BY message_id) FROM " +
                                   old_family.exceptions),
            "deferred dead parked");
  EXPECT_THROW(
      db.sql("INSERT INTO " + new_family.exceptions +
             " (group_id, message_id, status, can_run_after) VALUES (1, 1, 'kept', now())"),
      std::exception);
}

}  // namespace
}  // namespace sqlstreams::testing
