// Poison-proof commits (docs/design.md#poison-proof-commits) through a real pipeline and a real
// PostgreSQL: an outcome the database refuses deterministically is isolated to its message, which
// ends dead with "commit rejected: …"; its innocent neighbours commit normally; nothing retries the
// refusal forever; stop() honours its deadline.
// The refusal is real: a CHECK constraint on the stream's exceptions_N that refuses a marked error
// text (SQLSTATE 23514), since everything a plugin hands over is already sanitized upstream.
#include <gtest/gtest.h>

#include <thread>

#include "stream_fixture.hpp"

namespace sqlstreams::consume {
namespace {

using namespace std::chrono_literals;
constexpr const char* kRefused = "REFUSED-BY-THE-DATABASE";

// Message 5: TERMINAL with the refused text. Message 3: RETRY on its first attempt, then
// TERMINAL with the refused text on the retry (the retry commit path). Message 8: an innocent
// RETRY. Everything else: OK.
class PoisonHandler final : public plugin_host::HandlerInstance {
 public:
  plugin_host::Outcome handle(const plugin_host::MessageView& m) noexcept override {
    using plugin_host::OutcomeKind;
    if (m.id == 5) return {OutcomeKind::kTerminal, {}, kRefused};
    if (m.id == 3) {
      if (m.attempt == 1) return {OutcomeKind::kRetry, {}, "first attempt fails"};
      return {OutcomeKind::kTerminal, {}, std::string("on retry: ") + kRefused};
    }
    if (m.id == 8) return {OutcomeKind::kRetry, {}, "provider unreachable"};
    return {};
  }
  bool concurrent() const override { return true; }
  const std::string& plugin_name() const override { return name_; }

 private:
  std::string name_ = "poison";
};

class PoisonCommitTest : public StreamFixture {
 protected:
  void SetUp() override {
    declare_stream("payments.requested", 10'000);
    group_ = declare_group("charge-cards");
    db_.sql("ALTER TABLE " + family_.exceptions +
            " ADD CONSTRAINT refuse_marked CHECK (last_error NOT LIKE '%" + kRefused + "%')");
    produce_same(20, R"({"order_id":"o"})");
  }
  std::unique_ptr<GroupPipeline> pipeline() {
    PipelineOptions o = fast_options(group_);
    o.group.concurrency = 2;
    o.group.batch_size = 10;  // two ranges; the poison one shares a commit with an innocent one
    o.group.lease_ttl = 10s;
    o.group.handler_timeout = 2s;
    o.group.retry.initial_backoff = 100ms;
    o.group.retry.base_delay = 100ms;
    o.group.retry.max_delay = 1s;
    // Message 8 retries until the pipeline stops, never dead: with the default 3 retries a slow
    // TSan run (a fresh clone of 120d0c9) spent its last attempt before message 3 ended dead.
    o.group.retry.max_retries = 1000;
    return std::make_unique<GroupPipeline>(o, std::make_unique<PoisonHandler>());
  }
  std::string row(int64_t id) {
    auto r = db_.sql("SELECT status || '|' || last_error FROM " + family_.exceptions +
                     " WHERE message_id = " + std::to_string(id));
    return r.empty() ? "<none>" : r[0][0].as<std::string>();
  }

  store::GroupRef group_;
};

TEST_F(PoisonCommitTest, RefusedOutcomeIsIsolatedAndDeadWhileNeighboursCommit) {
  auto p = pipeline();
  p->start();
  // Both ranges resolve (no lease left) and the retried message 3 ends dead too.
  ASSERT_TRUE(eventually_sql("SELECT (SELECT claimed FROM " + family_.cursors +
                             ") >= 20 AND NOT EXISTS (SELECT 1 FROM " + family_.leases +
                             ") AND EXISTS (SELECT 1 FROM " + family_.exceptions +
                             " WHERE message_id = 3 AND status = 'dead')"))
      << "the group wedged: leases=" << db_.scalar<int>("SELECT count(*) FROM " + family_.leases)
      << " message 3: " << row(3);
  auto deadline = std::chrono::steady_clock::now() + 5s;
  EXPECT_TRUE(p->stop(deadline));
  EXPECT_LT(std::chrono::steady_clock::now(), deadline + 1s);

  // PostgreSQL names the relation unqualified: exceptions_N.
  const std::string refused = "dead|commit rejected: 23514 new row for relation \"exceptions_" +
                              std::to_string(family_.id) +
                              "\" violates check constraint \"refuse_marked\"";
  EXPECT_EQ(row(5), refused);
  EXPECT_EQ(row(3), refused);
  EXPECT_EQ(db_.scalar<int>("SELECT count(*) FROM " + family_.exceptions +
                            " WHERE message_id = 5 AND payload IS NOT NULL"),
            1)
      << "the dead letter keeps its payload";
  EXPECT_EQ(row(8), "ready|provider unreachable") << "an innocent neighbour is recorded normally";
  EXPECT_EQ(db_.scalar<int>("SELECT count(*) FROM " + family_.exceptions), 3)
      << "the other 17 messages succeeded";
  EXPECT_EQ(p->metrics().get(sqlstreams::consume::GroupCounter::kCommitRejected), 2u);
  EXPECT_EQ(p->metrics().get(sqlstreams::consume::GroupCounter::kRangesCommitted), 2u);
  EXPECT_EQ(p->metrics().get(sqlstreams::consume::GroupCounter::kLeaseLost), 0u);
  EXPECT_EQ(p->metrics().commit_stalled_for(), std::chrono::steady_clock::duration{});
}

}  // namespace
}  // namespace sqlstreams::consume
