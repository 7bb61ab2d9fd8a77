// How a failed statement reaches the caller (issue 15): the StoreError names the statement that
// failed — a prepared one under its prepared name, any other under its StatementName — and
// carries the classified SQLSTATE condition callers decide on (the CLI's "no schema yet" hint,
// the producer's heal), never SQLSTATE text.
#include <string>

#include "store_fixture.hpp"

namespace sqlstreams::testing {
namespace {

using StoreErrorTest = StoreTest;

bool contains(const store::StoreError& e, const std::string& part) {
  return std::string(e.what()).find(part) != std::string::npos;
}

// Runs `fn`, expecting a StoreError; returns it.
template <class Fn>
store::StoreError failure_of(Fn&& fn) {
  try {
    fn();
  } catch (const store::StoreError& e) {
    return e;
  }
  ADD_FAILURE() << "no StoreError";
  return store::StoreError(store::StoreError::Kind::kOther, "none");
}

TEST_F(StoreErrorTest, APreparedStatementFailureNamesThePreparedStatement) {
  auto gs = group_store(*session_, charge_.id);
  db_.sql("DROP TABLE sqlstreams.cursors_1");
  const auto e = failure_of([&] { gs.observe(); });
  EXPECT_TRUE(contains(e, "observe: statement sqlstreams_observe_1: ")) << e.what();
  EXPECT_EQ(e.condition(), store::Condition::kUndefinedTable);
  EXPECT_TRUE(e.schema_missing());
  EXPECT_FALSE(e.deterministic());
}

TEST_F(StoreErrorTest, AnyOtherStatementFailureNamesItsStatement) {
  db_.sql("ALTER TABLE sqlstreams.streams RENAME TO streams_elsewhere");
  const auto e = failure_of([&] { store::find_stream(*session_, "payments.requested"); });
  EXPECT_TRUE(contains(e, "find stream: statement find_stream: ")) << e.what();
  EXPECT_TRUE(contains(e, "does not exist")) << e.what();
  EXPECT_EQ(e.sqlstate(), "42P01");
  EXPECT_TRUE(e.schema_missing());
}

}  // namespace
}  // namespace sqlstreams::testing
