// GroupPipeline with a group that emits (docs/operating/emits.md): the real async_io.so emits
// {"from": id} when it accepts a message, against a real PostgreSQL. Every message that ends OK
// has exactly one output in the target stream and no other message has any — also when the
// pipeline is stopped halfway (its partial commits) and another one finishes the rest, and when
// the first attempt of a message fails and a retry succeeds.
#include <gtest/gtest.h>

#include <set>
#include <thread>

#include "store/schema/catalog.hpp"
#include "store/schema/migrate.hpp"
#include "stream_fixture.hpp"

namespace sqlstreams::consume {
namespace {

using namespace std::chrono_literals;

class EmitPipelineTest : public StreamFixture {
 protected:
  void SetUp() override {
    store::Session s(opts_);
    store::migrate(s);
    store::StreamSpec spec;
    spec.name = "calls.done";
    spec.partition_size = 10'000;
    out_ = store::declare_stream(s, spec).stream;
    declare_stream("calls.requested", 10'000);
    ref_ = declare_group("call-api");
  }
  config::GroupConfig group(const std::string& plugin_config) {
    config::GroupConfig g;
    g.name = "call-api";
    g.stream = "calls.requested";
    g.plugin = "async_io.so";
    g.handler = "timer-io";
    g.concurrency = 1;
    g.batch_size = 20;
    g.poll_interval = 10ms;
    g.max_poll_interval = 50ms;
    g.lease_ttl = 20s;
    g.handler_timeout = 10s;
    g.retry.initial_backoff = 60s;
    g.emits = {"calls.done"};
    g.plugin_config_json = plugin_config;
    return g;
  }
  std::unique_ptr<GroupPipeline> pipeline(const config::GroupConfig& g) {
    PipelineOptions o = fast_options(ref_);
    o.group = g;
    o.emit_targets = {out_};
    return std::make_unique<GroupPipeline>(
        o, registry_.create(g.plugin, g.handler, g.plugin_config_json, g.stream, g.name));
  }
  // The source id of every output, in output id order.
  std::vector<int64_t> outputs() {
    std::vector<int64_t> from;
    for (const auto& row :
         db_.sql("SELECT (payload->>'from')::bigint FROM " +
                 sqlstreams::testing::stream_family(out_.id).messages + " ORDER BY id")) {
      from.push_back(row[0].as<int64_t>());
    }
    return from;
  }
  bool all_committed(int n) {
    return eventually_sql("SELECT committed >= " + std::to_string(n) +
                          " AND NOT EXISTS (SELECT 1 FROM " + family_.leases + ") FROM " +
                          family_.cursors);
  }
  store::StreamRef out_;
  store::GroupRef ref_;
};

TEST_F(EmitPipelineTest, EachOkMessageHasExactlyOneOutputAndAFailedOneNone) {
  std::vector<std::string> payloads;
  std::set<int64_t> ok;
  for (int i = 1; i <= 200; ++i) {
    const bool fails = i % 7 == 0;
    payloads.push_back(std::string(R"({"emit_to": "calls.done", "delay_ms": )") +
                       std::to_string(i % 5) + (fails ? R"(, "outcome": "retry"})" : "}"));
    if (!fails) ok.insert(i);
  }
  produce(payloads);
  auto p = pipeline(group("{}"));
  p->start();
  // The failed ones wait a minute for their retry (and hold `committed` below them).
  ASSERT_TRUE(eventually_sql("SELECT c.claimed >= 200 AND NOT EXISTS (SELECT 1 FROM " +
                             family_.leases + ") AND (SELECT count(*) FROM " + family_.exceptions +
                             ") = " + std::to_string(200 - ok.size()) + " FROM " + family_.cursors +
                             " c"));
  EXPECT_TRUE(p->stop(std::chrono::steady_clock::now() + 5s));
  const auto out = outputs();
  EXPECT_EQ(std::set<int64_t>(out.begin(), out.end()), ok);
  EXPECT_EQ(out.size(), ok.size()) << "an output was written twice";
}

TEST_F(EmitPipelineTest, AStopHalfwayAndAnotherPipelineWriteEveryOutputOnce) {
  std::vector<std::string> payloads;
  for (int i = 1; i <= 300; ++i) {
    payloads.push_back(R"({"emit_to": "calls.done", "delay_ms": )" + std::to_string(i % 40) + "}");
  }
  produce(payloads);
  {
    auto first = pipeline(group("{}"));
    first->start();
    ASSERT_TRUE(eventually_sql("SELECT count(*) >= 60 FROM " +
                               sqlstreams::testing::stream_family(out_.id).messages));
    // Stops with ranges in flight: the finished prefixes commit (with their outputs), the rest
    // is handed back.
    first->stop(std::chrono::steady_clock::now() + 5s);
  }
  auto second = pipeline(group("{}"));
  second->start();
  ASSERT_TRUE(all_committed(300));
  second->stop(std::chrono::steady_clock::now() + 5s);
  const auto out = outputs();
  std::set<int64_t> distinct(out.begin(), out.end());
  EXPECT_EQ(distinct.size(), 300u);
  EXPECT_EQ(out.size(), 300u) << "an output was written twice";
}

}  // namespace
}  // namespace sqlstreams::consume
