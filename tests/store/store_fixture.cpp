#include "store_fixture.hpp"

#include <stdexcept>
#include <string>

namespace sqlstreams::testing {

void apply_migration(const TestDatabase& db, int version) {
  for (const auto& m : store::embedded_migrations()) {
    if (m.version != version) continue;
    std::string sql = m.sql;
    for (size_t at = sql.find("@schema@"); at != std::string::npos; at = sql.find("@schema@")) {
      sql.replace(at, 8, "\"sqlstreams\"");
    }
    db.sql(sql);
    return;
  }
  throw std::runtime_error("no embedded migration V" + std::to_string(version));
}

void apply_migrations_before(const TestDatabase& db, int version) {
  db.sql("CREATE SCHEMA sqlstreams");
  db.sql(
      "CREATE TABLE sqlstreams.migrations (version integer PRIMARY KEY, file text, checksum "
      "text)");
  for (const auto& m : store::embedded_migrations()) {
    if (m.version < version) apply_migration(db, m.version);
  }
}

void StoreTest::SetUp() {
  session_ = session();
  store::migrate(*session_);
  stream_ = declare_stream("payments.requested");
  family_ = stream_family(stream_.id);
  charge_ =
      store::declare_group(*session_, stream_, "charge-cards", store::StartAt::kBeginning).group;
  audit_ =
      store::declare_group(*session_, stream_, "audit-payments", store::StartAt::kBeginning).group;
}

store::StreamRef StoreTest::declare_stream(const std::string& name) const {
  store::StreamSpec spec;
  spec.name = name;
  spec.partition_size = 1000;
  return store::declare_stream(*session_, spec).stream;
}

store::SessionOptions StoreTest::options() const {
  store::SessionOptions o;
  o.url = db_.url();
  return o;
}

void StoreTest::expire_leases() {
  db_.sql(
      "UPDATE " + family_.leases +
      " SET expires_at = statement_timestamp() - interval '1 ms' WHERE expires_at <> '-infinity'");
}

void StoreTest::expire_retry_leases() {
  db_.sql(
      "UPDATE " + family_.exceptions +
      " SET lease_expires_at = statement_timestamp() - interval '1 ms' WHERE status = 'inflight'");
}

std::unique_ptr<store::Session> StoreTest::session() const {
  return std::make_unique<store::Session>(options());
}

store::ClaimResult StoreTest::poll(store::GroupStore& gs, int32_t batch) {
  auto obs = gs.observe();
  if (!obs.worth_claiming()) return {};
  return gs.claim(obs, batch, std::chrono::seconds(30));
}

}  // namespace sqlstreams::testing
