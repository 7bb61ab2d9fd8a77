// consume/read_cache without a database: what a lookup may answer (never wider than a fill, a
// prefix that chains without a gap from `low`), overlapping fills, what is stored at all, and
// eviction (passed by every member, then the lowest spans for the byte budget).
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "consume/read_cache.hpp"

namespace sqlstreams::consume {
namespace {

using Spans = std::vector<std::pair<int64_t, int64_t>>;

store::StoredMessage message(int64_t id, size_t payload_bytes = 10) {
  store::StoredMessage m;
  m.id = id;
  m.created_at_unix_ms = 1'700'000'000'000 + id;
  m.schema_version = static_cast<int32_t>(1 + id % 3);
  if (id % 2 == 0) m.key = "key-" + std::to_string(id);
  m.payload = std::string(payload_bytes, 'x');
  return m;
}

// The messages a range read of (low, high] returns when the log holds `ids`.
std::vector<store::StoredMessage> read(int64_t low, int64_t high, std::vector<int64_t> ids = {}) {
  std::vector<store::StoredMessage> out;
  if (ids.empty()) {
    for (int64_t id = low + 1; id <= high; ++id) out.push_back(message(id));
  } else {
    for (int64_t id : ids) {
      if (id > low && id <= high) out.push_back(message(id));
    }
  }
  return out;
}

std::vector<int64_t> ids_of(const std::vector<store::StoredMessage>& messages) {
  std::vector<int64_t> out;
  for (const auto& m : messages) out.push_back(m.id);
  return out;
}

std::vector<int64_t> iota(int64_t from, int64_t to) {
  std::vector<int64_t> out;
  for (int64_t i = from; i <= to; ++i) out.push_back(i);
  return out;
}

constexpr int64_t kLarge = 1 << 30;

TEST(ReadCache, ServesWhatWasFilledWithEveryField) {
  auto cache = std::make_shared<ReadCache>(kLarge);
  auto a = cache->join();
  auto b = cache->join();
  EXPECT_FALSE(b->lookup(0, 100).has_value());
  a->fill(0, 100, read(0, 100));
  a->note_claimed(100);
  auto hit = b->lookup(0, 100);
  ASSERT_TRUE(hit.has_value());
  EXPECT_EQ(hit->high, 100);
  ASSERT_EQ(hit->messages.size(), 100u);
  for (size_t i = 0; i < hit->messages.size(); ++i) {
    const auto want = message(static_cast<int64_t>(i) + 1);
    const auto& got = hit->messages[i];
    EXPECT_EQ(got.id, want.id);
    EXPECT_EQ(got.created_at_unix_ms, want.created_at_unix_ms);
    EXPECT_EQ(got.schema_version, want.schema_version);
    EXPECT_EQ(got.key, want.key);
    EXPECT_EQ(got.payload, want.payload);
  }
  // A sub-span: exactly its messages.
  auto sub = b->lookup(40, 60);
  ASSERT_TRUE(sub.has_value());
  EXPECT_EQ(sub->high, 60);
  EXPECT_EQ(ids_of(sub->messages), iota(41, 60));
}

// Regression: a lookup must never answer past the highest id a fill covered, even when the
// caller asks for more: ids 11..20 may exist in the log, unread.
TEST(ReadCache, NeverAnswersWiderThanAFill) {
  auto cache = std::make_shared<ReadCache>(kLarge);
  auto a = cache->join();
  auto b = cache->join();
  a->fill(0, 10, read(0, 10));
  auto hit = b->lookup(0, 20);
  ASSERT_TRUE(hit.has_value());
  EXPECT_EQ(hit->high, 10);
  EXPECT_EQ(ids_of(hit->messages), iota(1, 10));
  EXPECT_FALSE(b->lookup(10, 20).has_value());
  // A gap between two spans ends the answer.
  a->fill(15, 20, read(15, 20));
  hit = b->lookup(0, 20);
  ASSERT_TRUE(hit.has_value());
  EXPECT_EQ(hit->high, 10);
  EXPECT_FALSE(b->lookup(12, 20).has_value()) << "id 13 was never read";
  hit = b->lookup(14, 20);
  EXPECT_FALSE(hit.has_value()) << "id 15 was never read";
}

TEST(ReadCache, AdjacentSpansChain) {
  auto cache = std::make_shared<ReadCache>(kLarge);
  auto a = cache->join();
  auto b = cache->join();
  a->fill(0, 10, read(0, 10));
  a->fill(10, 20, read(10, 20));
  auto hit = b->lookup(5, 20);
  ASSERT_TRUE(hit.has_value());
  EXPECT_EQ(hit->high, 20);
  EXPECT_EQ(ids_of(hit->messages), iota(6, 20));
  hit = b->lookup(5, 15);
  ASSERT_TRUE(hit.has_value());
  EXPECT_EQ(hit->high, 15);
  EXPECT_EQ(ids_of(hit->messages), iota(6, 15));
}

// Ids absent from a final span are permanent gaps: served as absent, the span still covers them.
TEST(ReadCache, GapsInsideASpanStayGaps) {
  auto cache = std::make_shared<ReadCache>(kLarge);
  auto a = cache->join();
  auto b = cache->join();
  a->fill(0, 10, read(0, 10, {2, 5, 9}));
  auto hit = b->lookup(3, 10);
  ASSERT_TRUE(hit.has_value());
  EXPECT_EQ(hit->high, 10);
  EXPECT_EQ(ids_of(hit->messages), (std::vector<int64_t>{5, 9}));
  hit = b->lookup(9, 10);
  ASSERT_TRUE(hit.has_value());
  EXPECT_TRUE(hit->messages.empty());
  EXPECT_EQ(hit->high, 10);
}

TEST(ReadCache, OverlappingFillsStoreOnlyWhatIsNew) {
  auto cache = std::make_shared<ReadCache>(kLarge);
  auto a = cache->join();
  auto b = cache->join();
  a->fill(10, 20, read(10, 20));
  a->fill(0, 30, read(0, 30));
  EXPECT_EQ(cache->spans(), (Spans{{0, 10}, {10, 20}, {20, 30}}));
  auto hit = b->lookup(0, 30);
  ASSERT_TRUE(hit.has_value());
  EXPECT_EQ(hit->high, 30);
  EXPECT_EQ(ids_of(hit->messages), iota(1, 30));
}

TEST(ReadCache, KeepsNothingNobodyElseNeeds) {
  auto cache = std::make_shared<ReadCache>(kLarge);
  auto a = cache->join();
  a->fill(0, 10, read(0, 10));
  EXPECT_TRUE(cache->spans().empty()) << "a single group has no one to share with";
  auto b = cache->join();
  b->note_claimed(50);  // b is past it
  a->fill(10, 20, read(10, 20));
  EXPECT_TRUE(cache->spans().empty());
  a->fill(50, 60, read(50, 60));
  EXPECT_EQ(cache->spans(), (Spans{{50, 60}}));
  EXPECT_EQ(cache->stats().skipped, 2u);
}

TEST(ReadCache, EvictsWhatEveryMemberPassed) {
  auto cache = std::make_shared<ReadCache>(kLarge);
  auto a = cache->join();
  auto b = cache->join();
  a->fill(0, 10, read(0, 10));
  a->note_claimed(10);
  a->fill(10, 20, read(10, 20));
  a->note_claimed(20);
  EXPECT_EQ(cache->spans(), (Spans{{0, 10}, {10, 20}}));
  b->note_claimed(10);
  EXPECT_EQ(cache->spans(), (Spans{{10, 20}}));
  b->note_claimed(15);
  EXPECT_EQ(cache->spans(), (Spans{{10, 20}}));
  b->note_claimed(20);
  EXPECT_TRUE(cache->spans().empty());
  EXPECT_EQ(cache->stats().bytes, 0);
}

TEST(ReadCache, AMemberThatLeavesHoldsNothingBack) {
  auto cache = std::make_shared<ReadCache>(kLarge);
  auto a = cache->join();
  auto b = cache->join();
  a->fill(0, 10, read(0, 10));
  a->note_claimed(10);
  EXPECT_EQ(cache->spans().size(), 1u);
  b.reset();  // a group removed by a reload
  EXPECT_TRUE(cache->spans().empty());
}

TEST(ReadCache, TheByteBudgetHolds) {
  const int64_t per_span = ReadCache::kSpanOverhead + 10 * ReadCache::bytes_of(message(1, 100));
  const int64_t budget = 3 * per_span + per_span / 2;
  auto cache = std::make_shared<ReadCache>(budget);
  auto a = cache->join();
  auto b = cache->join();  // never claims: holds everything back
  for (int64_t low = 0; low < 200; low += 10) {
    std::vector<store::StoredMessage> ms;
    for (int64_t id = low + 1; id <= low + 10; ++id) ms.push_back(message(id, 100));
    a->fill(low, low + 10, ms);
    a->note_claimed(low + 10);
    EXPECT_LE(cache->stats().bytes, budget);
  }
  // The lowest spans went first.
  EXPECT_EQ(cache->spans(), (Spans{{170, 180}, {180, 190}, {190, 200}}));
  EXPECT_FALSE(b->lookup(0, 10).has_value()) << "evicted: the group reads it again";
  // A span larger than the whole budget is not stored (and evicts nothing).
  std::vector<store::StoredMessage> big;
  for (int64_t id = 201; id <= 300; ++id) big.push_back(message(id, 100));
  a->fill(200, 300, big);
  EXPECT_EQ(cache->spans(), (Spans{{170, 180}, {180, 190}, {190, 200}}));
}

// Groups that claim the same ids at the same moment share one read: before its claim
// transaction, a member that finds them being read by another member waits for that read
// (await_read), and its lookup then finds them instead of reading them too.
TEST(ReadCache, AwaitReadWaitsForAnotherMembersReadOfTheSameIds) {
  auto cache = std::make_shared<ReadCache>(kLarge);
  auto a = cache->join();
  auto b = cache->join();
  EXPECT_FALSE(a->lookup(0, 100).has_value());  // a reads (0, 100] now
  std::optional<store::CachedSpan> got;
  std::thread follower([&] {
    b->await_read(0);
    got = b->lookup(0, 100);
  });
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (cache->stats().waiting == 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::yield();
  }
  ASSERT_EQ(cache->stats().waiting, 1u) << "b did not wait for a's read";
  a->fill(0, 100, read(0, 100));
  follower.join();
  ASSERT_TRUE(got.has_value()) << "b read the ids a was reading";
  EXPECT_EQ(got->high, 100);
  EXPECT_EQ(ids_of(got->messages), iota(1, 100));
  EXPECT_EQ(cache->stats().waits, 1u);
  EXPECT_EQ(cache->stats().misses, 1u);
}

TEST(ReadCache, TheWaitIsBoundedAndOnlyForTheSameIds) {
  auto cache = std::make_shared<ReadCache>(kLarge);
  auto a = cache->join();
  auto b = cache->join();
  EXPECT_FALSE(a->lookup(0, 100).has_value());  // a reads (0, 100] and never fills
  auto t0 = std::chrono::steady_clock::now();
  b->await_read(100);  // (100, 200] is not being read
  EXPECT_EQ(cache->stats().waits, 0u);
  b->await_read(50);  // waits for a, which never fills: b reads
  EXPECT_FALSE(b->lookup(50, 100).has_value());
  const auto waited = std::chrono::steady_clock::now() - t0;
  EXPECT_GE(waited, ReadCache::kReadWait - std::chrono::milliseconds(1));
  EXPECT_LT(waited, std::chrono::seconds(5));
  EXPECT_EQ(cache->stats().waits, 1u);
  // a's claim ended (its next claim position): nobody waits for it any more.
  a->note_claimed(100);
  auto c = cache->join();
  c->await_read(0);
  EXPECT_FALSE(c->lookup(0, 10).has_value());
  EXPECT_EQ(cache->stats().waits, 1u);
}

// The lookup runs inside the claim's transaction (a cursor row lock and an xid held): it never
// waits, even for ids another member is reading right now; only await_read, before the
// transaction, does.
TEST(ReadCache, ALookupNeverWaits) {
  auto cache = std::make_shared<ReadCache>(kLarge);
  auto a = cache->join();
  auto b = cache->join();
  EXPECT_FALSE(a->lookup(0, 100).has_value());  // a reads (0, 100] and never fills
  EXPECT_FALSE(b->lookup(0, 100).has_value());
  EXPECT_FALSE(b->lookup(50, 100).has_value());
  EXPECT_EQ(cache->stats().waits, 0u);
  EXPECT_EQ(cache->stats().misses, 3u);
}

TEST(ReadCaches, OneCachePerStreamWhileItsGroupsRun) {
  ReadCaches caches;
  EXPECT_EQ(caches.for_stream(1, 0), nullptr) << "0 turns the cache off";
  auto one = caches.for_stream(1, 1000);
  auto again = caches.for_stream(1, 5000);
  EXPECT_EQ(one, again);
  EXPECT_EQ(again->budget(), 1000) << "a cache keeps its budget";
  EXPECT_NE(caches.for_stream(2, 1000), one);
  std::weak_ptr<ReadCache> gone = one;
  one.reset();
  again.reset();
  EXPECT_TRUE(gone.expired());
  EXPECT_NE(caches.for_stream(1, 1000), nullptr);
}

}  // namespace
}  // namespace sqlstreams::consume
