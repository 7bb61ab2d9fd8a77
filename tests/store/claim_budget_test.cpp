// The claim's byte budget (runtime/store/group/README.md#the-fence step 4, store::ClaimBudget): a
// claim over large payloads ends right after the last message that fits — the cursor and the lease
// end exactly there, so the next claim starts at the next id (no id skipped, none claimed twice),
// across gaps and across a prefix served by a RangeCache — and a single message larger than the
// budget is claimed alone (or not at all when the group already holds bytes: budget_full).
#include <map>

#include "store_fixture.hpp"

namespace sqlstreams::testing {
namespace {

constexpr int64_t kMiB = 1 << 20;

// A RangeCache that keeps every fill and answers a lookup with the stored messages above `low`
// up to the end of the span that covers id low + 1 (as the real cache: a final prefix).
class SpanCache final : public store::RangeCache {
 public:
  void await_read(int64_t) override {}
  std::optional<store::CachedSpan> lookup(int64_t low, int64_t high) override {
    ++lookups;
    for (const auto& [span_low, span] : spans) {
      if (span_low > low || span.high <= low) continue;
      store::CachedSpan out;
      out.high = std::min(span.high, high);
      for (const auto& m : span.messages) {
        if (m.id > low && m.id <= out.high) out.messages.push_back(m);
      }
      return out;
    }
    return std::nullopt;
  }
  void fill(int64_t low, int64_t high, const std::vector<store::StoredMessage>& messages) override {
    fills.emplace_back(low, high);
    spans[low] = store::CachedSpan{high, messages};
  }
  void note_claimed(int64_t) override {}
  void forget_below(int64_t) override {}

  std::map<int64_t, store::CachedSpan> spans;
  std::vector<std::pair<int64_t, int64_t>> fills;
  int lookups = 0;
};

class ClaimBudgetTest : public StoreTest {
 protected:
  // One message whose payload text (what octet_length(payload::text) counts, and what the host
  // holds) is exactly `bytes` long: {"p": "xxx..."} is 9 bytes besides the x's.
  int64_t produce_bytes(int64_t bytes) {
    return db_.scalar<int64_t>(
        "SELECT sqlstreams.produce('payments.requested', jsonb_build_object('p', repeat('x', " +
        std::to_string(bytes - 9) + ")))");
  }
  // A producer that rolls back: its id stays a permanent gap.
  void produce_gap() {
    pqxx::connection c(db_.url());
    pqxx::work tx(c);
    tx.exec("SELECT sqlstreams.produce('payments.requested', '{\"gap\":true}')");
    tx.abort();
  }
  store::ClaimResult claim(store::GroupStore& gs, store::ClaimBudget budget,
                           store::RangeCache* cache = nullptr, int32_t batch = 500) {
    for (int i = 0; i < 3; ++i) {
      auto obs = gs.observe();
      if (!obs.worth_claiming()) continue;
      auto r = gs.claim(obs, batch, std::chrono::seconds(30), cache, budget);
      if (r.range || r.budget_full) return r;
    }
    ADD_FAILURE() << "nothing claimed";
    return {};
  }
  static std::vector<int64_t> ids(const store::ClaimedRange& r) {
    std::vector<int64_t> out;
    for (const auto& m : r.messages) out.push_back(m.id);
    return out;
  }
  int64_t claimed(const store::GroupRef& g) {
    return db_.scalar<int64_t>("SELECT claimed FROM " + family_.cursors +
                               " WHERE group_id = " + std::to_string(g.id));
  }
  // The group's leases as "low-high" in order.
  std::string leases(const store::GroupRef& g) {
    std::string out;
    for (const auto& row : db_.sql("SELECT low, high FROM " + family_.leases +
                                   " WHERE group_id = " + std::to_string(g.id) + " ORDER BY low")) {
      out += (out.empty() ? "" : " ") + row[0].as<std::string>() + "-" + row[1].as<std::string>();
    }
    return out;
  }
  static int64_t bytes_of(const store::ClaimedRange& r) {
    int64_t n = 0;
    for (const auto& m : r.messages) n += static_cast<int64_t>(m.payload.size());
    return n;
  }
};

TEST_F(ClaimBudgetTest, AClaimEndsAtTheBudgetAndTheNextStartsAtTheNextId) {
  // ids 1..3, a gap (4), 5..8: eight ids, seven messages of exactly 1 MiB each.
  for (int i = 0; i < 3; ++i) produce_bytes(kMiB);
  produce_gap();
  for (int i = 0; i < 4; ++i) produce_bytes(kMiB);
  auto gs = group_store(*session_, charge_.id);
  const store::ClaimBudget budget{.bytes = 3 * kMiB};

  auto first = claim(gs, budget);
  ASSERT_TRUE(first.range);
  EXPECT_EQ(ids(*first.range), (std::vector<int64_t>{1, 2, 3}));  // 3, not batch_size
  EXPECT_EQ(first.range->low, 0);
  EXPECT_EQ(first.range->high, 3);  // right after the last message it includes
  EXPECT_TRUE(first.budget_cut);
  EXPECT_EQ(first.next_bytes, kMiB);  // the size of 5, which the next claim starts with
  EXPECT_EQ(bytes_of(*first.range), 3 * kMiB);
  EXPECT_EQ(claimed(charge_), 3);

  auto second = claim(gs, budget);
  ASSERT_TRUE(second.range);
  EXPECT_EQ(second.range->low, 3);  // no skip, no overlap; the gap is covered
  EXPECT_EQ(ids(*second.range), (std::vector<int64_t>{5, 6, 7}));
  EXPECT_EQ(second.range->high, 7);

  auto third = claim(gs, budget);
  ASSERT_TRUE(third.range);
  EXPECT_EQ(third.range->low, 7);
  EXPECT_EQ(ids(*third.range), (std::vector<int64_t>{8}));
  EXPECT_EQ(third.range->high, 8);  // everything the fence allowed: not cut
  EXPECT_FALSE(third.budget_cut);
  EXPECT_EQ(third.next_bytes, 0);
  EXPECT_EQ(leases(charge_), "0-3 3-7 7-8");  // each lease covers exactly what was read
  EXPECT_EQ(claimed(charge_), 8);
}

TEST_F(ClaimBudgetTest, AMessageLargerThanTheBudgetIsClaimedAlone) {
  db_.sql("UPDATE sqlstreams.streams SET max_payload_bytes = 8388608 WHERE id = 1");
  produce_bytes(kMiB);      // 1
  produce_bytes(5 * kMiB);  // 2
  produce_bytes(kMiB);      // 3
  auto gs = group_store(*session_, charge_.id);
  const store::ClaimBudget budget{.bytes = 3 * kMiB};

  auto first = claim(gs, budget);
  ASSERT_TRUE(first.range);
  EXPECT_EQ(ids(*first.range), (std::vector<int64_t>{1}));
  EXPECT_EQ(first.range->high, 1);
  EXPECT_EQ(first.next_bytes, 5 * kMiB);

  // While the group holds bytes, a message that does not fit beside them waits: nothing is
  // claimed and the cursor stays.
  auto held = claim(gs, store::ClaimBudget{.bytes = 2 * kMiB, .first_always = false});
  EXPECT_FALSE(held.range);
  EXPECT_TRUE(held.budget_full);
  EXPECT_EQ(held.next_bytes, 5 * kMiB);  // the room the claimer waits for
  EXPECT_EQ(claimed(charge_), 1);

  auto big = claim(gs, budget);
  ASSERT_TRUE(big.range);
  EXPECT_EQ(ids(*big.range), (std::vector<int64_t>{2}));  // alone, though over the budget
  EXPECT_EQ(big.range->low, 1);
  EXPECT_EQ(big.range->high, 2);
  EXPECT_EQ(bytes_of(*big.range), 5 * kMiB);

  auto rest = claim(gs, budget);
  ASSERT_TRUE(rest.range);
  EXPECT_EQ(rest.range->low, 2);
  EXPECT_EQ(ids(*rest.range), (std::vector<int64_t>{3}));
  EXPECT_EQ(leases(charge_), "0-1 1-2 2-3");
}

TEST_F(ClaimBudgetTest, ACachedPrefixIsCutTooAndOnlyTheReadPartIsOffered) {
  for (int i = 0; i < 6; ++i) produce_bytes(kMiB);
  SpanCache cache;
  // charge-cards reads all six (no budget to speak of) and fills the cache with (0, 6].
  auto charge = group_store(*session_, charge_.id);
  auto all = claim(charge, store::ClaimBudget{}, &cache);
  ASSERT_TRUE(all.range);
  EXPECT_EQ(all.range->high, 6);
  ASSERT_EQ(cache.fills, (std::vector<std::pair<int64_t, int64_t>>{{0, 6}}));

  // audit-payments under 2 MiB: the cached prefix is cut after two messages, nothing is read.
  auto s2 = session();
  auto audit = group_store(*s2, audit_.id);
  const store::ClaimBudget budget{.bytes = 2 * kMiB};
  for (int64_t low : {0, 2, 4}) {
    auto r = claim(audit, budget, &cache);
    ASSERT_TRUE(r.range);
    EXPECT_TRUE(r.range->from_cache);
    EXPECT_EQ(r.range->low, low);
    EXPECT_EQ(ids(*r.range), (std::vector<int64_t>{low + 1, low + 2}));
    EXPECT_EQ(r.range->high, low + 2);
    EXPECT_EQ(r.next_bytes, low + 2 < 6 ? kMiB : 0);  // the cache's next message; none past 6
  }
  EXPECT_EQ(cache.fills.size(), 1u);  // nothing read, nothing filled
  EXPECT_EQ(leases(audit_), "0-2 2-4 4-6");

  // A cut read fills exactly what it read: (6, 7] of 7, 8.
  produce_bytes(kMiB);
  produce_bytes(kMiB);
  SpanCache fresh;
  auto r = claim(audit, store::ClaimBudget{.bytes = kMiB}, &fresh);
  ASSERT_TRUE(r.range);
  EXPECT_EQ(r.range->low, 6);
  EXPECT_EQ(r.range->high, 7);
  EXPECT_EQ(fresh.fills, (std::vector<std::pair<int64_t, int64_t>>{{6, 7}}));
}

// The claim first looks at the payloads' stored sizes and reads the range whole only when they
// cannot reach the budget. jsonb prints control characters as \u00XX: 300 of them are ~310
// bytes stored but 1,809 bytes of text, and the budget counts the text (what the host holds).
TEST_F(ClaimBudgetTest, PayloadsWhoseTextIsLongerThanTheirStoredFormAreCountedAtTheirText) {
  for (int i = 0; i < 10; ++i) {
    db_.sql(
        "SELECT sqlstreams.produce('payments.requested', jsonb_build_object('p', "
        "repeat(chr(1), 300)))");
  }
  const auto text = db_.scalar<int64_t>("SELECT octet_length(payload::text) FROM " +
                                        family_.messages + " WHERE id = 1");
  const auto stored = db_.scalar<int64_t>("SELECT pg_column_size(payload) FROM " +
                                          family_.messages + " WHERE id = 1");
  ASSERT_EQ(text, 1809);
  ASSERT_LT(stored * 5, text);
  auto gs = group_store(*session_, charge_.id);
  // 10 stored forms fit in 5 texts' worth; 10 texts do not: the claim ends after 5.
  auto r = claim(gs, store::ClaimBudget{.bytes = 5 * text});
  ASSERT_TRUE(r.range);
  EXPECT_EQ(ids(*r.range), (std::vector<int64_t>{1, 2, 3, 4, 5}));
  EXPECT_TRUE(r.budget_cut);
  EXPECT_EQ(bytes_of(*r.range), 5 * text);
  // Far below the budget (10 texts, 80 stored forms): the rest, whole, uncut.
  auto rest = claim(gs, store::ClaimBudget{.bytes = 80 * stored});
  ASSERT_TRUE(rest.range);
  EXPECT_EQ(ids(*rest.range), (std::vector<int64_t>{6, 7, 8, 9, 10}));
  EXPECT_FALSE(rest.budget_cut);
}

// Numbers written with huge exponents (or long runs of zeros) are a few bytes stored and up to
// ~131 KB of text each: {"a":1e131071} is 30 bytes stored, 131,079 of text. A size check that
// trusted the stored size let a range of them through whole (the known hole).
// Every produce path now records such a payload's text length (V012 text_bytes), and the
// claim counts the row at it: the range is cut at the budget as for any large payload.
TEST_F(ClaimBudgetTest, NumbersWithHugeExponentsAreCountedAtTheirTextOnEveryProducePath) {
  const std::string huge = R"({"a":1e131071})";
  const std::string zeros = R"({"z":0.)" + std::string(2000, '0') + "1}";  // no exponent
  store::Producer producer(*session_);
  // 1-2: produce(); 3-4: produce_batch(); 5-6: produce_batch() with idempotency keys;
  // 7-8: Producer (unkeyed, single statement); 9-10: Producer, keyed; 11-12: Producer in
  // chunks of one; 13-14: the long runs of zeros, through Producer and produce().
  for (int i = 0; i < 2; ++i)
    db_.sql("SELECT sqlstreams.produce('payments.requested', '" + huge + "')");
  db_.sql("SELECT sqlstreams.produce_batch('payments.requested', ARRAY['" + huge + "', '" + huge +
          "']::jsonb[])");
  db_.sql("SELECT sqlstreams.produce_batch('payments.requested', ARRAY['" + huge + "', '" + huge +
          "']::jsonb[], idempotency_keys => ARRAY['k1', 'k2'])");
  producer.produce_batch("payments.requested",
                         std::vector<store::NewMessage>(2, store::NewMessage{huge}));
  producer.produce_batch("payments.requested", {store::NewMessage{huge, 1, std::nullopt, "k3"},
                                                store::NewMessage{huge, 1, std::nullopt, "k4"}});
  store::Producer::BatchOptions chunks;
  chunks.chunk = 1;
  producer.produce_batch("payments.requested",
                         std::vector<store::NewMessage>(2, store::NewMessage{huge}), chunks);
  producer.produce_batch("payments.requested", {store::NewMessage{zeros}});
  db_.sql("SELECT sqlstreams.produce('payments.requested', '" + zeros + "')");
  const auto text = db_.scalar<int64_t>("SELECT octet_length(payload::text) FROM " +
                                        family_.messages + " WHERE id = 1");
  const auto stored = db_.scalar<int64_t>("SELECT pg_column_size(payload) FROM " +
                                          family_.messages + " WHERE id = 1");
  ASSERT_EQ(text, 131079);
  ASSERT_LT(stored * 1000, text);
  // What the size check relies on: no row without text_bytes prints longer than 8 times its
  // stored size, and every row with it has its exact text length.
  EXPECT_EQ(db_.scalar<int64_t>("SELECT count(*) FROM " + family_.messages +
                                " WHERE text_bytes IS NULL AND octet_length(payload::text) > 8 * "
                                "pg_column_size(payload)"),
            0);
  EXPECT_EQ(db_.scalar<int64_t>("SELECT count(*) FROM " + family_.messages +
                                " WHERE text_bytes = octet_length(payload::text)"),
            14);

  auto gs = group_store(*session_, charge_.id);
  const store::ClaimBudget budget{.bytes = 3 * text};
  std::vector<int64_t> seen;
  int64_t low = 0;
  for (int claims = 0; claims < 14 && low < 14; ++claims) {
    auto r = claim(gs, budget);
    ASSERT_TRUE(r.range);
    EXPECT_EQ(r.range->low, low);
    EXPECT_LE(bytes_of(*r.range), budget.bytes) << "claim " << claims << " low " << low;
    for (auto id : ids(*r.range)) seen.push_back(id);
    low = r.range->high;
  }
  std::vector<int64_t> all(14);
  for (int i = 0; i < 14; ++i) all[i] = i + 1;
  EXPECT_EQ(seen, all);  // nothing skipped, nothing twice
}

// The unchecked produce path (store::Producer, no exponent, no long number) writes no
// text_bytes: its payloads must print within 8 times their stored size, whatever their shape.
TEST_F(ClaimBudgetTest, UncheckedPayloadsPrintWithinEightTimesTheirStoredSize) {
  const std::vector<std::string> shapes = {
      R"({"a":[[],[],[],[],[],[],[],[],[],[],[],[],[],[],[],[]]})",
      R"({"s":"\u0001\u0001\u0001\u0001\u0001\u0001\u0001\u0001\u0001\u0001\u0001\u0001"})",
      R"({"n":[0.0000000000000000000000000001,10000000000000000000000000000000]})",
      R"({"k":{"":{"":{"":{"":{"":{"":{"":{"":{}}}}}}}}}})",
      R"({"b":[true,false,null,true,false,null,0,0,0,0,0,0,-0,-0]})",
      R"({})",
  };
  store::Producer producer(*session_);
  for (const auto& shape : shapes) {
    ASSERT_TRUE(store::Producer::needs_no_check(shape, 1 << 20)) << shape;
    producer.produce_batch("payments.requested", {store::NewMessage{shape}});
  }
  EXPECT_EQ(db_.scalar<int64_t>("SELECT count(*) FROM " + family_.messages +
                                " WHERE text_bytes IS NOT NULL OR octet_length(payload::text) > 8 "
                                "* pg_column_size(payload)"),
            0);
  // One number token longer than 32 characters goes to the checked path.
  EXPECT_FALSE(
      store::Producer::needs_no_check(R"({"z":0.0000000000000000000000000000001})", 1 << 20));
}

}  // namespace
}  // namespace sqlstreams::testing
