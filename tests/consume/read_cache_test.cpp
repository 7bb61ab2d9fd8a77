// The fan-out read cache against a real PostgreSQL (docs/design.md#sharing-a-range-read): claims
// through store::GroupStore with a consume::ReadCache shared by several groups of one stream, each
// group on its own connection, every served range compared field by field with a fresh read of the
// same span on yet another connection. Then two real GroupPipelines in one process.
#include "consume/read_cache.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <map>
#include <mutex>
#include <thread>

#include "consume/group_pipeline.hpp"
#include "store/fleet/janitor.hpp"
#include "store/produce/producer.hpp"
#include "store/reporting/group_lifecycle.hpp"
#include "store/reporting/operator_actions.hpp"
#include "store/reporting/stream_settings.hpp"
#include "store/schema/migrate.hpp"
#include "test_database.hpp"

namespace sqlstreams::consume {
namespace {

using namespace std::chrono_literals;
constexpr auto kLease = Millis{60'000};
constexpr const char* kStream = "payments.requested";

// A producer holding its own transaction open across test steps.
struct OpenProducer {
  explicit OpenProducer(const std::string& url) : conn(url), tx(conn) {}
  int64_t produce(const std::string& json) {
    return tx.exec("SELECT sqlstreams.produce('payments.requested', " + tx.quote(json) + ")")[0][0]
        .as<int64_t>();
  }
  pqxx::connection conn;
  pqxx::work tx;
};

class ReadCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    opts_.url = db_.url();
    setup_ = std::make_unique<store::Session>(opts_);
    store::migrate(*setup_);
    store::StreamSpec spec;
    spec.name = kStream;
    spec.partition_size = 100;  // ranges cross partitions
    stream_ = store::declare_stream(*setup_, spec).stream;
    for (const char* name : {"a", "b", "c"}) {
      groups_.push_back(
          store::declare_group(*setup_, stream_, name, store::StartAt::kBeginning).group);
    }
  }

  // Messages with every field that travels: payloads with non-ASCII text and nesting, keys on
  // some, three schema versions, created_at spread over several transactions.
  void produce(int n) {
    store::Producer p(*setup_);
    std::vector<store::NewMessage> batch;
    for (int i = 0; i < n; ++i) {
      store::NewMessage m;
      const int seq = produced_ + i;
      m.payload = fmt::format(
          R"({{"order_id":"o-{}","note":"Zürich ✓ \"q\"","n":{{"x":[{},1.5]}}}})", seq, seq);
      m.schema_version = 1 + seq % 3;
      if (seq % 2 == 0) m.key = fmt::format("customer-{}", seq % 7);
      batch.push_back(std::move(m));
      if (batch.size() == 25) {
        p.produce_batch(kStream, batch);
        batch.clear();
      }
    }
    if (!batch.empty()) p.produce_batch(kStream, batch);
    produced_ += n;
  }

  struct Claimer {
    Claimer(const store::SessionOptions& o, const store::StreamRef& s, const store::GroupRef& g,
            std::shared_ptr<ReadCache> cache)
        : session(o), store(session, s.id, g.id, "test:" + g.name) {
      if (cache) member = cache->join();
    }
    // Claim cycles as the claimer runs them (observe, then claim when worth it) until a range
    // is claimed, the group is caught up, or `wait` passed while a proof is pending (other
    // transactions of the cluster, e.g. other tests', may hold a proof back for a moment).
    std::optional<store::ClaimedRange> claim(int32_t batch, std::chrono::milliseconds wait = 10s) {
      const auto deadline = std::chrono::steady_clock::now() + wait;
      for (;;) {
        auto obs = store.observe();
        if (obs.worth_claiming()) {
          auto r = store.claim(obs, batch, kLease, member.get());
          if (r.range) return std::move(r.range);
        } else if (!obs.pending) {
          return std::nullopt;  // caught up
        }
        if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
        std::this_thread::sleep_for(2ms);  // a pending proof: re-observe soon, as the claimer
      }
    }
    store::Session session;
    store::GroupStore store;
    std::unique_ptr<ReadCache::Member> member;
  };

  std::unique_ptr<Claimer> claimer(size_t group, std::shared_ptr<ReadCache> cache) {
    return std::make_unique<Claimer>(opts_, stream_, groups_.at(group), std::move(cache));
  }

  // Every field of every message of (low, high], read now on a connection of its own.
  std::vector<store::StoredMessage> fresh_read(int64_t low, int64_t high) {
    auto rows = db_.sql(fmt::format(
        "SELECT id, (extract(epoch FROM created_at) * 1000)::bigint, schema_version, "
        "message_key, payload::text FROM sqlstreams.messages_{} WHERE id > {} AND id <= {} "
        "ORDER BY id",
        stream_.id, low, high));
    std::vector<store::StoredMessage> out;
    for (const auto& row : rows) {
      store::StoredMessage m;
      m.id = row[0].as<int64_t>();
      m.created_at_unix_ms = row[1].as<int64_t>();
      m.schema_version = row[2].as<int32_t>();
      if (!row[3].is_null()) m.key = row[3].as<std::string>();
      m.payload = row[4].as<std::string>();
      out.push_back(std::move(m));
    }
    return out;
  }

  void expect_fresh(const store::ClaimedRange& range) {
    const auto want = fresh_read(range.low, range.high);
    ASSERT_EQ(range.messages.size(), want.size())
        << "range (" << range.low << ", " << range.high << "] from_cache=" << range.from_cache;
    for (size_t i = 0; i < want.size(); ++i) {
      const auto& got = range.messages[i];
      EXPECT_EQ(got.id, want[i].id);
      EXPECT_EQ(got.created_at_unix_ms, want[i].created_at_unix_ms) << got.id;
      EXPECT_EQ(got.schema_version, want[i].schema_version) << got.id;
      EXPECT_EQ(got.key, want[i].key) << got.id;
      EXPECT_EQ(got.payload, want[i].payload) << got.id;
    }
  }

  int64_t leases_of(size_t group) {
    return db_.scalar<int64_t>(
        fmt::format("SELECT count(*) FROM sqlstreams.leases_{} WHERE "
                    "group_id = {}",
                    stream_.id, groups_.at(group).id));
  }
  int64_t claimed_of(size_t group) {
    return db_.scalar<int64_t>(
        fmt::format("SELECT claimed FROM sqlstreams.cursors_{} WHERE "
                    "group_id = {}",
                    stream_.id, groups_.at(group).id));
  }

  testing::TestDatabase db_{testing::TestDatabase::Schema::kMigrated};
  store::SessionOptions opts_;
  std::unique_ptr<store::Session> setup_;
  store::StreamRef stream_;
  std::vector<store::GroupRef> groups_;
  int produced_ = 0;
};

TEST_F(ReadCacheTest, ASecondGroupServedFromTheCacheGetsExactlyAFreshRead) {
  produce(250);
  auto cache = std::make_shared<ReadCache>(64 << 20);
  auto a = claimer(0, cache);
  auto b = claimer(1, cache);
  auto c = claimer(2, nullptr);  // no cache: always a range read
  for (int round = 0; round < 3; ++round) {
    auto ra = a->claim(100);
    ASSERT_TRUE(ra.has_value());
    EXPECT_FALSE(ra->from_cache);
    auto rb = b->claim(100);
    ASSERT_TRUE(rb.has_value());
    EXPECT_TRUE(rb->from_cache) << "round " << round;
    auto rc = c->claim(100);
    ASSERT_TRUE(rc.has_value());
    EXPECT_FALSE(rc->from_cache);
    EXPECT_EQ(rb->low, ra->low);
    EXPECT_EQ(rb->high, ra->high);
    expect_fresh(*ra);
    expect_fresh(*rb);
    expect_fresh(*rc);
    EXPECT_EQ(rb->messages.size(), rc->messages.size());
  }
  // Only the read was skipped: b holds its own leases and its cursor moved.
  EXPECT_EQ(leases_of(1), 3);
  EXPECT_EQ(claimed_of(1), 250);
  EXPECT_GE(cache->stats().hits, 3u);
  EXPECT_TRUE(cache->spans().empty()) << "a and b passed every span";
}

// Regression (never wider than what was read): a read (0, 10] while ids 11..20 exist must not
// serve a claim of (0, 20] as if it covered it.
TEST_F(ReadCacheTest, NeverServesASpanWiderThanWhatWasRead) {
  produce(20);
  auto cache = std::make_shared<ReadCache>(64 << 20);
  auto a = claimer(0, cache);
  auto b = claimer(1, cache);
  auto ra = a->claim(10);
  ASSERT_TRUE(ra.has_value());
  EXPECT_EQ(ra->high, 10);
  std::vector<int64_t> seen;
  while (auto rb = b->claim(20)) {
    expect_fresh(*rb);
    EXPECT_LE(rb->cached_high, 10) << "served past what a read";
    for (const auto& m : rb->messages) seen.push_back(m.id);
  }
  ASSERT_EQ(seen.size(), 20u);
  for (int64_t i = 0; i < 20; ++i) EXPECT_EQ(seen[i], i + 1);
}

// A claim whose fence allows more than the cached prefix takes all of it in one claim: the
// prefix from the cache, the rest read (and kept for the groups behind). Before, it took only
// the prefix and needed a second claim cycle for the rest — under load, one more claim
// transaction per group and one more cycle of pickup latency.
TEST_F(ReadCacheTest, AClaimTakesTheCachedPrefixAndReadsTheRest) {
  produce(20);
  auto cache = std::make_shared<ReadCache>(64 << 20);
  auto a = claimer(0, cache);
  auto b = claimer(1, cache);
  auto c = claimer(2, cache);  // behind: keeps every span
  auto ra = a->claim(10);
  ASSERT_TRUE(ra.has_value());
  EXPECT_EQ(ra->high, 10);
  auto rb = b->claim(100);
  ASSERT_TRUE(rb.has_value());
  EXPECT_TRUE(rb->from_cache);
  EXPECT_EQ(rb->low, 0);
  EXPECT_EQ(rb->cached_high, 10);
  EXPECT_EQ(rb->high, 20) << "the fence allowed (0, 20]: one claim takes it";
  expect_fresh(*rb);
  EXPECT_EQ(cache->spans(), (std::vector<std::pair<int64_t, int64_t>>{{0, 10}, {10, 20}}));
  auto rc = c->claim(100);
  ASSERT_TRUE(rc.has_value());
  EXPECT_TRUE(rc->from_cache);
  EXPECT_EQ(rc->cached_high, 20) << "both reads chain from 0";
  EXPECT_EQ(rc->high, 20);
  expect_fresh(*rc);
  auto ra2 = a->claim(100);
  ASSERT_TRUE(ra2.has_value());
  EXPECT_EQ(ra2->low, 10);
  EXPECT_EQ(ra2->cached_high, 20) << "b's read of the rest served a";
  expect_fresh(*ra2);
}

// A range the cache covers only in part, but not from its start, is read in full.
TEST_F(ReadCacheTest, ARangeCoveredOnlyInPartIsRead) {
  produce(10);
  auto head = store::declare_group(*setup_, stream_, "at-head", store::StartAt::kHead).group;
  groups_.push_back(head);
  produce(10);
  auto cache = std::make_shared<ReadCache>(64 << 20);
  auto h = claimer(3, cache);
  auto b = claimer(1, cache);  // at 0, has not claimed yet: the span is kept for it
  auto rh = h->claim(100);
  ASSERT_TRUE(rh.has_value());
  EXPECT_EQ(rh->low, 10);
  EXPECT_EQ(rh->high, 20);
  EXPECT_EQ(cache->spans(), (std::vector<std::pair<int64_t, int64_t>>{{10, 20}}));
  auto rb = b->claim(100);
  ASSERT_TRUE(rb.has_value());
  EXPECT_FALSE(rb->from_cache) << "(10, 20] is covered, (0, 10] is not: read it all";
  EXPECT_EQ(rb->low, 0);
  EXPECT_EQ(rb->high, 20);
  expect_fresh(*rb);
  EXPECT_EQ(rb->messages.size(), 20u);
}

// Nothing past a proven head lands in the cache: while a producer holds id 6 open (ids 7..10
// committed), no claim passes 5 and neither does the cache; once it commits, the other group
// gets id 6 with its payload (the span up to 5 from the cache, the rest read).
TEST_F(ReadCacheTest, AnUnprovenSpanNeverLandsInTheCache) {
  produce(5);
  auto cache = std::make_shared<ReadCache>(64 << 20);
  auto a = claimer(0, cache);
  auto b = claimer(1, cache);
  auto ra = a->claim(100);
  ASSERT_TRUE(ra.has_value());
  EXPECT_EQ(ra->high, 5);
  OpenProducer open(db_.url());
  EXPECT_EQ(open.produce(R"({"late":true})"), 6);
  produce(4);  // ids 7..10, committed
  for (int i = 0; i < 3; ++i) {
    EXPECT_FALSE(a->claim(100, 100ms).has_value()) << "claimed past the open id 6";
  }
  for (const auto& [low, high] : cache->spans()) EXPECT_LE(high, 5) << "(" << low << ", " << high;
  open.tx.commit();
  std::vector<int64_t> seen;
  bool first = true;
  while (auto rb = b->claim(100)) {
    expect_fresh(*rb);
    EXPECT_EQ(rb->from_cache, first) << "(0, 5] from the cache, the rest read";
    if (first) {
      EXPECT_EQ(rb->cached_high, 5);
    }
    first = false;
    for (const auto& m : rb->messages) seen.push_back(m.id);
  }
  ASSERT_EQ(seen.size(), 10u);
  EXPECT_EQ(seen[5], 6);
}

// A rewind re-reads old spans: by a range read once every group passed them (evicted), from
// the cache while some group still needs them — both equal a fresh read.
TEST_F(ReadCacheTest, ARewindReadsAgainOrFromTheCache) {
  produce(40);
  auto cache = std::make_shared<ReadCache>(64 << 20);
  auto a = claimer(0, cache);
  auto b = claimer(1, cache);
  while (a->claim(20)) {
  }
  while (b->claim(20)) {
  }
  EXPECT_TRUE(cache->spans().empty()) << "every group passed every span";
  store::rewind_group(*setup_, groups_[1], 0, std::nullopt, "test");
  auto rb = b->claim(20);
  ASSERT_TRUE(rb.has_value());
  EXPECT_FALSE(rb->from_cache);
  EXPECT_EQ(rb->low, 0);
  expect_fresh(*rb);
  // A group that has not claimed yet holds every span: b's next read is kept, and b, rewound
  // over it, is served from it.
  auto holder = cache->join();
  auto again = b->claim(20);
  ASSERT_TRUE(again.has_value());
  EXPECT_FALSE(again->from_cache);
  EXPECT_EQ(again->high, 40);
  store::rewind_group(*setup_, groups_[1], 20, std::nullopt, "test");
  auto rewound = b->claim(20);
  ASSERT_TRUE(rewound.has_value());
  EXPECT_TRUE(rewound->from_cache);
  EXPECT_EQ(rewound->low, 20);
  EXPECT_EQ(rewound->high, 40);
  expect_fresh(*rewound);
}

// The budget holds while one group reads ahead of another that has not claimed yet; the
// lowest spans go first, and the group that needed them reads them itself.
TEST_F(ReadCacheTest, TheByteBudgetHoldsAndAnEvictedSpanIsReadAgain) {
  produce(200);
  // About four 10-message spans of these payloads.
  const int64_t budget = 4 * (ReadCache::kSpanOverhead + 10 * 300);
  auto cache = std::make_shared<ReadCache>(budget);
  auto a = claimer(0, cache);
  auto b = claimer(1, cache);  // joined, not claiming: everything is kept for it
  for (int i = 0; i < 20; ++i) {
    auto ra = a->claim(10);
    ASSERT_TRUE(ra.has_value());
    EXPECT_LE(cache->stats().bytes, budget);
  }
  const auto spans = cache->spans();
  ASSERT_FALSE(spans.empty());
  EXPECT_EQ(spans.back().second, 200);
  EXPECT_GT(spans.front().first, 0) << "the lowest spans were evicted";
  auto rb = b->claim(10);
  ASSERT_TRUE(rb.has_value());
  EXPECT_FALSE(rb->from_cache);
  expect_fresh(*rb);
}

// A reclaim of an expired lease whose span is cached is served from it.
TEST_F(ReadCacheTest, AReclaimMayUseTheCache) {
  produce(30);
  auto cache = std::make_shared<ReadCache>(64 << 20);
  auto a = claimer(0, cache);
  auto b = claimer(1, cache);
  auto c = claimer(2, cache);  // holds the span for a while it is behind
  auto ra = a->claim(30);
  ASSERT_TRUE(ra.has_value());
  auto rb = b->claim(30);
  ASSERT_TRUE(rb.has_value());
  EXPECT_TRUE(rb->from_cache);
  db_.sql(
      fmt::format("UPDATE sqlstreams.leases_{} SET expires_at = statement_timestamp() - "
                  "interval '1 ms' WHERE group_id = {}",
                  stream_.id, groups_[1].id));
  auto r = b->store.reclaim_expired(kLease, 3, b->member.get());
  ASSERT_TRUE(r.range.has_value());
  EXPECT_TRUE(r.range->from_cache);
  EXPECT_EQ(r.range->low, 0);
  EXPECT_EQ(r.range->high, 30);
  expect_fresh(*r.range);
}

// docs/how-it-works.md#fan-out: retention may remove rows a cache still holds (a lagging group
// under allow_drop_past_committed, a rewind into swept history); the claim must then get what a
// fresh read gives. Retention here is the janitor's own steps on a 1 ms retention, age alone.
void expire_everything(store::Session& session) {
  store::StreamSettingsChange change;
  change.retention = std::optional<Millis>(Millis{1});
  change.allow_drop_past_committed = true;
  store::set_stream_settings(session, kStream, change, "test");
  std::this_thread::sleep_for(50ms);  // every message is now older than the retention
}

// Regression: a and b share the cache, b lags (it has not claimed: the span is kept for it);
// the janitor drops the oldest partition (0, 100]; b's claim of (0, 100] was served the 100
// dropped messages from the cache, where a fresh read returns none. Then a rewind into the
// dropped history after b had claimed past it.
TEST_F(ReadCacheTest, RowsRetentionDroppedAreNeverServedFromTheCache) {
  produce(250);
  auto cache = std::make_shared<ReadCache>(64 << 20);
  auto a = claimer(0, cache);
  auto b = claimer(1, cache);
  auto holder = claimer(2, cache);  // joined, never claims: keeps every span stored
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(a->claim(100).has_value());
  ASSERT_EQ(cache->spans().size(), 2u);
  ASSERT_EQ(cache->spans().front(), std::make_pair(int64_t{0}, int64_t{100}));

  expire_everything(*setup_);
  store::StreamJanitor janitor(*setup_, stream_.id);
  std::string kept;
  auto dropped = janitor.drop_oldest(store::JanitorSettings{}, nullptr, &kept);
  ASSERT_TRUE(dropped.has_value()) << kept;
  ASSERT_EQ(dropped->partition.last_id, 100);

  auto rb = b->claim(100);
  ASSERT_TRUE(rb.has_value());
  EXPECT_EQ(rb->low, 0);
  EXPECT_EQ(rb->high, 100);
  expect_fresh(*rb);
  EXPECT_TRUE(rb->messages.empty()) << rb->messages.size() << " dropped messages served";

  // The span above the drop is intact and still served.
  auto next = b->claim(100);
  ASSERT_TRUE(next.has_value());
  EXPECT_TRUE(next->from_cache);
  EXPECT_EQ(next->high, 200);
  expect_fresh(*next);

  // A rewind over the dropped partition: nothing below 100, the rest as a fresh read.
  store::rewind_group(*setup_, groups_[1], 0, std::nullopt, "test");
  auto rewound = b->claim(200);
  ASSERT_TRUE(rewound.has_value());
  EXPECT_EQ(rewound->low, 0);
  expect_fresh(*rewound);
  EXPECT_EQ(rewound->messages.size(), size_t(rewound->high - 100));
}

// Regression: the row-level sweep deletes part of a cached span (ids 1..30 of (0, 100]); the
// lagging group then gets ids 31..100 only, and the stale span is gone from the cache. A reclaim
// of a lease over swept ids gets the same.
TEST_F(ReadCacheTest, RowsTheSweepRemovedAreNeverServedFromTheCache) {
  produce(250);
  auto cache = std::make_shared<ReadCache>(64 << 20);
  auto a = claimer(0, cache);
  auto b = claimer(1, cache);
  auto holder = claimer(2, cache);
  ASSERT_TRUE(a->claim(100).has_value());
  auto before = b->claim(100);  // served from the cache while every row exists
  ASSERT_TRUE(before.has_value());
  ASSERT_TRUE(before->from_cache);
  ASSERT_EQ(before->messages.size(), 100u);

  expire_everything(*setup_);
  store::StreamJanitor janitor(*setup_, stream_.id);
  store::JanitorSettings settings;
  settings.delete_batch = 30;
  ASSERT_EQ(janitor.sweep_batch(settings, nullptr, nullptr), 30);
  const uint64_t stale_before = cache->stats().stale;

  // b's lease of (0, 100] expires and is reclaimed: what is left of it, as a fresh read.
  db_.sql(
      fmt::format("UPDATE sqlstreams.leases_{} SET expires_at = statement_timestamp() - "
                  "interval '1 ms' WHERE group_id = {}",
                  stream_.id, groups_[1].id));
  auto r = b->store.reclaim_expired(kLease, 3, b->member.get());
  ASSERT_TRUE(r.range.has_value());
  EXPECT_EQ(r.range->low, 0);
  EXPECT_EQ(r.range->high, 100);
  expect_fresh(*r.range);
  EXPECT_EQ(r.range->messages.size(), 70u);
  EXPECT_GT(cache->stats().stale, stale_before) << "the stale span was forgotten";

  // a rewound over the swept ids (a lagging group would claim the same).
  store::rewind_group(*setup_, groups_[0], 0, std::nullopt, "test");
  auto ra = a->claim(100);
  ASSERT_TRUE(ra.has_value());
  EXPECT_EQ(ra->low, 0);
  EXPECT_EQ(ra->high, 100);
  expect_fresh(*ra);
  EXPECT_EQ(ra->messages.size(), 70u);
}

// Two real pipelines in one process, sharing the stream's cache: each handler sees exactly what
// a fresh read returns, field by field, and the second group was served from the cache.
struct Seen {
  std::mutex mu;
  std::map<int64_t, store::StoredMessage> by_id;
  int duplicates = 0;
};

class Recording final : public plugin_host::HandlerInstance {
 public:
  explicit Recording(std::shared_ptr<Seen> seen) : seen_(std::move(seen)) {}
  plugin_host::Outcome handle(const plugin_host::MessageView& v) noexcept override {
    store::StoredMessage m;
    m.id = v.id;
    m.created_at_unix_ms = v.created_at_unix_ms;
    m.schema_version = v.schema_version;
    if (v.message_key) m.key = std::string(*v.message_key);
    m.payload = std::string(v.payload);
    std::lock_guard lock(seen_->mu);
    if (!seen_->by_id.emplace(m.id, m).second) seen_->duplicates++;
    return {};
  }
  bool concurrent() const override { return true; }
  const std::string& plugin_name() const override { return name_; }

 private:
  std::shared_ptr<Seen> seen_;
  std::string name_ = "recording";
};

// Regression: a claim that waits for another group's read of the same ids (at most the
// cache's read wait) used to wait inside its claim transaction, holding its cursor row lock
// and an xid — and an open xid holds back the proof of every other claimer of the cluster
// (runtime/store/group/README.md#the-fence). It now waits before the transaction begins. Sampled
// while b waits: whether any backend of this database holds an xid (a sample counts only when b was
// waiting both before and after it).
TEST_F(ReadCacheTest, AClaimWaitingForAnotherGroupsReadHoldsNoXid) {
  // A 2 s wait (not kReadWait's 100 ms): the sampling query must fit inside it even on a loaded
  // machine (under a parallel suite it once missed the window in all 20 rounds).
  auto cache = std::make_shared<ReadCache>(64 << 20, std::chrono::seconds(2));
  auto a = claimer(0, cache);
  auto b = claimer(1, cache);
  int samples = 0;
  for (int round = 0; round < 20 && samples < 3; ++round) {
    produce(10);
    const int64_t at = claimed_of(1);
    // a is reading (at, at + 10] now (a miss marks it) and never fills: b waits the read wait.
    ASSERT_FALSE(a->member->lookup(at, at + 10).has_value());
    std::optional<store::ClaimedRange> got;  // read only after the join
    std::atomic<bool> returned{false};       // (reading `got` here raced its assignment)
    std::thread follower([&] {
      got = b->claim(10);
      returned = true;
    });
    const auto deadline = std::chrono::steady_clock::now() + 5s;
    while (cache->stats().waiting == 0 && !returned &&
           std::chrono::steady_clock::now() < deadline) {
      std::this_thread::yield();
    }
    if (cache->stats().waiting == 1) {
      const auto holding = db_.scalar<int64_t>(
          "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND "
          "backend_xid IS NOT NULL AND pid <> pg_backend_pid()");
      if (cache->stats().waiting == 1) {
        ++samples;
        EXPECT_EQ(holding, 0) << "a claim held an xid while it waited for another group's read";
      }
    }
    follower.join();
    ASSERT_TRUE(got.has_value());
    EXPECT_FALSE(got->from_cache) << "a never filled: b read";
    expect_fresh(*got);
    a->member->note_claimed(got->high);  // a's read is over
  }
  EXPECT_GE(samples, 1) << "never sampled while b waited";
  EXPECT_GE(cache->stats().waits, 1u);
}

TEST_F(ReadCacheTest, TwoPipelinesOnOneStreamSeeWhatAFreshReadReturns) {
  auto cache = std::make_shared<ReadCache>(64 << 20);
  // b starts paused by an operator: it joins the cache and claims nothing until it is resumed,
  // so a reads (and keeps for b) every range, and b is then served only from the cache.
  store::pause_group(*setup_, groups_[1], "test");
  std::vector<std::shared_ptr<Seen>> seen;
  std::vector<std::unique_ptr<GroupPipeline>> pipes;
  for (size_t i = 0; i < 2; ++i) {
    PipelineOptions o;
    o.group.name = groups_[i].name;
    o.group.stream = kStream;
    o.group.concurrency = 2;
    o.group.batch_size = 50;
    o.group.poll_interval = 10ms;
    o.group.max_poll_interval = 50ms;
    o.group.schema_versions = {1, 2, 3};
    o.session = opts_;
    o.ref = groups_[i];
    o.holder = "test:" + std::to_string(i);
    o.read_cache = cache;
    seen.push_back(std::make_shared<Seen>());
    pipes.push_back(std::make_unique<GroupPipeline>(o, std::make_unique<Recording>(seen.back())));
  }
  for (auto& p : pipes) p->start();
  auto wait_for = [](const std::function<bool()>& done) {
    const auto deadline = std::chrono::steady_clock::now() + 60s;
    while (!done() && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(10ms);
    }
    return done();
  };
  auto handled = [&](size_t i) {
    std::lock_guard lock(seen[i]->mu);
    return seen[i]->by_id.size();
  };
  ASSERT_TRUE(wait_for([&] { return cache->stats().members == 2; }));
  for (int i = 0; i < 6; ++i) produce(100);  // while a consumes
  EXPECT_TRUE(wait_for([&] { return handled(0) >= 600; }));
  EXPECT_EQ(handled(1), 0u);
  EXPECT_EQ(cache->stats().hits, 0u);
  EXPECT_GT(cache->stats().spans, 0u);
  store::resume_group(*setup_, groups_[1], "test");
  EXPECT_TRUE(wait_for([&] { return handled(1) >= 600; }));
  for (auto& p : pipes) EXPECT_TRUE(p->stop(std::chrono::steady_clock::now() + 10s));
  const auto want = fresh_read(0, 600);
  ASSERT_EQ(want.size(), 600u);
  for (auto& s : seen) {
    std::lock_guard lock(s->mu);
    EXPECT_EQ(s->duplicates, 0);
    ASSERT_EQ(s->by_id.size(), want.size());
    for (const auto& w : want) {
      const auto& got = s->by_id.at(w.id);
      EXPECT_EQ(got.created_at_unix_ms, w.created_at_unix_ms) << w.id;
      EXPECT_EQ(got.schema_version, w.schema_version) << w.id;
      EXPECT_EQ(got.key, w.key) << w.id;
      EXPECT_EQ(got.payload, w.payload) << w.id;
    }
  }
  const auto stats = cache->stats();
  EXPECT_EQ(stats.hits, pipes[1]->metrics().get(GroupCounter::kRangesClaimed))
      << "every range of b was served from a's reads";
  EXPECT_EQ(pipes[1]->metrics().get(GroupCounter::kRangesFromCache), stats.hits);
  EXPECT_EQ(pipes[0]->metrics().get(GroupCounter::kRangesFromCache), 0u);
  EXPECT_EQ(stats.spans, 0u) << "both groups passed every span";
  EXPECT_EQ(stats.bytes, 0);
}

}  // namespace
}  // namespace sqlstreams::consume
