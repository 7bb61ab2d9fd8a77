#include "store_fixture.hpp"

namespace sqlstreams::testing {

void StoreTest::SetUp() {
  session_ = session();
  store::migrate(*session_);
  store::StreamSpec spec;
  spec.name = "payments.requested";
  spec.partition_size = 1000;
  stream_ = store::declare_stream(*session_, spec).stream;
  charge_ = store::declare_group(*session_, stream_, "charge-cards", store::StartAt::kBeginning).group;
  audit_ = store::declare_group(*session_, stream_, "audit-payments", store::StartAt::kBeginning).group;
}

store::SessionOptions StoreTest::options() const {
  store::SessionOptions o;
  o.url = db_.url();
  return o;
}

std::unique_ptr<store::Session> StoreTest::session() const {
  return std::make_unique<store::Session>(options());
}

store::ClaimResult StoreTest::poll(store::GroupStore& gs, int32_t batch) {
  auto obs = gs.observe();
  if (!obs.worth_claiming()) return {};
  return gs.claim(obs, batch, now_, std::chrono::seconds(30));
}

}  // namespace sqlstreams::testing
