// How many round trips a claim costs (runtime/store/group/README.md#the-claim-in-round-trips),
// counted by a TCP proxy between the Session and PostgreSQL: a claim that takes a range is four
// (BEGIN with the lock and proof, the read, the cursor and lease in one statement, COMMIT), one
// that takes nothing two. Before 2026-12-06: six and three.
#include "round_trip_proxy.hpp"
#include "store_fixture.hpp"

namespace sqlstreams::testing {
namespace {

using ClaimRoundTrips = StoreTest;

TEST_F(ClaimRoundTrips, AClaimIsFourRoundTripsAndAnEmptyOneTwo) {
  RoundTripProxy proxy(db_.url());
  store::SessionOptions o = options();
  o.url = proxy.url();
  store::Session s(o);
  auto gs = group_store(s, charge_.id);
  auto produce = [&](int n) {
    db_.sql(
        "SELECT sqlstreams.produce_batch('payments.requested', array_agg(jsonb_build_object("
        "'n', g))) FROM generate_series(1, " +
        std::to_string(n) + ") g");
  };
  // Warm: the connection is made and every statement of a claim prepared once.
  produce(3);
  auto warm = poll(gs);
  ASSERT_TRUE(warm.range);
  ASSERT_EQ(warm.range->messages.size(), 3u);

  produce(5);
  proxy.reset();
  const auto obs = gs.observe();
  EXPECT_EQ(proxy.turns(), 1) << "observe: one statement";
  ASSERT_TRUE(obs.worth_claiming());
  proxy.reset();
  const auto claim = gs.claim(obs, 1000, std::chrono::seconds(30));
  EXPECT_EQ(proxy.turns(), 4) << "BEGIN + lock, read, cursor + lease, COMMIT";
  ASSERT_TRUE(claim.range);
  EXPECT_EQ(claim.range->low, 3);
  EXPECT_EQ(claim.range->high, 8);
  EXPECT_EQ(claim.range->messages.size(), 5u);
  EXPECT_FALSE(claim.range->token.empty());
  // The lease and the cursor were written together and committed.
  EXPECT_EQ(db_.scalar<int64_t>("SELECT claimed FROM " + family_.cursors +
                                " WHERE group_id = " + std::to_string(charge_.id)),
            8);
  EXPECT_EQ(db_.scalar<int64_t>("SELECT count(*) FROM " + family_.leases + " WHERE token = '" +
                                claim.range->token + "' AND low = 3 AND high = 8"),
            1);

  // Nothing new: the lock and the COMMIT, nothing written.
  const auto idle = gs.observe();
  proxy.reset();
  const auto empty = gs.claim(idle, 1000, std::chrono::seconds(30));
  EXPECT_EQ(proxy.turns(), 2) << "BEGIN + lock, COMMIT";
  EXPECT_FALSE(empty.range);
  EXPECT_FALSE(empty.wrote);
}

// A statement of the block that fails leaves the connection usable: the block is rolled back
// before the next claim, which then works (no "current transaction is aborted").
TEST_F(ClaimRoundTrips, AFailedClaimRollsItsBlockBackAndTheNextClaimWorks) {
  auto s = session();
  auto gs = group_store(*s, charge_.id);
  db_.sql("SELECT sqlstreams.produce('payments.requested', '{\"n\":1}')");
  const auto obs = gs.observe();
  ASSERT_TRUE(obs.worth_claiming());
  // The lease table refuses every insert for now: the claim's cursor + lease statement fails.
  db_.sql("ALTER TABLE " + family_.leases + " ADD CONSTRAINT no_leases CHECK (low < 0) NOT VALID");
  EXPECT_THROW(gs.claim(obs, 1000, std::chrono::seconds(30)), store::StoreError);
  // Nothing of the failed claim stayed.
  EXPECT_EQ(db_.scalar<int64_t>("SELECT claimed FROM " + family_.cursors +
                                " WHERE group_id = " + std::to_string(charge_.id)),
            0);
  db_.sql("ALTER TABLE " + family_.leases + " DROP CONSTRAINT no_leases");
  const auto again = poll(gs);
  ASSERT_TRUE(again.range);
  EXPECT_EQ(again.range->messages.size(), 1u);
}

}  // namespace
}  // namespace sqlstreams::testing
