// service::PipelineSet and service::declare_all against a real PostgreSQL with the real noop.so:
// declaring is idempotent; a pipeline added to the set runs its group; stopping with carry keeps
// its counts for the pipeline that replaces it (so /metrics counters only grow), stopping
// without forgets them; the readers (keys, ids, samples, health) follow.
#include "service/pipeline_set.hpp"

#include <gtest/gtest.h>

#include <pqxx/pqxx>

#include "plugin_host/plugin_host.hpp"
#include "scratch.hpp"
#include "service/declare.hpp"
#include "store/produce/producer.hpp"
#include "store/schema/migrate.hpp"
#include "test_database.hpp"

namespace sqlstreams::service {
namespace {

using namespace std::chrono_literals;
using ops::GroupCounter;

class PipelineSetTest : public ::testing::Test {
 protected:
  void SetUp() override {
    session_.url = db_.url();
    config::StreamConfig s;
    s.name = "payments.requested";
    s.partition_size = 10'000;
    config_.streams.push_back(s);
    config::GroupConfig g;
    g.name = "charge-cards";
    g.stream = s.name;
    g.plugin = "noop.so";
    g.handler = "noop";
    g.concurrency = 2;
    g.batch_size = 10;
    g.poll_interval = 10ms;
    g.max_poll_interval = 50ms;
    g.lease_ttl = 10s;
    g.handler_timeout = 2s;
    config_.groups.push_back(g);
    store::Session session(session_);
    store::migrate(session);
    declare_all(session, config_);
    ref_ = *store::find_group(session, s.name, g.name);
  }
  PipelineSet::Entry entry(const std::string& sha) {
    consume::PipelineOptions o;
    o.group = config_.groups[0];
    o.session = session_;
    o.ref = ref_;
    o.holder = "pipeline-set-test:1";
    o.run_advancer = false;
    auto handler = registry_.create("noop.so", "noop", "{}", ref_.stream, ref_.name);
    return {config_.groups[0], ref_,
            std::make_unique<consume::GroupPipeline>(std::move(o), std::move(handler)),
            ops::PluginVersion{.sha256 = sha}};
  }
  void produce(int n) {
    store::Session s(session_);
    store::Producer p(s);
    std::vector<store::NewMessage> batch(n, store::NewMessage{R"({"order_id":"o"})"});
    p.produce_batch("payments.requested", batch);
  }
  uint64_t succeeded() const {
    auto samples = set_.samples();
    return samples.size() == 1 ? samples[0][GroupCounter::kSucceeded] : 0;
  }
  std::chrono::steady_clock::time_point soon() const {
    return std::chrono::steady_clock::now() + 20s;
  }

  testing::TestDatabase db_{testing::TestDatabase::Schema::kMigrated};
  store::SessionOptions session_;
  config::Config config_;
  store::GroupRef ref_;
  plugin_host::PluginRegistry registry_{SQLSTREAMS_PLUGIN_DIR};
  PipelineSet set_;
  const std::string key_ = "payments.requested/charge-cards";
};

TEST_F(PipelineSetTest, DeclaringTwiceCreatesNothingNew) {
  store::Session session(session_);
  declare_all(session, config_);
  EXPECT_EQ(store::find_group(session, ref_.stream, ref_.name)->id, ref_.id);
  EXPECT_EQ(db_.scalar<int64_t>("SELECT count(*) FROM sqlstreams.groups"), 1);
  EXPECT_EQ(db_.scalar<int64_t>("SELECT count(*) FROM sqlstreams.streams"), 1);
}

TEST_F(PipelineSetTest, RunsStopsAndCarriesCountsToTheNextPipeline) {
  EXPECT_EQ(set_.size(), 0u);
  EXPECT_TRUE(set_.samples().empty());
  set_.add(key_, entry("sha-1"), /*start=*/true);
  EXPECT_EQ(set_.keys(), std::vector<std::string>{key_});
  EXPECT_EQ(set_.group_ids(), std::vector<int64_t>{ref_.id});
  EXPECT_EQ(set_.plugin_sha256(key_), "sha-1");
  EXPECT_EQ(set_.plugin_sha256("other/group"), std::nullopt);
  std::string why;
  EXPECT_TRUE(set_.healthy(&why)) << why;
  EXPECT_TRUE(set_.dropped().empty());

  produce(20);
  ASSERT_TRUE(testing::wait_until([&] { return succeeded() == 20; }, 20s)) << succeeded();
  ASSERT_EQ(set_.samples_by_group_id().count(ref_.id), 1u);
  EXPECT_EQ(set_.samples_by_group_id().at(ref_.id)[GroupCounter::kMessagesClaimed], 20u);

  // A retune: stopped with carry, replaced by a new pipeline that adds to the same counts.
  EXPECT_TRUE(set_.stop({key_}, {key_}, soon(), {}));
  EXPECT_EQ(set_.size(), 0u);
  EXPECT_TRUE(set_.samples().empty()) << "a stopped pipeline is neither running nor draining";
  set_.add(key_, entry("sha-2"), /*start=*/true);
  EXPECT_EQ(set_.plugin_sha256(key_), "sha-2");
  EXPECT_EQ(succeeded(), 20u) << "carried over";
  produce(5);
  ASSERT_TRUE(testing::wait_until([&] { return succeeded() == 25; }, 20s)) << succeeded();

  // A removal: stopped without carry, its counts are forgotten.
  EXPECT_TRUE(set_.stop({key_}, {}, soon(), {}));
  set_.add(key_, entry("sha-3"), /*start=*/true);
  EXPECT_EQ(succeeded(), 0u);
  EXPECT_TRUE(set_.stop({key_, "not/running"}, {}, soon(), {}));
}

TEST_F(PipelineSetTest, AnOpenProducerFailsReadyzOnlyWhenTheGroupAsksAndOnlyWhileItLasts) {
  config_.groups[0].fence_warn_after = 200ms;
  config_.groups[0].fence_fails_readyz = true;
  set_.add(key_, entry("sha-1"), /*start=*/true);
  pqxx::connection open_conn(db_.url());
  pqxx::work open(open_conn);
  open.exec("SELECT sqlstreams.produce('payments.requested', '{\"order_id\":\"open\"}')");
  produce(5);  // later ids, committed: they wait for the open producer's id
  std::string why;
  ASSERT_TRUE(testing::wait_until([&] { return !set_.healthy(&why); }, 20s));
  EXPECT_NE(why.find("held for"), std::string::npos) << why;
  EXPECT_NE(why.find("fence_fails_readyz"), std::string::npos) << why;
  EXPECT_GT(set_.samples().at(0).fence_wait_seconds, 0.2);
  EXPECT_EQ(succeeded(), 0u);
  open.commit();
  ASSERT_TRUE(testing::wait_until([&] { return succeeded() == 6; }, 20s)) << succeeded();
  EXPECT_TRUE(set_.healthy(&why)) << why;
  EXPECT_EQ(set_.samples().at(0).fence_wait_seconds, 0.0);
  EXPECT_TRUE(set_.stop({key_}, {}, soon(), {}));
}

TEST_F(PipelineSetTest, AnOpenProducerLeavesReadyzAloneByDefault) {
  config_.groups[0].fence_warn_after = 100ms;
  set_.add(key_, entry("sha-1"), /*start=*/true);
  pqxx::connection open_conn(db_.url());
  pqxx::work open(open_conn);
  open.exec("SELECT sqlstreams.produce('payments.requested', '{\"order_id\":\"open\"}')");
  produce(5);
  ASSERT_TRUE(
      testing::wait_until([&] { return set_.samples().at(0).fence_wait_seconds > 0.3; }, 20s));
  std::string why;
  EXPECT_TRUE(set_.healthy(&why)) << why;
  open.commit();
  ASSERT_TRUE(testing::wait_until([&] { return succeeded() == 6; }, 20s)) << succeeded();
  EXPECT_TRUE(set_.stop({key_}, {}, soon(), {}));
}

}  // namespace
}  // namespace sqlstreams::service
