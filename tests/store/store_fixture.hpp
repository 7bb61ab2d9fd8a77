// tests/store/store_fixture — a fresh database, migrated, with stream `payments.requested`
// (its table family in `family_`) and groups `charge-cards` / `audit-payments`; raw SQL helpers
// for producers.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <memory>

#include "store/connection/session.hpp"
#include "store/group/group_store.hpp"
#include "store/produce/producer.hpp"
#include "store/schema/catalog.hpp"
#include "store/schema/migrate.hpp"
#include "test_database.hpp"

namespace sqlstreams::testing {

// The number of rows in the message table of `stream`.
inline int64_t count_messages(const TestDatabase& db,
                              const std::string& stream = "payments.requested") {
  return db.scalar<int64_t>("SELECT count(*) FROM " + stream_family(db, stream).messages);
}

// A producer holding its own transaction open across test steps.
struct OpenProducer {
  explicit OpenProducer(const std::string& url) : conn(url), tx(conn) {}
  int64_t produce(const std::string& json) {
    return tx.exec("SELECT sqlstreams.produce('payments.requested', " + tx.quote(json) + ")")[0][0]
        .as<int64_t>();
  }
  void take_xid() { tx.exec("SELECT pg_current_xact_id()"); }
  int pid() { return tx.exec("SELECT pg_backend_pid()")[0][0].as<int>(); }
  pqxx::connection conn;
  pqxx::work tx;
};

// Runs `release` when a test leaves before dismiss() (a failed ASSERT). Declared after the
// futures of threads that wait for what `release` ends (an open producer's transaction, an
// advisory lock), it runs before their destructors join them: the test fails instead of hanging.
class ReleaseOnEarlyExit {
 public:
  explicit ReleaseOnEarlyExit(std::function<void()> release) : release_(std::move(release)) {}
  ReleaseOnEarlyExit(const ReleaseOnEarlyExit&) = delete;
  ReleaseOnEarlyExit& operator=(const ReleaseOnEarlyExit&) = delete;
  ~ReleaseOnEarlyExit() {
    if (!release_) return;
    try {
      release_();
    } catch (...) {  // the test has failed already; its own report says why
    }
  }
  void dismiss() { release_ = nullptr; }

 private:
  std::function<void()> release_;
};

// Tests of what one migration does to a family that an older template made: applies the embedded
// migrations before `version` by hand to an empty `db` (schema "sqlstreams", its migrations table
// made first), then apply_migration(db, version) applies that one.
void apply_migrations_before(const TestDatabase& db, int version);
void apply_migration(const TestDatabase& db, int version);

class StoreTest : public ::testing::Test {
 protected:
  void SetUp() override;
  store::SessionOptions options() const;
  std::unique_ptr<store::Session> session() const;
  store::GroupStore group_store(store::Session& s, int64_t group_id,
                                const std::string& holder = "test:1") const {
    return store::GroupStore(s, stream_.id, group_id, holder);
  }
  // Declares stream `name` with partition_size 1000 (as the fixture's own stream).
  store::StreamRef declare_stream(const std::string& name) const;
  // A claim cycle as the claimer runs it: observe, then claim when worth it.
  store::ClaimResult poll(store::GroupStore& gs, int32_t batch = 1000);
  // Expiry is judged on the database's clock: a test makes every range lease (handed-back
  // ones excepted) or row lease of the stream expire by writing the expiry itself.
  void expire_leases();
  void expire_retry_leases();

  TestDatabase db_{TestDatabase::Schema::kMigrated};
  std::unique_ptr<store::Session> session_;
  store::StreamRef stream_;
  StreamFamily family_;  // stream_'s tables
  store::GroupRef charge_, audit_;
  // A host wall-clock instant for records (audit times); expiries never use it.
  SysTime now_ = SysTime(std::chrono::milliseconds(1'800'000'000'000));
};

}  // namespace sqlstreams::testing
