#include "stream_fixture.hpp"

#include <thread>

#include "store/schema/migrate.hpp"

namespace sqlstreams::consume {

void StreamFixture::declare_stream(const std::string& stream, int64_t partition_size) {
  store::Session s(opts_);
  store::migrate(s);
  store::StreamSpec spec;
  spec.name = stream;
  spec.partition_size = partition_size;
  stream_ = store::declare_stream(s, spec).stream;
  family_ = sqlstreams::testing::stream_family(stream_.id);
}

store::GroupRef StreamFixture::declare_group(const std::string& name,
                                             store::OrderingMode ordering) {
  store::Session s(opts_);
  return store::declare_group(s, stream_, name, store::StartAt::kBeginning,
                              store::kDeclareProofTimeout, ordering)
      .group;
}

void StreamFixture::produce(const std::vector<std::string>& payloads) {
  std::vector<store::NewMessage> batch;
  for (const auto& j : payloads) batch.push_back({j});
  produce_messages(batch);
}

void StreamFixture::produce_messages(const std::vector<store::NewMessage>& batch) {
  store::Session s(opts_);
  store::Producer(s).produce_batch(stream_.name, batch);
}

void StreamFixture::produce_same(int n, const std::string& payload) {
  produce(std::vector<std::string>(static_cast<size_t>(n), payload));
}

PipelineOptions StreamFixture::fast_options(const store::GroupRef& ref, const std::string& holder) {
  PipelineOptions o;
  o.group.name = ref.name;
  o.group.stream = ref.stream;
  o.group.poll_interval = std::chrono::milliseconds(10);
  o.group.max_poll_interval = std::chrono::milliseconds(50);
  o.session = opts_;
  o.ref = ref;
  o.holder = holder;
  return o;
}

std::unique_ptr<GroupPipeline> StreamFixture::plugin_pipeline(const config::GroupConfig& g,
                                                              const store::GroupRef& ref,
                                                              const SteadyClock* steady) {
  PipelineOptions o = fast_options(ref);
  o.group = g;
  if (steady != nullptr) o.steady_clock = steady;
  return std::make_unique<GroupPipeline>(
      o, registry_.create(g.plugin, g.handler, g.plugin_config_json, g.stream, g.name));
}

bool StreamFixture::sql_true(const std::string& sql) {
  auto r = db_.sql(sql);
  return !r.empty() && !r[0][0].is_null() && r[0][0].as<bool>();
}

bool StreamFixture::eventually_sql(const std::string& sql, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  const testing::PollingConnections reuse;  // one connection for the polls (tests/support)
  for (;;) {
    if (sql_true(sql)) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

}  // namespace sqlstreams::consume
