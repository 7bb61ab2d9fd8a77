// GroupPipeline against a real PostgreSQL with an in-process handler: every message delivered,
// failures recorded as exceptions, two pipelines share a group, a drain hands work back; on a
// manual steady clock, leases are renewed every renew_every, a handler is timed out at
// handler_timeout exactly, not before, the claimer's idle backoff doubles and expired leases are
// looked for once a second (no real time waited for any of them).
#include "consume/group_pipeline.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "consume/lease_timing.hpp"
#include "stream_fixture.hpp"

namespace sqlstreams::consume {
namespace {

using namespace std::chrono_literals;

struct Recorder {
  std::mutex mu;
  std::map<int64_t, int> calls;
  std::chrono::milliseconds sleep{0};
  int total() {
    std::lock_guard l(mu);
    int n = 0;
    for (auto& [id, c] : calls) n += c;
    return n;
  }
};

class RecordingHandler final : public plugin_host::HandlerInstance {
 public:
  explicit RecordingHandler(std::shared_ptr<Recorder> r) : r_(std::move(r)) {}
  plugin_host::Outcome handle(const plugin_host::MessageView& m) noexcept override {
    if (r_->sleep.count()) std::this_thread::sleep_for(r_->sleep);
    {
      std::lock_guard l(r_->mu);
      r_->calls[m.id]++;
    }
    if (m.id == 7) return {plugin_host::OutcomeKind::kTerminal, {}, "order was cancelled"};
    if (m.id % 50 == 0) return {plugin_host::OutcomeKind::kRetry, {}, "provider unreachable"};
    return {};
  }
  bool concurrent() const override { return true; }
  const std::string& plugin_name() const override { return name_; }

 private:
  std::shared_ptr<Recorder> r_;
  std::string name_ = "recording";
};

// Holds message 1 until released (a handler the test controls), others return at once.
struct Gate {
  std::mutex mu;
  std::condition_variable cv;
  bool entered = false;
  bool released = false;
  bool wait_entered(std::chrono::seconds timeout) {
    std::unique_lock l(mu);
    return cv.wait_for(l, timeout, [&] { return entered; });
  }
  void release() {
    std::lock_guard l(mu);
    released = true;
    cv.notify_all();
  }
};

class GatedHandler final : public plugin_host::HandlerInstance {
 public:
  explicit GatedHandler(std::shared_ptr<Gate> g) : g_(std::move(g)) {}
  plugin_host::Outcome handle(const plugin_host::MessageView& m) noexcept override {
    if (m.id != 1) return {};
    std::unique_lock l(g_->mu);
    g_->entered = true;
    g_->cv.notify_all();
    g_->cv.wait(l, [&] { return g_->released; });
    return {};
  }
  bool concurrent() const override { return true; }
  const std::string& plugin_name() const override { return name_; }

 private:
  std::shared_ptr<Gate> g_;
  std::string name_ = "gated";
};

bool eventually(const std::function<bool()>& pred, std::chrono::milliseconds timeout = 30s) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  const testing::PollingConnections reuse;  // one connection for the polls (tests/support)
  while (std::chrono::steady_clock::now() < deadline) {
    if (pred()) return true;
    std::this_thread::sleep_for(1ms);
  }
  return pred();
}

class GroupPipelineTest : public StreamFixture {
 protected:
  void SetUp() override {
    declare_stream("payments.requested", 10'000);
    group_ = declare_group("charge-cards");
  }
  void produce(int n) { produce_same(n, R"({"order_id":"o"})"); }
  std::unique_ptr<GroupPipeline> pipeline(std::shared_ptr<Recorder> r, const std::string& holder,
                                          int batch = 100) {
    PipelineOptions o = fast_options(group_, holder);
    o.group.concurrency = 3;
    o.group.batch_size = batch;
    o.group.lease_ttl = 10s;
    o.group.handler_timeout = 2s;
    return std::make_unique<GroupPipeline>(o, std::make_unique<RecordingHandler>(std::move(r)));
  }
  // Claimed through `target` and every range resolved (ready exceptions, which the retry loop
  // owns, may still hold `committed` back).
  bool wait_resolved(int64_t target, std::chrono::seconds timeout) {
    return eventually_sql("SELECT claimed >= " + std::to_string(target) +
                              " AND NOT EXISTS (SELECT 1 FROM " + family_.leases + ") FROM " +
                              family_.cursors,
                          timeout);
  }

  // The database's time now: a later statement of the claimer changes its session's state
  // after it.
  std::string db_now() { return db_.scalar<std::string>("SELECT clock_timestamp()::text"); }
  // The claimer of the pipeline whose session is `application` last ran an observation that
  // began after `since`, and it has ended: the claimer found nothing to claim and is in its
  // idle sleep (or about to start it).
  bool observed_since(const std::string& application, const std::string& since) {
    return sql_true(
        "SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND "
        "application_name = '" +
        application +
        "' AND state = 'idle' AND query LIKE '%pg_current_xact_id()::text END%' AND "
        "state_change > '" +
        since + "'::timestamptz)");
  }

  store::GroupRef group_;
};

// The claimer's sleeps (PipelineOptions::on_claimer_sleep). A test that advances a
// ManualSteadyClock first waits until the claimer sleeps until a time it knows: the claimer's
// look (observed_since) ends before its sleep begins, and a sleep begun after the advance would
// end a whole sleep later (on a loaded machine that happened, and the test waited in vain).
class ClaimerSleeps {
 public:
  void watch(PipelineOptions& o) {
    o.on_claimer_sleep = [this](SteadyTime until) {
      std::lock_guard lock(mu_);
      last_ = until;
    };
  }
  bool sleeping_until(SteadyTime t) const {
    std::lock_guard lock(mu_);
    return last_ == t;
  }

 private:
  mutable std::mutex mu_;
  std::optional<SteadyTime> last_;
};

TEST_F(GroupPipelineTest, DeliversEveryMessageAndRecordsFailures) {
  produce(1000);
  auto rec = std::make_shared<Recorder>();
  auto p = pipeline(rec, "h:1");
  p->start();
  ASSERT_TRUE(wait_resolved(1000, 60s)) << "the group never caught up";
  EXPECT_TRUE(p->stop(std::chrono::steady_clock::now() + 5s));
  EXPECT_EQ(rec->calls.size(), 1000u);
  for (auto& [id, n] : rec->calls) EXPECT_EQ(n, 1) << "id " << id << " handled twice";
  EXPECT_EQ(db_.scalar<int>("SELECT count(*) FROM " + family_.leases), 0);
  EXPECT_EQ(db_.scalar<int>("SELECT count(*) FROM " + family_.exceptions +
                            " WHERE status = 'dead' AND message_id = 7 AND payload IS NOT NULL"),
            1);
  EXPECT_EQ(
      db_.scalar<int>("SELECT count(*) FROM " + family_.exceptions + " WHERE status = 'ready'"),
      20);
  EXPECT_EQ(p->metrics().get(sqlstreams::consume::GroupCounter::kSucceeded), 979u);
  EXPECT_EQ(db_.scalar<int64_t>("SELECT committed FROM " + family_.cursors), 49)
      << "the first ready exception (id 50) holds committed back";
}

// `committed` follows the commits, not the advancer's second
// (docs/design.md#the-committed-cursor-and-the-advancer): with the periodic advancer off, as under
// a host (whose fleet worker advances about once a second), the committer advances the cursor
// itself soon after each commit batch. Before, it stayed at 0.
TEST_F(GroupPipelineTest, TheCursorFollowsTheCommitsWithoutThePeriodicAdvancer) {
  produce(49);  // ids 1..49: all succeed but 7 (dead, which holds nothing back)
  PipelineOptions o = fast_options(group_, "h:1");
  o.group.batch_size = 10;
  o.group.lease_ttl = 10s;
  o.group.handler_timeout = 2s;
  o.run_advancer = false;
  auto rec = std::make_shared<Recorder>();
  auto p = std::make_unique<GroupPipeline>(o, std::make_unique<RecordingHandler>(rec));
  p->start();
  EXPECT_TRUE(eventually_sql("SELECT committed = 49 FROM " + family_.cursors, 30s))
      << "committed " << db_.scalar<int64_t>("SELECT committed FROM " + family_.cursors);
  EXPECT_TRUE(p->stop(std::chrono::steady_clock::now() + 5s));
  EXPECT_EQ(rec->total(), 49);
}

TEST_F(GroupPipelineTest, TwoPipelinesShareOneGroupWithoutDuplicates) {
  produce(2000);
  auto rec = std::make_shared<Recorder>();
  auto a = pipeline(rec, "a:1", 50);
  auto b = pipeline(rec, "b:2", 50);
  a->start();
  b->start();
  ASSERT_TRUE(wait_resolved(2000, 60s));
  a->stop(std::chrono::steady_clock::now() + 5s);
  b->stop(std::chrono::steady_clock::now() + 5s);
  EXPECT_EQ(rec->calls.size(), 2000u);
  EXPECT_EQ(rec->total(), 2000);
  EXPECT_GT(a->metrics().get(sqlstreams::consume::GroupCounter::kRangesCommitted), 0u);
  EXPECT_GT(b->metrics().get(sqlstreams::consume::GroupCounter::kRangesCommitted), 0u);
}

// The diagnostics hook (the bench's pickup breakdown): one ClaimTiming per fresh range, the
// ranges chaining from 0 to the head, each cycle's times in order.
TEST_F(GroupPipelineTest, ReportsEveryClaimedRangeWithItsTimes) {
  produce(450);
  std::mutex mu;
  std::vector<ClaimTiming> seen;
  PipelineOptions o = fast_options(group_, "h:1");
  o.group.batch_size = 100;
  o.on_claim = [&](const ClaimTiming& t) {
    std::lock_guard l(mu);
    seen.push_back(t);
  };
  auto rec = std::make_shared<Recorder>();
  GroupPipeline p(o, std::make_unique<RecordingHandler>(rec));
  p.start();
  ASSERT_TRUE(wait_resolved(450, 60s));
  p.stop(std::chrono::steady_clock::now() + 5s);
  std::lock_guard l(mu);
  ASSERT_EQ(seen.size(), p.metrics().get(GroupCounter::kRangesClaimed));
  int64_t at = 0;
  for (const auto& t : seen) {
    EXPECT_EQ(t.low, at) << "ranges chain in claim order";
    EXPECT_GT(t.high, t.low);
    EXPECT_LE(t.high - t.low, 100);
    EXPECT_LE(t.cycle_began, t.claim_began);
    EXPECT_LE(t.claim_began, t.claim_ended);
    if (t.idle_began) {
      EXPECT_LE(*t.idle_began, t.cycle_began);
    }
    EXPECT_FALSE(t.from_cache);
    at = t.high;
  }
  EXPECT_EQ(at, 450);
}

// Byte budgets (runtime/consume/README.md#byte-budgets): with payloads of ~1 MB, each range holds
// what fits in batch_bytes (not batch_size messages), the group never holds more than queue_bytes
// of claimed payloads (the gauge sqlstreams_group_queued_bytes, sampled throughout), and the
// claimer waits for commits to free bytes; every message is still delivered once, in ranges that
// chain.
TEST_F(GroupPipelineTest, HoldsAtMostQueueBytesOfClaimedPayloads) {
  const std::string big = R"({"order_id":"o","pad":")" + std::string(1'000'000, 'x') + R"("})";
  produce_same(40, big);
  // What the host holds per message: the payload as the database prints it.
  const auto size = db_.scalar<int64_t>("SELECT octet_length(payload::text) FROM " +
                                        family_.messages + " LIMIT 1");
  std::mutex mu;
  std::vector<ClaimTiming> seen;
  PipelineOptions o = fast_options(group_, "h:1");
  o.group.concurrency = 1;
  o.group.batch_size = 100;
  o.group.queue_ranges = 8;
  o.group.batch_bytes = 3'000'000;  // 2 messages per range
  o.group.queue_bytes = 6'000'000;  // at most 5 held
  o.on_claim = [&](const ClaimTiming& t) {
    std::lock_guard l(mu);
    seen.push_back(t);
  };
  auto rec = std::make_shared<Recorder>();
  rec->sleep = 100ms;  // slower than a claim of 2 MB (~100 ms under ASan): the queue fills
  GroupPipeline p(o, std::make_unique<RecordingHandler>(rec));
  std::atomic<bool> done{false};
  std::atomic<int64_t> peak{0};
  std::thread sampler([&] {
    while (!done.load()) {
      peak.store(std::max(peak.load(), p.metrics().queued_bytes.load()));
      std::this_thread::sleep_for(200us);
    }
  });
  p.start();
  const bool resolved = wait_resolved(40, 60s);
  done.store(true);
  sampler.join();
  p.stop(std::chrono::steady_clock::now() + 5s);
  ASSERT_TRUE(resolved);
  EXPECT_LE(peak.load(), 6'000'000);
  EXPECT_GE(peak.load(), 4 * size) << "the queue filled up to its budget";
  EXPECT_EQ(p.metrics().queued_bytes.load(), 0) << "every committed range freed its bytes";
  EXPECT_EQ(rec->calls.size(), 40u);
  std::lock_guard l(mu);
  int64_t at = 0;
  for (const auto& t : seen) {
    EXPECT_EQ(t.low, at) << "ranges chain: no id skipped, none claimed twice";
    EXPECT_LE(t.high - t.low, 2) << "batch_bytes cut the range";
    at = t.high;
  }
  EXPECT_EQ(at, 40);
}

TEST_F(GroupPipelineTest, DrainHandsBackUnstartedWorkAndTheNextHostFinishesIt) {
  produce(600);
  auto rec = std::make_shared<Recorder>();
  rec->sleep = 5ms;
  auto first = pipeline(rec, "first:1");
  first->start();
  while (rec->total() < 30) std::this_thread::sleep_for(5ms);
  EXPECT_TRUE(first->stop(std::chrono::steady_clock::now() + 5s));
  int handled_by_first = rec->total();
  EXPECT_LT(handled_by_first, 600);
  EXPECT_EQ(db_.scalar<int>("SELECT count(*) FROM " + family_.leases +
                            " WHERE expires_at <> '-infinity'"),
            0)
      << "every lease left behind is handed back";
  EXPECT_EQ(db_.scalar<int>("SELECT coalesce(max(reclaims), 0) FROM " + family_.leases), 0);
  rec->sleep = 0ms;
  auto second = pipeline(rec, "second:2");
  second->start();
  ASSERT_TRUE(wait_resolved(600, 60s));
  second->stop(std::chrono::steady_clock::now() + 5s);
  EXPECT_EQ(rec->calls.size(), 600u) << "nothing lost across the drain";
  EXPECT_EQ(rec->total(), 600) << "a graceful drain causes no duplicates";
}

TEST_F(GroupPipelineTest, RenewsAndTimesOutOnTheInjectedSteadyClock) {
  produce(1);
  auto gate = std::make_shared<Gate>();
  ManualSteadyClock clock;
  PipelineOptions o = fast_options(group_, "h:1");
  o.group.concurrency = 1;
  o.group.lease_ttl = 10s;
  o.group.handler_timeout = 8s;
  o.steady_clock = &clock;
  constexpr auto kRenewEvery = 500ms;
  ASSERT_EQ(lease_timing(o.group.lease_ttl, o.group.handler_timeout).renew_every, kRenewEvery);
  auto p = std::make_unique<GroupPipeline>(o, std::make_unique<GatedHandler>(gate));
  p->start();
  ASSERT_TRUE(gate->wait_entered(30s)) << "message 1 never reached the handler";
  // The range lease's expiry, set on the database's clock by each renewal.
  auto expiry = [&] {
    return db_.scalar<int64_t>("SELECT (extract(epoch FROM expires_at) * 1000000)::bigint FROM " +
                               family_.leases);
  };
  auto timeouts = [&] {
    return p->metrics().get(sqlstreams::consume::GroupCounter::kHandlerTimeouts);
  };
  int64_t last = expiry();
  // The handler has run 0.5 s, 1 s, … 7.5 s on the pipeline's clock: each step is one renewal,
  // and none reaches handler_timeout.
  for (auto ran = kRenewEvery; ran < o.group.handler_timeout; ran += kRenewEvery) {
    clock.advance(kRenewEvery);
    ASSERT_TRUE(eventually([&] { return expiry() > last; }))
        << "no renewal after " << ran.count() << " ms";
    last = expiry();
    ASSERT_EQ(timeouts(), 0u) << "timed out after " << ran.count() << " ms, before 8 s";
  }
  clock.advance(kRenewEvery);  // 8 s: handler_timeout
  ASSERT_TRUE(eventually([&] { return timeouts() == 1; }));
  EXPECT_EQ(p->live_workers(), 1) << "the stuck worker was replaced";
  EXPECT_EQ(p->hung_handlers(), 1);
  gate->release();
  ASSERT_TRUE(eventually([&] { return p->hung_handlers() == 0; }));
  ASSERT_TRUE(
      eventually_sql("SELECT attempts = 1 AND last_error LIKE '%timed out after 8s%' FROM " +
                     family_.exceptions + " WHERE message_id = 1"));
  EXPECT_TRUE(p->stop(std::chrono::steady_clock::now() + 5s));
}

// A handler whose call of message 1 takes (on the pipeline's clock) past handler_timeout and
// then returns success, before the watchdog has looked: the next calls return at once.
class LateHandler final : public plugin_host::HandlerInstance {
 public:
  LateHandler(ManualSteadyClock& clock, std::chrono::milliseconds took, std::shared_ptr<Recorder> r)
      : clock_(clock), took_(took), r_(std::move(r)) {}
  plugin_host::Outcome handle(const plugin_host::MessageView& m) noexcept override {
    int call;
    {
      std::lock_guard l(r_->mu);
      call = ++r_->calls[m.id];
    }
    if (m.id == 1 && call == 1) clock_.advance(took_);
    return {};
  }
  bool concurrent() const override { return true; }
  const std::string& plugin_name() const override { return name_; }

 private:
  ManualSteadyClock& clock_;
  std::chrono::milliseconds took_;
  std::shared_ptr<Recorder> r_;
  std::string name_ = "late";
};

// handler_timeout is a contract on the call, not on when the watchdog comes round (it runs on
// the committer's thread, which a commit retrying through a database outage holds for seconds):
// a call that returns success past the limit failed its attempt. Before, the success counted,
// so in an ordered group the key's next message started while the checker (and the contract)
// held this one unresolved: the chaos run caught it across a PostgreSQL restart.
TEST_F(GroupPipelineTest, ACallReturningPastHandlerTimeoutFailedItsAttempt) {
  produce(2);
  ManualSteadyClock clock;
  auto rec = std::make_shared<Recorder>();
  PipelineOptions o = fast_options(group_, "h:1");
  o.group.concurrency = 1;
  o.group.lease_ttl = 10s;
  o.group.handler_timeout = 2s;
  o.group.retry.max_retries = 0;  // the failed attempt stays visible: dead
  o.steady_clock = &clock;
  // The clock jumps inside the call, so the watchdog (rechecking every few ms of real time)
  // sees the call over before it sees the time: only the return itself can judge it.
  auto p = std::make_unique<GroupPipeline>(
      o, std::make_unique<LateHandler>(clock, o.group.handler_timeout + 1ms, rec));
  p->start();
  ASSERT_TRUE(
      eventually_sql("SELECT status = 'dead' AND attempts = 1 AND last_error LIKE '%timed out "
                     "after 2s (its return came late)%' FROM " +
                     family_.exceptions + " WHERE message_id = 1"))
      << "the late success was taken";
  EXPECT_EQ(p->metrics().get(sqlstreams::consume::GroupCounter::kHandlerTimeouts), 1u);
  EXPECT_EQ(p->hung_handlers(), 0) << "the call returned: no thread written off";
  EXPECT_EQ(p->live_workers(), 1);
  EXPECT_TRUE(p->stop(std::chrono::steady_clock::now() + 5s));
}

// The claimer's idle backoff reads the injected steady clock: caught up, it sleeps poll_interval,
// then twice as long each idle round (up to max_poll_interval), and a message produced meanwhile
// is claimed when the pipeline's clock reaches the end of that sleep, not before.
TEST_F(GroupPipelineTest, IdleBackoffDoublesOnTheInjectedSteadyClock) {
  produce(1);
  auto rec = std::make_shared<Recorder>();
  ManualSteadyClock clock;
  PipelineOptions o = fast_options(group_, "h:1");
  o.group.concurrency = 1;
  o.group.poll_interval = 10s;  // never reached in real time by this test
  o.group.max_poll_interval = 40s;
  o.steady_clock = &clock;
  o.session.application_name = "idle-backoff-test";
  ClaimerSleeps sleeps;
  sleeps.watch(o);
  auto p = std::make_unique<GroupPipeline>(o, std::make_unique<RecordingHandler>(rec));
  auto claimed = [&] { return p->metrics().get(GroupCounter::kRangesClaimed); };
  auto observed_since = [&](const std::string& since) {
    return this->observed_since("idle-backoff-test", since);
  };
  const std::string started = db_now();
  p->start();
  ASSERT_TRUE(eventually([&] { return claimed() == 1 && rec->total() == 1; }));
  // Caught up: asleep for poll_interval (10 s).
  ASSERT_TRUE(eventually([&] { return observed_since(started); }));
  ASSERT_TRUE(eventually([&] { return sleeps.sleeping_until(clock.now() + 10s); }));
  const std::string first_sleep_ended = db_now();
  clock.advance(10s);
  // It looked again, found nothing and sleeps twice as long (20 s). (Within seconds of real
  // time: a sleep on the real clock would take 10 s.)
  ASSERT_TRUE(eventually([&] { return observed_since(first_sleep_ended); }, 5s));
  ASSERT_TRUE(eventually([&] { return sleeps.sleeping_until(clock.now() + 20s); }, 5s));
  produce(1);
  clock.advance(19s);
  std::this_thread::sleep_for(300ms);  // many ManualSteadyClock::kRecheck periods
  EXPECT_EQ(claimed(), 1u) << "claimed before its doubled idle sleep ended on the pipeline's clock";
  clock.advance(1s);
  EXPECT_TRUE(eventually([&] { return claimed() == 2 && rec->total() == 2; }, 5s));
  EXPECT_TRUE(p->stop(std::chrono::steady_clock::now() + 5s));
}

// Expired range leases are looked for once a second on the injected steady clock (and before
// fresh claims whenever one was found).
TEST_F(GroupPipelineTest, ReclaimsExpiredLeasesOnceASecondOnTheInjectedSteadyClock) {
  produce(5);
  {  // Another host claims (0, 5] and dies.
    store::Session session(opts_);
    store::GroupStore other(session, group_.stream_id, group_.id, "dead:1");
    std::optional<store::ClaimedRange> range;
    ASSERT_TRUE(eventually([&] {
      auto obs = other.observe();
      if (obs.worth_claiming()) range = other.claim(obs, 100, Millis(600'000), nullptr).range;
      return range.has_value();
    }));
  }
  auto rec = std::make_shared<Recorder>();
  ManualSteadyClock clock;
  PipelineOptions o = fast_options(group_, "h:1");
  o.group.concurrency = 1;
  o.group.poll_interval = 100ms;  // the claimer wakes every 100 ms of the pipeline's clock
  o.group.max_poll_interval = 100ms;
  o.steady_clock = &clock;
  o.session.application_name = "reclaim-cadence-test";
  ClaimerSleeps sleeps;
  sleeps.watch(o);
  auto p = std::make_unique<GroupPipeline>(o, std::make_unique<RecordingHandler>(rec));
  auto reclaimed = [&] { return p->metrics().get(GroupCounter::kRangesReclaimed); };
  std::string since = db_now();
  p->start();
  // It looked for expired leases (none yet), found nothing to claim and sleeps.
  ASSERT_TRUE(eventually([&] { return observed_since("reclaim-cadence-test", since); }));
  ASSERT_TRUE(eventually([&] { return sleeps.sleeping_until(clock.now() + 100ms); }));
  db_.sql("UPDATE " + family_.leases + " SET expires_at = statement_timestamp() - interval '1 ms'");
  for (int step = 1; step < 10; ++step) {  // 100 ms … 900 ms: no look for expired leases yet
    since = db_now();
    clock.advance(100ms);
    ASSERT_TRUE(eventually(
        [&] {
          return observed_since("reclaim-cadence-test", since) &&
                 sleeps.sleeping_until(clock.now() + 100ms);
        },
        5s))
        << "the claimer did not wake after " << step * 100 << " ms";
    ASSERT_EQ(reclaimed(), 0u) << "reclaimed after " << step * 100 << " ms, before 1 s";
  }
  clock.advance(100ms);  // 1 s
  EXPECT_TRUE(eventually([&] { return reclaimed() == 1 && rec->total() == 5; }, 5s));
  EXPECT_TRUE(p->stop(std::chrono::steady_clock::now() + 5s));
}

}  // namespace
}  // namespace sqlstreams::consume
