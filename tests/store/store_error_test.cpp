// How a failed statement reaches the caller (docs/design.md#errors-and-trust): the StoreError names
// the statement that failed — a prepared one under its prepared name, any other under its
// StatementName — and carries the classified SQLSTATE condition callers decide on (the CLI's "no
// schema yet" hint, the producer's heal), never SQLSTATE text.
#include <chrono>
#include <future>
#include <optional>
#include <pqxx/pqxx>
#include <string>
#include <thread>

#include "store/core/pq.hpp"
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
  db_.sql("DROP TABLE " + family_.cursors);
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

// A real serialization failure and a real deadlock, raised by PostgreSQL through libpqxx 6.4 (which
// throws both without their SQLSTATE, and not as sql_errors), reach the caller as transient
// StoreErrors with their codes: a caller retries them (on the old code both were kOther).
TEST_F(StoreErrorTest, ARealSerializationFailureIsTransient) {
  db_.sql(
      "CREATE TABLE public.probe (k int PRIMARY KEY, v int); INSERT INTO public.probe VALUES (1, "
      "0)");
  pqxx::connection c1(db_.url()), c2(db_.url());
  pqxx::transaction<pqxx::repeatable_read> t1(c1);
  t1.exec("SELECT count(*) FROM public.probe");  // the snapshot
  pqxx::nontransaction(c2).exec("UPDATE public.probe SET v = 1 WHERE k = 1");
  const auto e = failure_of([&] {
    store::guarded(*session_, "probe update", [&] {
      return store::named("probe_update",
                          [&] { return t1.exec("UPDATE public.probe SET v = 2 WHERE k = 1"); });
    });
  });
  EXPECT_EQ(e.kind(), store::StoreError::Kind::kTransient) << e.what();
  EXPECT_EQ(e.sqlstate(), "40001") << e.what();
  EXPECT_EQ(e.condition(), store::Condition::kSerializationFailure);
  EXPECT_TRUE(contains(e, "probe update: statement probe_update: ")) << e.what();
}

TEST_F(StoreErrorTest, ARealDeadlockIsTransient) {
  db_.sql(
      "CREATE TABLE public.probe (k int PRIMARY KEY, v int); "
      "INSERT INTO public.probe VALUES (1, 0), (2, 0)");
  pqxx::connection c1(db_.url()), c2(db_.url());
  pqxx::work t1(c1), t2(c2);
  t1.exec("UPDATE public.probe SET v = 1 WHERE k = 1");
  t2.exec("UPDATE public.probe SET v = 1 WHERE k = 2");
  // Each then wants the other's row: PostgreSQL aborts one of them with 40P01 (after
  // deadlock_timeout) and the other goes on.
  auto update = [&](pqxx::work& t, int k) -> std::optional<store::StoreError> {
    try {
      store::guarded(*session_, "probe lock", [&] {
        return store::named("probe_lock", [&] {
          return t.exec("UPDATE public.probe SET v = 2 WHERE k = " + std::to_string(k));
        });
      });
    } catch (const store::StoreError& e) {
      return e;
    }
    return std::nullopt;
  };
  auto first = std::async(std::launch::async, [&] { return update(t1, 2); });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // t1 waits for t2's row first
  const auto second = update(t2, 1);
  const auto one = first.get();
  ASSERT_NE(one.has_value(), second.has_value()) << "exactly one of the two is the victim";
  const store::StoreError& e = one ? *one : *second;
  EXPECT_EQ(e.kind(), store::StoreError::Kind::kTransient) << e.what();
  EXPECT_EQ(e.sqlstate(), "40P01") << e.what();
  EXPECT_EQ(e.condition(), store::Condition::kDeadlock);
}

}  // namespace
}  // namespace sqlstreams::testing
