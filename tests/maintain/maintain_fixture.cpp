#include "maintain_fixture.hpp"

#include "store/reporting/stream_settings.hpp"

namespace sqlstreams::testing {

void MaintainTest::declare(int64_t partition_size, std::optional<Millis> retention,
                           bool allow_drop) {
  if (!session_) {
    session_ = session();
    store::migrate(*session_);
  }
  store::StreamSpec spec;
  spec.name = "payments.requested";
  spec.partition_size = partition_size;
  spec.retention = retention;
  spec.allow_drop_past_committed = allow_drop;
  auto declared = store::declare_stream(*session_, spec);
  stream_ = declared.stream;
  family_ = stream_family(stream_.id);
  if (!declared.created) {  // fleet settings change only on purpose (V008): as `stream set`
    store::StreamSettingsChange change;
    change.retention = retention;
    change.allow_drop_past_committed = allow_drop;
    store::set_stream_settings(*session_, spec.name, change, "test");
  }
  charge_ =
      store::declare_group(*session_, stream_, "charge-cards", store::StartAt::kBeginning).group;
  audit_ =
      store::declare_group(*session_, stream_, "audit-payments", store::StartAt::kBeginning).group;
}

store::SessionOptions MaintainTest::options() const {
  store::SessionOptions o;
  o.url = db_.url();
  return o;
}

std::unique_ptr<store::Session> MaintainTest::session() const {
  return std::make_unique<store::Session>(options());
}

int64_t MaintainTest::produce(int n) {
  store::Producer p(*session_);
  std::vector<store::NewMessage> batch;
  for (int i = 1; i <= n; ++i) batch.push_back({R"({"n":)" + std::to_string(i) + "}"});
  return p.produce_batch(stream_.name, batch).back();
}

void MaintainTest::age(int64_t first, int64_t last, int days) {
  db_.sql("UPDATE " + family_.messages + " SET created_at = " + "to_timestamp(" +
          std::to_string(now_.time_since_epoch().count()) + " / 1000.0) - interval '" +
          std::to_string(days) + " days' WHERE id BETWEEN " + std::to_string(first) + " AND " +
          std::to_string(last));
}

void MaintainTest::set_committed(const store::GroupRef& g, int64_t committed) {
  const std::string c = std::to_string(committed);
  db_.sql("UPDATE " + family_.cursors + " SET claimed = " + c + ", committed = " + c +
          ", settled_head = GREATEST(settled_head, " + c +
          ") WHERE group_id = " + std::to_string(g.id));
}

int64_t MaintainTest::count(const std::string& table_where) const {
  return db_.scalar<int64_t>("SELECT count(*) FROM " + table_where);
}

bool MaintainTest::table_exists(const std::string& table) const {
  return db_.scalar<bool>("SELECT to_regclass('" + table + "') IS NOT NULL");
}

}  // namespace sqlstreams::testing
