// Migrations: fresh apply, idempotent re-apply, concurrent runs, newer database refused,
// tampered checksum refused.
#include <thread>

#include "store_fixture.hpp"

namespace sqlstreams::testing {
namespace {

class MigrateTest : public ::testing::Test {
 protected:
  store::SessionOptions options() const {
    store::SessionOptions o;
    o.url = db_.url();
    return o;
  }
  TestDatabase db_;
};

TEST_F(MigrateTest, FreshApplyRecordsEveryVersionWithChecksum) {
  store::Session s(options());
  auto applied = store::migrate(s);
  ASSERT_EQ(applied.size(), store::embedded_migrations().size());
  EXPECT_EQ(
      db_.scalar<int>("SELECT count(*) FROM sqlstreams.migrations WHERE length(checksum) = 64"),
      static_cast<int>(applied.size()));
  EXPECT_TRUE(db_.scalar<bool>("SELECT to_regclass('sqlstreams.streams') IS NOT NULL"));
}

TEST_F(MigrateTest, ReapplyIsANoOp) {
  store::Session s(options());
  store::migrate(s);
  EXPECT_TRUE(store::migrate(s).empty());
  auto st = store::migration_status(s);
  EXPECT_TRUE(st.pending.empty());
  EXPECT_EQ(st.database_version, st.known_version);
}

TEST_F(MigrateTest, ConcurrentRunsApplyEachVersionOnce) {
  std::vector<std::thread> threads;
  std::atomic<int> applied_total{0}, failures{0};
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&] {
      try {
        store::Session s(options());
        applied_total += static_cast<int>(store::migrate(s).size());
      } catch (const std::exception& e) {
        ADD_FAILURE() << e.what();
        failures++;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(applied_total.load(), static_cast<int>(store::embedded_migrations().size()));
}

TEST_F(MigrateTest, NewerDatabaseIsRefused) {
  store::Session s(options());
  store::migrate(s);
  db_.sql(
      "INSERT INTO sqlstreams.migrations (version, file, checksum) VALUES (999, "
      "'V999__future.sql', 'x')");
  try {
    store::migrate(s);
    FAIL() << "expected a refusal";
  } catch (const store::StoreError& e) {
    EXPECT_EQ(e.kind(), store::StoreError::Kind::kRejected);
    EXPECT_NE(std::string(e.what()).find("newer than this binary"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("V999__future.sql"), std::string::npos) << e.what();
  }
  EXPECT_THROW(store::migration_status(s), store::StoreError);
}

TEST_F(MigrateTest, ChangedChecksumIsRefused) {
  store::Session s(options());
  store::migrate(s);
  db_.sql("UPDATE sqlstreams.migrations SET checksum = repeat('0', 64) WHERE version = 1");
  try {
    store::migrate(s);
    FAIL() << "expected a refusal";
  } catch (const store::StoreError& e) {
    EXPECT_NE(std::string(e.what()).find("was changed after it was applied"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("V001__control_plane.sql"), std::string::npos);
  }
}

TEST_F(MigrateTest, CustomSchemaIsHonoured) {
  store::SessionOptions o = options();
  o.schema = "ops_streams";
  store::Session s(o);
  store::migrate(s);
  EXPECT_TRUE(db_.scalar<bool>("SELECT to_regclass('ops_streams.streams') IS NOT NULL"));
  EXPECT_FALSE(db_.scalar<bool>("SELECT to_regclass('sqlstreams.streams') IS NOT NULL"));
  store::StreamSpec spec;
  spec.name = "orders";
  auto st = store::declare_stream(s, spec).stream;
  store::Producer p(s);
  EXPECT_EQ(p.produce("orders", {R"({"a":1})"}), 1);
  EXPECT_EQ(db_.scalar<int64_t>("SELECT ops_streams.produce('orders', '{\"b\":2}')"), 2);
  (void)st;
}

// docs/operating/security.md#secrets-and-configuration: the schema is spliced into the
// migrations' SQL, also inside string literals.
TEST_F(MigrateTest, SchemaThatIsNotAnIdentifierIsRefusedBeforeConnecting) {
  for (const char* bad : {"it's", "a\"b", "Upper", "1st", "", "x y", "s$1"}) {
    store::SessionOptions o = options();
    o.schema = bad;
    EXPECT_THROW(store::Session s(o), store::StoreError) << bad;
  }
  EXPECT_EQ(db_.scalar<int64_t>("SELECT count(*) FROM pg_namespace WHERE nspname = 'it''s'"), 0);
}

// Regression (docs/operating/security.md#secrets-and-configuration): any role could block
// migrate (and host start-up) for ever by holding the lock.
// Deterministic: the holder takes the lock before migrate starts waiting and keeps it.
TEST_F(MigrateTest, LockHolderIsNamedAfterTheTimeoutAndNothingIsApplied) {
  pqxx::connection blocker(db_.url());
  pqxx::nontransaction tx(blocker);
  const auto pid = tx.exec1("SELECT pg_backend_pid()")[0].as<int64_t>();
  tx.exec("SET application_name = 'ops-console'");
  tx.exec("SELECT pg_advisory_lock(hashtext('sqlstreams.migrate'))");
  store::Session s(options());
  try {
    store::migrate(s, Millis(300));
    FAIL() << "migrated while the lock was held";
  } catch (const store::StoreError& e) {
    const std::string text = e.what();
    EXPECT_EQ(e.sqlstate(), "55P03");
    EXPECT_NE(text.find("gave up after waiting 300ms for the migrations lock"), std::string::npos)
        << text;
    EXPECT_NE(text.find("held by pid " + std::to_string(pid) +
                        " (role postgres, application \"ops-console\", client "),
              std::string::npos)
        << text;
  }
  EXPECT_FALSE(db_.scalar<bool>("SELECT to_regclass('sqlstreams.migrations') IS NOT NULL"));
  tx.exec("SELECT pg_advisory_unlock(hashtext('sqlstreams.migrate'))");
  EXPECT_EQ(store::migrate(s, Millis(300)).size(), store::embedded_migrations().size())
      << "the same session migrates once the lock is free";
}

}  // namespace
}  // namespace sqlstreams::testing
