// tests/consume/stream_fixture — what every pipeline test starts from: a migrated test
// database with one declared stream (its table family in `family_`) and its groups, a producer into
// it, the pipeline options with the tests' fast polling, the real plugin registry, and a wait on a
// SQL condition. Threading: the test's thread.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "common/clock.hpp"
#include "consume/group_pipeline.hpp"
#include "plugin_host/plugin_host.hpp"
#include "store/connection/session.hpp"
#include "store/produce/producer.hpp"
#include "test_database.hpp"

namespace sqlstreams::consume {

class StreamFixture : public ::testing::Test {
 protected:
  // Migrates the database and declares `stream` (call once, first).
  void declare_stream(const std::string& stream, int64_t partition_size);
  // A group of the stream, reading from the beginning.
  store::GroupRef declare_group(const std::string& name,
                                store::OrderingMode ordering = store::OrderingMode::kNone);
  // One batch into the stream; each payload version 1 without a key.
  void produce(const std::vector<std::string>& payloads);
  void produce_messages(const std::vector<store::NewMessage>& batch);
  void produce_same(int n, const std::string& payload);
  // Options of a pipeline of `ref` as the tests run it: the group's name and stream set,
  // polling every 10 ms backing off to 50 ms, this fixture's session, holder `holder`.
  PipelineOptions fast_options(const store::GroupRef& ref, const std::string& holder = "test:1");
  // A pipeline of `g` (its plugin, handler and config) on `ref`, from the real plugin registry;
  // its deadlines on `steady` (null: the real steady clock).
  std::unique_ptr<GroupPipeline> plugin_pipeline(const config::GroupConfig& g,
                                                 const store::GroupRef& ref,
                                                 const SteadyClock* steady = nullptr);
  // The boolean query `sql` now (no row or NULL counts as false).
  bool sql_true(const std::string& sql);
  // Polls the boolean query `sql` (no row or NULL counts as false) until true or `timeout`.
  bool eventually_sql(const std::string& sql,
                      std::chrono::milliseconds timeout = std::chrono::seconds(30));

  sqlstreams::testing::TestDatabase db_{sqlstreams::testing::TestDatabase::Schema::kMigrated};
  store::SessionOptions opts_{db_.url()};
  store::StreamRef stream_;
  sqlstreams::testing::StreamFamily family_;  // stream_'s tables
  plugin_host::PluginRegistry registry_{SQLSTREAMS_PLUGIN_DIR};
};

}  // namespace sqlstreams::consume
