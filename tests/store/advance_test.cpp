// The cursor advancer against an operator rewind
// (docs/design.md#the-committed-cursor-and-the-advancer), as a deterministic interleaving on
// separate connections: advancer statement 1, rewind, a fresh claim, advancer statement 2. The
// write must apply only under the cursor generation it read.
#include "store/reporting/operator_actions.hpp"
#include "store_fixture.hpp"

namespace sqlstreams::testing {
namespace {

using AdvanceTest = StoreTest;

int64_t committed_of(const TestDatabase& db, const store::GroupRef& group) {
  return db.scalar<int64_t>("SELECT committed FROM " + stream_family(group.stream_id).cursors +
                            " WHERE group_id = " + std::to_string(group.id));
}

TEST_F(AdvanceTest, TargetReadBeforeARewindCannotMoveCommittedPastTheFreshLease) {
  store::Producer p(*session_);
  std::vector<store::NewMessage> batch(10, store::NewMessage{R"({"n":1})"});
  p.produce_batch("payments.requested", batch);
  auto claimer_session = session();
  auto claimer = group_store(*claimer_session, charge_.id);
  auto first = poll(claimer);
  ASSERT_TRUE(first.range);
  ASSERT_EQ(first.range->high, 10);
  store::RangeCommit done;
  done.token = first.range->token;
  done.resolved_upto = 10;
  ASSERT_EQ(claimer.commit_ranges({done}), std::vector<bool>{true});

  auto advancer_session = session();
  auto advancer = group_store(*advancer_session, charge_.id, "advancer:1");
  auto target = advancer.read_advance_target();  // statement 1: target 10
  ASSERT_EQ(target.target, 10);

  auto rewound = store::rewind_group(*session_, charge_, 0, std::nullopt, "test");
  EXPECT_EQ(rewound.position, 0);
  auto again = poll(claimer);  // a claimer claims (0, 10] again: a live lease
  ASSERT_TRUE(again.range);
  ASSERT_EQ(again.range->low, 0);
  ASSERT_EQ(again.range->high, 10);

  // Statement 2 with the stale target: `claimed >= 10` holds again, the generation does not.
  EXPECT_FALSE(advancer.apply_advance(target));
  EXPECT_EQ(committed_of(db_, charge_), 0) << "committed passed the live lease (0, 10]";
  EXPECT_EQ(advancer.advance_cursor().committed_after, 0) << "the lease holds it back";

  // Once the re-delivered range resolves, the advancer moves on under the new generation.
  done.token = again.range->token;
  ASSERT_EQ(claimer.commit_ranges({done}), std::vector<bool>{true});
  auto fresh = advancer.read_advance_target();
  EXPECT_EQ(fresh.generation, target.generation + 1);
  EXPECT_TRUE(advancer.apply_advance(fresh));
  EXPECT_EQ(committed_of(db_, charge_), 10);
}

}  // namespace
}  // namespace sqlstreams::testing
