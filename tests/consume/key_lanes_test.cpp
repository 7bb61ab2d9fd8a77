// Per-key ordering on one host (runtime/consume/README.md#per-key-ordering-ordering--key):
// KeyLanes' table tests, then a property test of the range queue's lane scheduling driven on an
// injected clock with a simulated database gate — random ranges of keyed messages, random outcomes
// in random completion order, another host retrying and resolving open rows, commits and releases
// interleaved with the claimer's gate; per key, no message ever starts while an earlier one is
// unresolved or running, and finished ranges are handed to the committer lowest first.
#include "consume/key_lanes.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>

#include "consume/range_queue.hpp"

namespace sqlstreams::consume {
namespace {

store::ClaimedRange keyed_range(const std::string& token, int64_t low,
                                const std::vector<std::optional<std::string>>& keys) {
  store::ClaimedRange r;
  r.token = token;
  r.low = low;
  r.high = low + static_cast<int64_t>(keys.size());
  r.deadline = std::chrono::steady_clock::now() + std::chrono::hours(1);
  for (size_t i = 0; i < keys.size(); ++i) {
    store::StoredMessage m;
    m.id = low + 1 + static_cast<int64_t>(i);
    m.key = keys[i];
    m.payload = "{}";
    r.messages.push_back(m);
  }
  return r;
}

LaneEntry entry(int64_t id) { return LaneEntry{nullptr, 0, id}; }

TEST(KeyLanesTest, OneHeadPerKeyTheRestQueueInIdOrder) {
  KeyLanes lanes;
  EXPECT_EQ(lanes.admit("k", entry(5), "r", true, 0), KeyLanes::Admission::kRun);
  EXPECT_EQ(lanes.admit("j", entry(6), "r", true, 0), KeyLanes::Admission::kRun);
  EXPECT_EQ(lanes.admit("k", entry(7), "r", true, 0), KeyLanes::Admission::kQueued);
  EXPECT_EQ(lanes.admit("k", entry(9), "r", true, 0), KeyLanes::Admission::kQueued);
  EXPECT_EQ(lanes.held(), 4u);
  std::vector<LaneEntry> rest;
  auto next = lanes.resolve_head("k", 5, "t1", true, &rest);
  ASSERT_TRUE(next);
  EXPECT_EQ(next->id, 7);
  next = lanes.resolve_head("k", 7, "t1", true, &rest);
  ASSERT_TRUE(next);
  EXPECT_EQ(next->id, 9);
  EXPECT_FALSE(lanes.resolve_head("k", 9, "t1", true, &rest));
  EXPECT_TRUE(rest.empty());
  EXPECT_EQ(lanes.lanes(), 1u) << "j's lane is still open";
}

TEST(KeyLanesTest, AFailedHeadEndsTheLaneAndClosesTheKeyUntilItsRangeIsSeenCommitted) {
  KeyLanes lanes;
  lanes.admit("k", entry(5), "t1", true, 0);
  lanes.admit("k", entry(7), "t1", true, 0);
  lanes.admit("k", entry(12), "t1", true, 0);
  std::vector<LaneEntry> rest;
  EXPECT_FALSE(lanes.resolve_head("k", 5, "t1", false, &rest));
  ASSERT_EQ(rest.size(), 2u);
  EXPECT_EQ(rest[0].id, 7);
  EXPECT_EQ(rest[1].id, 12);
  // The failing range is not committed yet: the database cannot know; closed here (and the
  // deferred message closes it until its own range commits).
  const uint64_t before = lanes.epoch();
  EXPECT_EQ(lanes.admit("k", entry(20), "r2", true, before), KeyLanes::Admission::kDefer);
  const uint64_t released = lanes.range_released("t1");
  EXPECT_GT(released, before);
  // A gate read before that release may have missed its rows: still closed.
  EXPECT_EQ(lanes.admit("k", entry(21), "r3", true, before), KeyLanes::Admission::kDefer);
  lanes.range_released("r2");
  const uint64_t all = lanes.range_released("r3");
  // A gate read after every release saw the rows: the database's verdict decides.
  EXPECT_EQ(lanes.admit("k", entry(22), "r4", false, all), KeyLanes::Admission::kDefer);
  const uint64_t last = lanes.range_released("r4");
  EXPECT_EQ(lanes.admit("k", entry(23), "r5", true, last), KeyLanes::Admission::kRun);
  EXPECT_EQ(lanes.closed_keys(), 0u);
}

// Found by the chaos checker: a message deferred at admission (another host's earlier lease held
// its key) left nothing behind here, so this host's next range ran the key's next message while
// the deferred row was not yet committed — and the gate excludes this host's own leases.
TEST(KeyLanesTest, ADeferredMessageClosesItsKeyUntilItsRangeIsReleased) {
  KeyLanes lanes;
  EXPECT_EQ(lanes.admit("k", entry(35), "r1", false, 0), KeyLanes::Admission::kDefer);
  EXPECT_EQ(lanes.admit("k", entry(354), "r2", true, 0), KeyLanes::Admission::kDefer)
      << "r1's deferred row is not committed: the database cannot know yet";
  lanes.range_released("r1");
  EXPECT_EQ(lanes.admit("k", entry(360), "r3", true, lanes.epoch()), KeyLanes::Admission::kDefer)
      << "r2 deferred k too and is not released (nor r3 now)";
  lanes.range_released("r2");
  const uint64_t after = lanes.range_released("r3");
  EXPECT_EQ(lanes.admit("k", entry(400), "r4", true, after), KeyLanes::Admission::kRun)
      << "both committed before this gate: the database's answer decides";
}

// Found by the chaos checker (seed 20261130): a failed head's marker named only the head's range.
// Its range committed first (ranges commit lowest first), another host retried and resolved the
// head, and this host's next range ran the key's third message while the second waited as a
// `deferred` decision in a later range that had not committed yet — the gate excludes this host's
// own leases, so the database saw nothing of the key.
TEST(KeyLanesTest, AnEndedLaneKeepsItsKeyClosedUntilEveryRangeOfItsRestIsReleased) {
  KeyLanes lanes;
  EXPECT_EQ(lanes.admit("k", entry(2237), "a", true, 0), KeyLanes::Admission::kRun);
  EXPECT_EQ(lanes.admit("k", entry(2444), "b", true, 0), KeyLanes::Admission::kQueued);
  std::vector<LaneEntry> rest;
  EXPECT_FALSE(lanes.resolve_head("k", 2237, "a", false, &rest));  // timed out
  ASSERT_EQ(rest.size(), 1u);
  EXPECT_EQ(rest[0].token, "b");
  // "a" commits (2237's row) and the row is retried and deleted elsewhere; "b" (2444's deferred
  // row) has not committed, so the gate finds the key free.
  const uint64_t after_a = lanes.range_released("a");
  EXPECT_EQ(lanes.admit("k", entry(3074), "c", true, after_a), KeyLanes::Admission::kDefer)
      << "2444 is unresolved in range b, whose deferred row is not committed yet";
  lanes.range_released("b");
  const uint64_t after_c = lanes.range_released("c");
  EXPECT_EQ(lanes.admit("k", entry(3100), "d", true, after_c), KeyLanes::Admission::kRun)
      << "every range committed before this gate: the database's answer decides";
}

TEST(KeyLanesTest, TheDatabaseGateDefersEvenBesideAnOwnLane) {
  KeyLanes lanes;
  lanes.admit("k", entry(5), "r", true, 0);
  // Another holder's earlier lease may hold k between this host's ranges.
  EXPECT_EQ(lanes.admit("k", entry(25), "r", false, 0), KeyLanes::Admission::kDefer);
  // Never queued behind a later message (a range reclaimed below those held here).
  EXPECT_EQ(lanes.admit("k", entry(3), "r", true, 0), KeyLanes::Admission::kDefer);
}

// --- The range queue's lanes under random schedules.

enum class Fate { kOk, kRetry, kDead, kDeferred, kSkipped };

struct Sim {
  explicit Sim(uint32_t seed, bool hold) : rng(seed) {
    options.group.ordering = config::Ordering::kKey;
    options.group.ordering_dead =
        hold ? config::OrderingDead::kHold : config::OrderingDead::kRelease;
    options.group.lease_ttl = std::chrono::hours(1);
    options.group.handler_timeout = std::chrono::seconds(1);
    options.steady_clock = &clock;
    queue = std::make_unique<RangeQueue>(options, metrics);
  }

  ManualSteadyClock clock;
  PipelineOptions options;
  GroupMetrics metrics;
  std::unique_ptr<RangeQueue> queue;
  std::mt19937 rng;
  int64_t next_low = 0;
  int ranges = 0;
  // What the simulated database holds: per key, the ids of committed open rows.
  std::map<std::string, std::set<int64_t>> open_rows;
  // Per message id: key, fate, whether it ran.
  std::map<int64_t, std::string> key_of;
  std::map<int64_t, Fate> fate;
  std::map<int64_t, bool> running;
  std::vector<Task> in_hand;  // started, not finished
  std::vector<std::shared_ptr<RangeWork>> committing;
  int64_t last_committed_low = -1;
  std::vector<std::string> violations;
  // This host's ranges not yet released, by token: (low, the keys they hold).
  std::map<std::string, std::pair<int64_t, std::set<std::string>>> leases;

  bool resolved_for_key(int64_t id, bool hold) const {
    auto f = fate.find(id);
    if (f == fate.end()) return false;
    return f->second == Fate::kOk || (f->second == Fate::kDead && !hold);
  }

  void claim(int keys, int size) {
    std::vector<std::optional<std::string>> ks;
    std::uniform_int_distribution<int> pick(0, keys);
    for (int i = 0; i < size; ++i) {
      int k = pick(rng);
      ks.push_back(k == keys ? std::nullopt : std::optional<std::string>("k" + std::to_string(k)));
    }
    auto range = keyed_range("t" + std::to_string(ranges++), next_low, ks);
    next_low = range.high;
    auto& lease = leases[range.token];
    lease.first = range.low;
    for (const auto& m : range.messages) {
      if (!m.key) continue;
      key_of[m.id] = *m.key;
      lease.second.insert(*m.key);
    }
    // The claimer: lanes' snapshot, then the gate statement (the simulated database now).
    auto snap = queue->gate_snapshot();
    RangeQueue::OrderedGate gate;
    gate.epoch = snap.epoch;
    std::set<std::string> answered;
    for (const auto& m : range.messages) {
      if (!m.key || !answered.insert(*m.key).second) continue;
      auto rows = open_rows.find(*m.key);
      if (rows != open_rows.end() && !rows->second.empty() && *rows->second.begin() <= range.low) {
        gate.keys.push_back(store::KeyGate{*m.key, *rows->second.begin(), false});
      } else if (rng() % 8 == 0) {
        // Another host's earlier range may hold the key (its lease's key set): this host
        // defers the key's messages to the retry path, and their rows block what follows.
        gate.keys.push_back(store::KeyGate{*m.key, std::nullopt, true});
      }
    }
    // Commits may land between the gate statement and the enqueue.
    if (rng() % 2) commit_some();
    queue->enqueue(std::move(range), &gate);
  }

  void start_some() {
    MutexLock lock(queue->mu());
    int n = static_cast<int>(rng() % 4);
    while (n-- > 0 && !queue->empty()) {
      Task t = queue->take_front();
      if (!queue->may_start(t)) continue;
      const auto& msg = t.range->range().messages[t.index];
      if (msg.key) {
        // The property: nothing earlier of the key unresolved, nothing of the key running.
        for (const auto& [id, key] : key_of) {
          if (id >= msg.id) break;
          if (key != *msg.key) continue;
          if (!resolved_for_key(id, options.group.ordering_dead == config::OrderingDead::kHold)) {
            violations.push_back("message " + std::to_string(msg.id) + " of " + *msg.key +
                                 " started while " + std::to_string(id) + " was unresolved");
          }
        }
        for (const auto& [id, on] : running) {
          if (on && key_of.count(id) && key_of[id] == *msg.key) {
            violations.push_back("two runs of " + *msg.key + " at once");
          }
        }
        running[msg.id] = true;
      }
      in_hand.push_back(t);
    }
  }

  void finish_some() {
    int n = static_cast<int>(rng() % 4);
    while (n-- > 0 && !in_hand.empty()) {
      size_t at = rng() % in_hand.size();
      Task t = in_hand[at];
      in_hand.erase(in_hand.begin() + static_cast<std::ptrdiff_t>(at));
      const auto& msg = t.range->range().messages[t.index];
      MessageSlot& slot = t.range->slot(t.index);
      ASSERT_FALSE(slot.taken.exchange(true));
      const int roll = static_cast<int>(rng() % 10);
      if (roll < 7) {
        fate[msg.id] = Fate::kOk;
      } else if (roll < 9) {
        fate[msg.id] = Fate::kRetry;
        slot.decision = store::FailedMessage{
            msg.id, store::ExceptionStatus::kReady, 1, 0, {}, "r", {}, msg.key};
      } else {
        fate[msg.id] = Fate::kDead;
        slot.decision =
            store::FailedMessage{msg.id, store::ExceptionStatus::kDead, 1, 0, {}, "d", {}, msg.key};
      }
      running[msg.id] = false;
      queue->finish_slot(t.range, t.index, MessageState::kDone);
    }
  }

  // The committer: takes what is committable, checks the order, "commits" it (its failure and
  // deferred rows become open rows of their keys) and releases it.
  void commit_some() {
    auto work = queue->await_commit_work(std::chrono::steady_clock::now());
    for (const auto& r : work.ranges) {
      if (r->range().low < last_committed_low) violations.push_back("commit order");
      last_committed_low = r->range().low;
      const auto c = r->to_commit(config::AuditMode::kOff);
      for (const auto& f : c.failures) {
        if (f.status == store::ExceptionStatus::kDeferred) fate[f.message_id] = Fate::kDeferred;
        if (f.lane_key && (f.status != store::ExceptionStatus::kDead ||
                           options.group.ordering_dead == config::OrderingDead::kHold)) {
          open_rows[*f.lane_key].insert(f.message_id);
        }
      }
    }
    queue->release_ranges(work.ranges);
    for (const auto& r : work.ranges) leases.erase(r->range().token);
  }

  // Another host's retrier: the lowest open row of a key, when the store's retry predicate takes
  // it (no earlier unresolved message of the key, no lease of this host with a lower `low` that
  // may hold the key), runs and succeeds there — its row is deleted.
  void retry_elsewhere() {
    if (open_rows.empty()) return;
    auto it = std::next(open_rows.begin(), static_cast<std::ptrdiff_t>(rng() % open_rows.size()));
    if (it->second.empty()) return;
    const std::string key = it->first;
    const int64_t row = *it->second.begin();
    const bool hold = options.group.ordering_dead == config::OrderingDead::kHold;
    for (const auto& [id, k] : key_of) {
      if (id >= row) break;
      if (k == key && !resolved_for_key(id, hold)) return;
    }
    for (const auto& [token, lease] : leases) {
      if (lease.first < row && lease.second.count(key)) return;
    }
    fate[row] = Fate::kOk;
    it->second.erase(it->second.begin());
  }
};

class LaneSchedulerProperty : public ::testing::TestWithParam<bool> {};

TEST_P(LaneSchedulerProperty, NoKeyEverStartsPastAnUnresolvedEarlierMessage) {
  const bool hold = GetParam();
  for (uint32_t seed = 1; seed <= 150; ++seed) {
    Sim sim(seed, hold);
    const int keys = 1 + static_cast<int>(seed % 12);
    for (int step = 0; step < 400; ++step) {
      const int roll = static_cast<int>(sim.rng() % 10);
      if (roll == 0 && sim.queue->ranges_in_flight() < 4) {
        sim.claim(keys, 1 + static_cast<int>(sim.rng() % 12));
      } else if (roll < 5) {
        sim.start_some();
      } else if (roll < 8) {
        sim.finish_some();
      } else if (roll < 9) {
        sim.retry_elsewhere();
      } else {
        sim.commit_some();
      }
      ASSERT_TRUE(sim.violations.empty()) << "seed " << seed << ": " << sim.violations.front();
    }
    // Drain: everything started finishes, everything finished commits.
    for (int i = 0; i < 2000 && (sim.queue->ranges_in_flight() > 0); ++i) {
      sim.start_some();
      sim.finish_some();
      sim.commit_some();
    }
    ASSERT_TRUE(sim.violations.empty()) << "seed " << seed << ": " << sim.violations.front();
    EXPECT_EQ(sim.queue->ranges_in_flight(), 0u) << "seed " << seed << ": a range never finished";
    // Per key: the messages that ran are a prefix in id order, resolved but the last; the rest
    // were deferred, never run.
    std::map<std::string, bool> blocked;
    for (const auto& [id, key] : sim.key_of) {
      auto f = sim.fate.find(id);
      ASSERT_NE(f, sim.fate.end()) << "seed " << seed << ": message " << id << " has no fate";
      if (blocked[key]) {
        EXPECT_EQ(f->second, Fate::kDeferred) << "seed " << seed << ": " << id << " of " << key;
      }
      if (!sim.resolved_for_key(id, hold)) blocked[key] = true;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(DeadReleasesOrHolds, LaneSchedulerProperty,
                         ::testing::Values(false, true));

TEST(LaneSchedulerTest, ALostRangeRevokesTheLaterRangesHeldHere) {
  Sim sim(7, false);
  sim.claim(2, 4);
  sim.claim(2, 4);
  sim.claim(2, 4);
  EXPECT_EQ(sim.queue->revoke_above(0), 2u);
  // The revoked ranges start nothing and commit nothing but their hand-back.
  MutexLock lock(sim.queue->mu());
  while (!sim.queue->empty()) {
    Task t = sim.queue->take_front();
    if (sim.queue->may_start(t)) {
      EXPECT_EQ(t.range->range().low, 0) << "only the first range may start";
    }
  }
}

}  // namespace
}  // namespace sqlstreams::consume
