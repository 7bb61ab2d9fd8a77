// Ordered groups (`ordering = "key"`, docs/design.md#per-key-ordering) against a real PostgreSQL
// with an in-process handler that records every call: one pipeline, then three pipelines of one
// group under distinct holders (hosts) with small ranges so that keys cross ranges and holders,
// with failures (RETRY once, DELAY once) and slow calls. Per key: the first successful completions
// are in id order, no two calls of a key overlap, no call starts before every earlier message
// of its key succeeded; every message ends succeeded. Then `ordering_dead`: "release" runs a
// dead message's successors, "hold" keeps them `deferred` until the dead letter is discarded.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "consume/group_pipeline.hpp"
#include "store/reporting/operator_actions.hpp"
#include "store/schema/catalog.hpp"
#include "stream_fixture.hpp"

namespace sqlstreams::consume {
namespace {

using namespace std::chrono_literals;
using Steady = std::chrono::steady_clock;

struct Call {
  int64_t id = 0;
  std::string key;
  int attempt = 0;
  Steady::time_point start, end;
  bool ok = false;
};

struct CallLog {
  std::mutex mu;
  std::vector<Call> calls;
  std::map<std::string, int> running;  // calls of a key running now
  std::vector<std::string> overlaps;
};

// Message ids that fail: `retry_once` RETRY on the first attempt, `delay_once` DELAY on the
// first, `always` TERMINAL (dead at once), `slow` sleep 20 ms.
// `emit_to`: every call also emits {"from": id} keyed like its message there (what a plugin's
// emit hands over; the pipeline keeps a success's outputs only).
struct Script {
  std::set<int64_t> retry_once, delay_once, always, slow;
  std::string emit_to;
};

// The three-host runs' script over ids 1..300: every 19th fails once, every 5th is slow.
std::shared_ptr<Script> three_host_script() {
  auto script = std::make_shared<Script>();
  for (int64_t id = 1; id <= 300; ++id) {
    if (id % 19 == 0) script->retry_once.insert(id);
    if (id % 5 == 0) script->slow.insert(id);
  }
  return script;
}

class OrderRecorder final : public plugin_host::HandlerInstance {
 public:
  OrderRecorder(std::shared_ptr<CallLog> log, std::shared_ptr<const Script> script)
      : log_(std::move(log)), script_(std::move(script)) {}
  plugin_host::Outcome handle(const plugin_host::MessageView& m) noexcept override {
    Call c;
    c.id = m.id;
    if (m.message_key) c.key = std::string(*m.message_key);
    c.attempt = m.attempt;
    c.start = Steady::now();
    {
      std::lock_guard l(log_->mu);
      if (!c.key.empty() && log_->running[c.key]++ > 0) {
        log_->overlaps.push_back(c.key + " at " + std::to_string(m.id));
      }
    }
    std::this_thread::sleep_for(script_->slow.count(m.id) ? 20ms : 1ms);
    plugin_host::Outcome out;
    if (script_->always.count(m.id)) {
      out = {plugin_host::OutcomeKind::kTerminal, {}, "always fails"};
    } else if (m.attempt == 1 && script_->retry_once.count(m.id)) {
      out = {plugin_host::OutcomeKind::kRetry, {}, "once"};
    } else if (m.attempt == 1 && script_->delay_once.count(m.id)) {
      out = {plugin_host::OutcomeKind::kDelay, 30ms, ""};
    }
    if (!script_->emit_to.empty()) {
      out.outputs.push_back(plugin_host::Output{
          script_->emit_to, R"({"from": )" + std::to_string(m.id) + "}", 1, c.key, {}});
    }
    c.end = Steady::now();
    c.ok = out.kind == plugin_host::OutcomeKind::kOk;
    std::lock_guard l(log_->mu);
    if (!c.key.empty()) log_->running[c.key]--;
    log_->calls.push_back(c);
    return out;
  }
  bool concurrent() const override { return true; }
  const std::string& plugin_name() const override { return name_; }

 private:
  std::shared_ptr<CallLog> log_;
  std::shared_ptr<const Script> script_;
  std::string name_ = "order-recorder";
};

class OrderedPipelineTest : public StreamFixture {
 protected:
  void SetUp() override { declare_stream("ledger.events", 100'000); }

  // `keys` keys, `per_key` messages each, interleaved; payloads carry nothing the test needs.
  void produce_keyed(int keys, int per_key) {
    std::vector<store::NewMessage> batch;
    for (int i = 0; i < per_key; ++i) {
      for (int k = 0; k < keys; ++k) {
        batch.push_back(store::NewMessage{R"({"n":1})", 1, "acct-" + std::to_string(k)});
      }
    }
    produce_messages(batch);
  }

  PipelineOptions ordered_options(const store::GroupRef& ref, const std::string& holder,
                                  config::OrderingDead dead = config::OrderingDead::kRelease) {
    auto o = fast_options(ref, holder);
    o.group.ordering = config::Ordering::kKey;
    o.group.ordering_dead = dead;
    o.group.concurrency = 8;
    o.group.batch_size = 25;
    o.group.queue_ranges = 3;
    o.group.retry.initial_backoff = 20ms;
    o.group.retry.base_delay = 20ms;
    o.group.retry.max_delay = 50ms;
    o.group.retry.max_retries = 3;
    return o;
  }

  // True once the group's cursor has committed `n` and it has no exception row left.
  std::string drained(const store::GroupRef& g, int n) const {
    const std::string id = std::to_string(g.id);
    return "SELECT (SELECT committed FROM " + family_.cursors + " WHERE group_id = " + id +
           ") = " + std::to_string(n) + " AND NOT EXISTS (SELECT 1 FROM " + family_.exceptions +
           " WHERE group_id = " + id + ")";
  }

  // The checks of the contract over the recorded calls; `dead` may not succeed.
  void expect_key_order(CallLog& log, const std::set<int64_t>& dead, bool hold) {
    std::lock_guard l(log.mu);
    EXPECT_TRUE(log.overlaps.empty()) << "calls of one key overlapped: " << log.overlaps.front();
    std::map<std::string, std::vector<Call>> by_key;
    for (const auto& c : log.calls) by_key[c.key].push_back(c);
    for (auto& [key, calls] : by_key) {
      std::sort(calls.begin(), calls.end(),
                [](const Call& a, const Call& b) { return a.start < b.start; });
      // Per key: when a call starts, every lower id of the key has resolved (succeeded, or
      // is dead under release) and no call of a higher id has started before.
      std::map<int64_t, Steady::time_point> resolved_at;  // first success (or the dead call)
      for (const auto& c : calls) {
        if ((c.ok || (dead.count(c.id) && !hold)) && !resolved_at.count(c.id)) {
          resolved_at[c.id] = c.end;
        }
      }
      std::set<int64_t> ids;
      for (const auto& c : calls) ids.insert(c.id);
      for (const auto& c : calls) {
        for (int64_t earlier : ids) {
          if (earlier >= c.id) break;
          auto r = resolved_at.find(earlier);
          EXPECT_TRUE(r != resolved_at.end() && r->second <= c.start)
              << key << ": message " << c.id << " (attempt " << c.attempt << ") started while "
              << earlier << " was unresolved";
        }
      }
    }
  }
};

TEST_F(OrderedPipelineTest, OneHostRunsEachKeyInIdOrderThroughRetriesAndDelays) {
  auto g = declare_group("ledger", store::OrderingMode::kKeyRelease);
  produce_keyed(12, 20);  // ids 1..240
  auto script = std::make_shared<Script>();
  for (int64_t id = 1; id <= 240; ++id) {
    if (id % 17 == 0) script->retry_once.insert(id);
    if (id % 23 == 0) script->delay_once.insert(id);
    if (id % 7 == 0) script->slow.insert(id);
  }
  auto log = std::make_shared<CallLog>();
  auto p = std::make_unique<GroupPipeline>(ordered_options(g, "test:1"),
                                           std::make_unique<OrderRecorder>(log, script));
  p->start();
  EXPECT_TRUE(eventually_sql(drained(g, 240), 60s));
  p->stop(Steady::now() + 10s);
  expect_key_order(*log, {}, false);
  std::lock_guard l(log->mu);
  std::set<int64_t> ok;
  for (const auto& c : log->calls) {
    if (c.ok) ok.insert(c.id);
  }
  EXPECT_EQ(ok.size(), 240u);
  EXPECT_GT(p->metrics().get(GroupCounter::kDeferred), 0u)
      << "a retried head's successors wait as deferred rows";
}

// Retry chains: a key whose head failed leaves its later messages as `deferred` rows; the
// retry claim takes each head with the rows behind it, and they run one after another here,
// each once the one before succeeded. A failure inside a chain ends it (the rest goes back to
// `deferred` and waits for that row), so order holds through retries and delays in the chains.
TEST_F(OrderedPipelineTest, ABlockedKeysDeferredRowsRunAsChainsThatStopAtAFailure) {
  auto g = declare_group("ledger", store::OrderingMode::kKeyRelease);
  produce_keyed(3, 60);  // ids 1..180; acct-k at k+1, k+4, ...
  auto script = std::make_shared<Script>();
  for (int64_t id = 1; id <= 3; ++id) script->retry_once.insert(id);  // every key's head
  for (int64_t id = 4; id <= 180; ++id) {
    if (id % 13 == 0) script->retry_once.insert(id);  // inside the chains
    if (id % 29 == 0) script->delay_once.insert(id);
  }
  auto log = std::make_shared<CallLog>();
  auto o = ordered_options(g, "test:1");
  o.group.batch_size = 200;  // one range: the heads fail, the rest of each key is deferred
  auto p = std::make_unique<GroupPipeline>(o, std::make_unique<OrderRecorder>(log, script));
  p->start();
  EXPECT_TRUE(eventually_sql(drained(g, 180), 60s));
  p->stop(Steady::now() + 10s);
  expect_key_order(*log, {}, false);
  EXPECT_GT(p->metrics().get(GroupCounter::kDeferred), 100u);
  EXPECT_GT(p->metrics().get(GroupCounter::kRetriesChained), 100u)
      << "the deferred rows ran behind their heads, not one claim each";
  std::lock_guard l(log->mu);
  std::set<int64_t> ok;
  for (const auto& c : log->calls) {
    if (c.ok) ok.insert(c.id);
  }
  EXPECT_EQ(ok.size(), 180u);
}

TEST_F(OrderedPipelineTest, ThreeHostsKeepEachKeyInOrderAcrossRangesAndHolders) {
  auto g = declare_group("ledger", store::OrderingMode::kKeyRelease);
  produce_keyed(10, 30);  // ids 1..300, 25 per range: every key in every range
  auto script = three_host_script();
  auto log = std::make_shared<CallLog>();
  std::vector<std::unique_ptr<GroupPipeline>> hosts;
  for (int h = 0; h < 3; ++h) {
    hosts.push_back(std::make_unique<GroupPipeline>(ordered_options(g, "host-" + std::to_string(h)),
                                                    std::make_unique<OrderRecorder>(log, script)));
  }
  for (auto& p : hosts) p->start();
  EXPECT_TRUE(eventually_sql(drained(g, 300), 90s));
  for (auto& p : hosts) p->stop(Steady::now() + 10s);
  expect_key_order(*log, {}, false);
}

// Outputs committed with the ack compose with ordering (docs/operating/emits.md): outputs keyed
// like their source appear in the target stream in source order per key — across three hosts,
// retries (whose failed calls' outputs are dropped) and deferred chains — one per message.
TEST_F(OrderedPipelineTest, OutputsKeyedLikeTheirSourceAppearInSourceOrderPerKey) {
  store::StreamRef out;
  {
    store::Session s(opts_);
    store::StreamSpec spec;
    spec.name = "ledger.out";
    spec.partition_size = 100'000;
    out = store::declare_stream(s, spec).stream;
  }
  auto g = declare_group("ledger", store::OrderingMode::kKeyRelease);
  produce_keyed(10, 30);  // ids 1..300, 25 per range: every key in every range
  auto script = three_host_script();
  script->emit_to = "ledger.out";
  auto log = std::make_shared<CallLog>();
  std::vector<std::unique_ptr<GroupPipeline>> hosts;
  for (int h = 0; h < 3; ++h) {
    auto o = ordered_options(g, "host-" + std::to_string(h));
    o.emit_targets = {out};
    hosts.push_back(
        std::make_unique<GroupPipeline>(o, std::make_unique<OrderRecorder>(log, script)));
  }
  for (auto& p : hosts) p->start();
  EXPECT_TRUE(eventually_sql(drained(g, 300), 90s));
  for (auto& p : hosts) p->stop(Steady::now() + 10s);
  std::map<std::string, std::vector<int64_t>> by_key;
  std::set<int64_t> sources;
  for (const auto& row :
       db_.sql("SELECT message_key, (payload->>'from')::bigint FROM " +
               sqlstreams::testing::stream_family(out.id).messages + " ORDER BY id")) {
    by_key[row[0].as<std::string>()].push_back(row[1].as<int64_t>());
    EXPECT_TRUE(sources.insert(row[1].as<int64_t>()).second)
        << "two outputs of " << row[1].as<int64_t>();
  }
  EXPECT_EQ(sources.size(), 300u);
  for (const auto& [key, from] : by_key) {
    EXPECT_TRUE(std::is_sorted(from.begin(), from.end())) << key << "'s outputs out of order";
  }
}

TEST_F(OrderedPipelineTest, DeadReleasesItsKeyUnderReleaseAndHoldsItUnderHold) {
  produce_keyed(2, 3);  // acct-0: 1, 3, 5; acct-1: 2, 4, 6
  auto script = std::make_shared<Script>();
  script->always.insert(1);  // acct-0's first message: TERMINAL, dead at once
  for (auto dead_mode : {config::OrderingDead::kRelease, config::OrderingDead::kHold}) {
    const bool hold = dead_mode == config::OrderingDead::kHold;
    SCOPED_TRACE(hold ? "hold" : "release");
    auto g = declare_group(hold ? "held" : "released",
                           hold ? store::OrderingMode::kKeyHold : store::OrderingMode::kKeyRelease);
    auto log = std::make_shared<CallLog>();
    auto p = std::make_unique<GroupPipeline>(ordered_options(g, "test:1", dead_mode),
                                             std::make_unique<OrderRecorder>(log, script));
    const std::string rows =
        "FROM " + family_.exceptions + " WHERE group_id = " + std::to_string(g.id);
    auto called = [&](int64_t id) {
      std::lock_guard l(log->mu);
      return std::any_of(log->calls.begin(), log->calls.end(),
                         [&](const Call& c) { return c.id == id; });
    };
    p->start();
    if (!hold) {
      EXPECT_TRUE(eventually_sql("SELECT (SELECT count(*) " + rows + ") = 1 AND (SELECT status " +
                                 rows + " AND message_id = 1) = 'dead'"));
      EXPECT_TRUE(eventually_sql("SELECT committed = 6 FROM " + family_.cursors +
                                 " WHERE group_id = " + std::to_string(g.id)));
      EXPECT_TRUE(called(3) && called(5)) << "release: the dead message's successors run";
    } else {
      EXPECT_TRUE(
          eventually_sql("SELECT array_agg(message_id || ':' || status ORDER BY "
                         "message_id) = '{1:dead,3:deferred,5:deferred}' " +
                         rows));
      EXPECT_TRUE(eventually_sql("SELECT count(*) = 0 " + rows + " AND message_id % 2 = 0"));
      std::this_thread::sleep_for(300ms);  // retry polls come and go: the key stays held
      EXPECT_FALSE(called(3) || called(5)) << "hold: nothing after the dead message runs";
      EXPECT_TRUE(sql_true("SELECT count(*) = 2 " + rows + " AND status = 'deferred'"));
      // The operator discards the dead letter: the key resumes, in order.
      store::Session s(opts_);
      store::DeadFilter all;
      EXPECT_EQ(store::discard_dead(s, g, all, "test").size(), 1u);
      EXPECT_TRUE(eventually_sql("SELECT count(*) = 0 " + rows));
      EXPECT_TRUE(called(3) && called(5));
    }
    p->stop(Steady::now() + 10s);
    expect_key_order(*log, {1}, false);  // under hold, 3 ran only after the discard
  }
}

// A message of a schema version the group does not accept
// (runtime/store/group/README.md#versions-a-group-does-not-accept) is kept, not skipped: a `parked`
// row with its payload and the reason, which lets the cursor pass but keeps an ordered group's key
// blocked. Once the group accepts the version (a new pipeline: a reload or an upgrade), the kept
// message runs, and its key's later messages after it, in order, even when retention has removed
// the message from the log meanwhile. (Before: passed over for good.)
TEST_F(OrderedPipelineTest, AnUnacceptedVersionIsKeptBlocksItsKeyAndRunsOnceAccepted) {
  // acct-a: 1 (v1), 2 (v2), 3 (v1); acct-b: 4 (v1); keyless: 5 (v2).
  produce_messages({{R"({"n":1})", 1, "acct-a"},
                    {R"({"n":2})", 2, "acct-a"},
                    {R"({"n":3})", 1, "acct-a"},
                    {R"({"n":4})", 1, "acct-b"},
                    {R"({"n":5})", 2, std::nullopt}});
  auto g = declare_group("ledger", store::OrderingMode::kKeyRelease);
  const std::string rows =
      "FROM " + family_.exceptions + " WHERE group_id = " + std::to_string(g.id);
  auto log = std::make_shared<CallLog>();
  auto script = std::make_shared<Script>();
  auto called = [&](int64_t id) {
    std::lock_guard l(log->mu);
    return std::any_of(log->calls.begin(), log->calls.end(),
                       [&](const Call& c) { return c.id == id; });
  };
  {
    auto o = ordered_options(g, "test:1");
    o.group.schema_versions = {1};
    GroupPipeline p(o, std::make_unique<OrderRecorder>(log, script));
    p.start();
    EXPECT_TRUE(
        eventually_sql("SELECT array_agg(message_id || ':' || status ORDER BY "
                       "message_id) = '{2:parked,3:deferred,5:parked}' " +
                       rows));
    EXPECT_TRUE(eventually_sql("SELECT committed = 2 FROM " + family_.cursors +
                               " WHERE group_id = " + std::to_string(g.id)))
        << "the parked row (2) does not hold the cursor back, the deferred one (3) does";
    EXPECT_TRUE(
        sql_true("SELECT bool_and(payload IS NOT NULL AND can_run_after = 'infinity' "
                 "AND last_error LIKE 'schema_version 2 is not accepted%') " +
                 rows + " AND status = 'parked'"));
    std::this_thread::sleep_for(300ms);  // retry polls come and go: the key stays blocked
    EXPECT_TRUE(called(1) && called(4));
    EXPECT_FALSE(called(2) || called(3) || called(5));
    EXPECT_EQ(p.metrics().get(GroupCounter::kKeptVersion), 2u);
    EXPECT_EQ(p.metrics().get(GroupCounter::kSkippedVersion), 0u);
    p.stop(Steady::now() + 10s);
  }
  // Retention removes the log's rows meanwhile: the kept payload is what runs.
  db_.sql("DELETE FROM " + family_.messages + " WHERE id IN (2, 5)");
  {
    auto o = ordered_options(g, "test:2");
    o.group.schema_versions = {1, 2};
    GroupPipeline p(o, std::make_unique<OrderRecorder>(log, script));
    p.start();
    EXPECT_TRUE(eventually_sql("SELECT count(*) = 0 " + rows));
    p.stop(Steady::now() + 10s);
  }
  EXPECT_TRUE(called(2) && called(3) && called(5));
  expect_key_order(*log, {}, false);  // 2 before 3
  std::lock_guard l(log->mu);
  EXPECT_EQ(log->calls.size(), 5u) << "each message ran once";
}

// The same under unaccepted_versions = "skip": passed over for good, counted, nothing kept.
TEST_F(OrderedPipelineTest, UnderSkipAnUnacceptedVersionIsPassedOverAndReleasesItsKey) {
  produce_messages({{R"({"n":1})", 2, "acct-a"}, {R"({"n":2})", 1, "acct-a"}});
  auto g = declare_group("ledger", store::OrderingMode::kKeyRelease);
  auto log = std::make_shared<CallLog>();
  auto o = ordered_options(g, "test:1");
  o.group.schema_versions = {1};
  o.group.unaccepted_versions = config::UnacceptedVersions::kSkip;
  GroupPipeline p(o, std::make_unique<OrderRecorder>(log, std::make_shared<Script>()));
  p.start();
  EXPECT_TRUE(eventually_sql("SELECT committed = 2 FROM " + family_.cursors +
                             " WHERE group_id = " + std::to_string(g.id)));
  p.stop(Steady::now() + 10s);
  EXPECT_TRUE(sql_true("SELECT count(*) = 0 FROM " + family_.exceptions));
  EXPECT_EQ(p.metrics().get(GroupCounter::kSkippedVersion), 1u);
  std::lock_guard l(log->mu);
  ASSERT_EQ(log->calls.size(), 1u);
  EXPECT_EQ(log->calls[0].id, 2);
}

}  // namespace
}  // namespace sqlstreams::consume
