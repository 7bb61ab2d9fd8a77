// tests/chaos — the ordered invariants on histories written by hand: what a correct ordered
// runtime may do passes (a host's own lane, a cross-host successor after the commit, a replay
// that re-runs first, a hung attempt or a stopped host's overlap, a discard releasing a held
// key, a rewound span re-delivered), and each kind of violation is reported. The chaos runs
// cannot show the first half until the runtime orders: this does.
#include "ordered_check.hpp"

#include <gtest/gtest.h>

namespace sqlstreams::chaos {
namespace {

constexpr int64_t kMs = 1'000'000;
constexpr int kHostA = 101, kHostB = 102;
const std::string kStream = "chaos.keep", kGroup = "g-o";

class OrderedCheckTest : public ::testing::Test {
 protected:
  // A call of message `id` (key "k" unless given) on `pid` from `start` to `end` ms.
  CallRecord& call(int64_t id, int pid, int64_t start, int64_t end, const std::string& outcome,
                   int32_t attempt = 1, const std::string& key = "k") {
    CallRecord r;
    r.stream = kStream;
    r.group = kGroup;
    r.outcome = outcome;
    r.tag = "t" + std::to_string(id);
    r.id = id;
    r.attempt = attempt;
    r.pid = pid;
    r.key = key;
    r.seq = id;
    r.start_ns = start * kMs;
    r.end_ns = end * kMs;
    records_.push_back(r);
    return records_.back();
  }
  // The audit trail's decisions (ms).
  void ok_at(int64_t id, int64_t at) { decided(id).first_ok = at * kMs; }
  void dead_at(int64_t id, int64_t at, int32_t attempt) {
    decided(id).first_dead = at * kMs;
    decided(id).dead_attempt = attempt;
    stream_.dead_at_end.insert({kGroup, id});
  }
  void discarded_at(int64_t id, int64_t at) { decided(id).first_discard = at * kMs; }
  Resolutions& decided(int64_t id) { return stream_.decided[{kGroup, id}]; }

  Verdict check(const std::string& dead_policy = "release") {
    OrderedSettings settings;
    settings.seed = 1;
    settings.ordered[kStream + "/" + kGroup] = dead_policy;
    settings.stop_grace_ns = 3000 * kMs;
    Verdict v;
    for (const auto& i : {"order", "overlap", "early", "log-order"}) v.violations[i] = 0;
    check_ordered(settings, history_, {{kStream, stream_}}, records_, v);
    return v;
  }

  History history_;
  OrderedStream stream_;
  std::vector<CallRecord> records_;
};

TEST_F(OrderedCheckTest, OneHostsLaneRunsTheNextMessageWhenTheOwnCallEnded) {
  call(1, kHostA, 0, 10, "ok");
  call(2, kHostA, 10, 20, "ok");  // before 1's commit: its own call ended
  call(3, kHostA, 21, 30, "ok");
  ok_at(1, 40);
  ok_at(2, 40);
  ok_at(3, 40);
  EXPECT_TRUE(check().ok()) << check().report();
}

TEST_F(OrderedCheckTest, AnotherHostMayRunTheSuccessorOnlyAfterTheDecision) {
  call(1, kHostA, 0, 10, "ok");
  ok_at(1, 10);
  call(2, kHostB, 30, 40, "ok");
  ok_at(2, 40);
  EXPECT_TRUE(check().ok()) << check().report();

  records_.clear();
  call(1, kHostA, 0, 10, "ok");
  call(2, kHostB, 5, 6, "ok");  // before 1 was even decided, and beside it
  const auto v = check();
  EXPECT_EQ(v.count("early"), 1) << v.report();
  EXPECT_EQ(v.count("overlap"), 1) << v.report();
  EXPECT_EQ(v.count("order"), 1) << v.report();
}

TEST_F(OrderedCheckTest, AReplayAfterACrashRunsTheUncommittedPredecessorFirst) {
  // Host A ran 1 and 2 and died before committing either; host B replays.
  call(1, kHostA, 0, 10, "ok");
  call(2, kHostA, 10, 20, "ok");
  call(1, kHostB, 5000, 5010, "ok", 2);
  call(2, kHostB, 5010, 5020, "ok", 2);
  ok_at(1, 5010);
  ok_at(2, 5020);
  EXPECT_TRUE(check().ok()) << check().report();

  // B runs 2 before replaying 1: A's success of 1 was never committed, B cannot know it.
  records_.clear();
  call(1, kHostA, 0, 10, "ok");
  call(2, kHostB, 5000, 5010, "ok", 2);
  call(1, kHostB, 5010, 5020, "ok", 2);
  ok_at(1, 5020);
  ok_at(2, 5010);
  EXPECT_EQ(check().count("early"), 1) << check().report();
}

TEST_F(OrderedCheckTest, OverlapsOfAHungAttemptOrAStoppedHostAreExcused) {
  // A hung call (its host gave up after handler_timeout) and the retry beside it.
  call(1, kHostA, 0, 1500, "hang");
  call(1, kHostA, 600, 610, "ok", 2);
  ok_at(1, 610);
  call(2, kHostA, 610, 620, "ok");
  ok_at(2, 620);
  EXPECT_TRUE(check().ok()) << check().report();

  // Host A SIGSTOPped in 2's call; B reclaimed and ran 2 and 3; A's call returns after SIGCONT.
  records_.clear();
  stream_.decided.clear();
  history_.disturbances.push_back(Disturbance{kHostA, "chaos-h1", "stop", 5 * kMs, 4500 * kMs});
  call(1, kHostA, 0, 3, "ok");
  ok_at(1, 3);
  call(2, kHostA, 4, 4600, "ok");
  call(2, kHostB, 4000, 4010, "ok", 2);
  ok_at(2, 4010);
  call(3, kHostB, 4010, 4020, "ok");
  ok_at(3, 4020);
  auto v = check();
  EXPECT_TRUE(v.ok()) << v.report();
  EXPECT_GT(v.info["ordered: overlaps excused (timed out, host stopped/killed)"], 0);

  // The same overlap with no stop is reported.
  history_.disturbances.clear();
  EXPECT_EQ(check().count("overlap"), 2) << check().report();
}

TEST_F(OrderedCheckTest, ADeadMessageReleasesItsKeyOrHoldsItUntilAnOperatorActs) {
  call(1, kHostA, 0, 10, "retry", 1);
  call(1, kHostA, 100, 110, "terminal", 2);
  dead_at(1, 110, 2);
  call(2, kHostA, 110, 120, "ok");  // its own host decided 1 dead at 110
  ok_at(2, 120);
  call(3, kHostB, 200, 210, "ok");
  ok_at(3, 210);
  EXPECT_TRUE(check("release").ok()) << check("release").report();
  // Under "hold" 2 and 3 ran while 1 was dead and not yet discarded.
  EXPECT_EQ(check("hold").count("early"), 2) << check("hold").report();

  // Held until the operator's discard at 150: 3 after it is fine, 2 before it is not.
  discarded_at(1, 150);
  EXPECT_EQ(check("hold").count("early"), 1) << check("hold").report();
}

TEST_F(OrderedCheckTest, AnOperatorsRetryOfADeadLetterMayRunBesideItsSuccessorsUnderRelease) {
  call(1, kHostA, 0, 10, "terminal");
  dead_at(1, 10, 1);
  call(2, kHostA, 10, 500, "ok");
  ok_at(2, 500);
  decided(1).operator_retried = true;  // `dead retry` at 100: 1 runs again beside 2
  call(1, kHostB, 200, 210, "terminal", 1);
  auto v = check("release");
  EXPECT_TRUE(v.ok()) << v.report();
  EXPECT_EQ(v.info["ordered: overlaps excused (dead letter retried by an operator)"], 1);
}

TEST_F(OrderedCheckTest, ARetryKeepsTheKeyBlockedUntilTheMessageSucceeds) {
  call(1, kHostA, 0, 10, "retry", 1);
  call(2, kHostA, 20, 30, "ok");  // 1 still waits for its retry
  call(1, kHostB, 100, 110, "ok", 2);
  ok_at(1, 110);
  ok_at(2, 30);
  const auto v = check();
  EXPECT_EQ(v.count("early"), 1) << v.report();
  EXPECT_EQ(v.count("order"), 1) << v.report();
}

TEST_F(OrderedCheckTest, ARewoundSpanStartsAHistoryOfItsOwn) {
  call(1, kHostA, 0, 10, "ok");
  ok_at(1, 10);
  call(2, kHostA, 10, 20, "ok");
  ok_at(2, 20);
  stream_.rewinds[kGroup].push_back(Rewind{0, 2, 1000 * kMs});
  // Re-delivered: host B runs 2 before 1 and beside A's late call (not judged).
  call(2, kHostB, 1100, 1110, "ok");
  call(1, kHostA, 1105, 1200, "ok");
  EXPECT_TRUE(check().ok()) << check().report();
}

TEST_F(OrderedCheckTest, KeylessAndNeverDeliveredMessagesBlockNothing) {
  stream_.keys[1] = KeySeq{"k", 1};  // committed, never delivered (dropped by retention)
  stream_.allow_drop = true;
  call(2, kHostA, 0, 10, "ok");
  ok_at(2, 10);
  call(3, kHostB, 0, 50, "ok", 1, "");  // keyless beside it
  call(4, kHostB, 5, 6, "ok", 1, "");
  EXPECT_TRUE(check().ok()) << check().report();
}

// Retention swept 1 unresolved (allow_drop_past_committed) while host B held it: B still runs
// it, after its successor 2 and beside 3, and its outcome commits nothing (no audit row, gone
// from the log). It blocks nothing, for `order` and `overlap` as for `early` (short runs
// reported order=1, then overlap=1, here).
TEST_F(OrderedCheckTest, AMessageRetentionDroppedUnresolvedBlocksNothingEvenIfRunLate) {
  stream_.allow_drop = true;
  stream_.keys[1] = KeySeq{"k", 1};
  stream_.keys[2] = KeySeq{"k", 2};
  stream_.stored.insert(2);
  call(2, kHostA, 0, 10, "ok");
  ok_at(2, 10);
  call(1, kHostB, 20, 30, "ok");  // B's late run of the swept message
  call(3, kHostA, 25, 35, "ok");  // 2's successor, beside B's run of 1
  ok_at(3, 35);
  stream_.keys[3] = KeySeq{"k", 3};
  stream_.stored.insert(3);
  auto v = check();
  EXPECT_TRUE(v.ok()) << v.report();
  // Still stored at the end: not dropped, so 2 before 1 is out of order, and 1 ran beside 3.
  stream_.stored.insert(1);
  v = check();
  EXPECT_EQ(v.count("order"), 1) << v.report();
  EXPECT_EQ(v.count("overlap"), 1) << v.report();
}

TEST_F(OrderedCheckTest, AKeysSeqMustGrowWithTheIdInTheLog) {
  stream_.keys[10] = KeySeq{"k", 1};
  stream_.keys[11] = KeySeq{"k", 3};  // a gap: 2 rolled back
  stream_.keys[12] = KeySeq{"j", 0};
  EXPECT_EQ(check().count("log-order"), 0);
  stream_.keys[13] = KeySeq{"k", 2};
  EXPECT_EQ(check().count("log-order"), 1) << check().report();
}

}  // namespace
}  // namespace sqlstreams::chaos
