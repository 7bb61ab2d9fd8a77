// consume/range_queue — the work one group's pipeline shares between its threads, under one
// annotated lock: the queue of messages waiting for a worker (claimed ranges' messages in claim
// order, retries interleaved), the claimed ranges and retry rows not yet committed (by lease
// token), the finished ranges and retry results awaiting the committer, and the group's state
// (stopping, paused for hung handlers, paused by an operator, dropped). The claimer's and the
// retrier's waits read the injected steady clock (PipelineOptions::steady_clock).
// Owns: that state, its mutex and the three condition variables the parts wait on (workers:
// work to take; claimer, retrier and stop(): room freed or state changed; committer: results).
// Owns no thread. The claimer and retrier put work in, the worker pool takes and resolves it,
// the committer takes what is finished and releases what it committed.
// Threading: every public function without a SQLSTREAMS_REQUIRES takes the lock itself. The
// worker pool keeps its own bookkeeping (workers, async flights) guarded by this same lock
// (mu()), because it must change atomically with the queue (a task taken and its flight
// registered; a write-off and the rest of its batch handed back); it calls the REQUIRES
// functions with mu() held.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/mutex.hpp"
#include "consume/group_metrics.hpp"
#include "consume/key_lanes.hpp"
#include "consume/pipeline_options.hpp"
#include "consume/range_work.hpp"
#include "store/group/group_store.hpp"

namespace sqlstreams::consume {

// One message to run: a message of a claimed range, or an exception row being retried.
struct Task {
  std::shared_ptr<RangeWork> range;  // a message of a claimed range, or
  size_t index = 0;
  std::shared_ptr<RetryWork> retry;  // an exception row being retried
};

class RangeQueue {
 public:
  RangeQueue(const PipelineOptions& options, GroupMetrics& metrics);
  RangeQueue(const RangeQueue&) = delete;
  RangeQueue& operator=(const RangeQueue&) = delete;

  Mutex& mu() SQLSTREAMS_RETURN_CAPABILITY(mu_) { return mu_; }

  // --- The claimer and the retrier put work in.
  // Ordered groups (`ordering = "key"`): what the claimer read for a range before enqueueing
  // it — the lane epoch and this host's lease tokens (gate_snapshot(), read first), then the
  // database gate's verdict per key (store::GroupStore::gate_keys). `failed`: the gate
  // statement failed; every keyed message is deferred (always safe: the retry path orders).
  struct GateSnapshot {
    uint64_t epoch = 0;
    std::vector<std::string> own_tokens;
  };
  struct OrderedGate {
    uint64_t epoch = 0;
    std::vector<store::KeyGate> keys;
    bool failed = false;
  };
  GateSnapshot gate_snapshot() const;
  bool ordered() const { return ordered_; }
  // `gate` is required for an ordered group and ignored otherwise.
  void enqueue(store::ClaimedRange range, const OrderedGate* gate = nullptr);
  // One retry claim's rows, in id order. Ordered groups: a row claimed behind its key's head
  // (RetryClaim::chained) waits here, in its chain, until the row before it succeeds; a chain
  // row whose head is not in this claim goes back at once.
  void enqueue_retries(std::vector<store::RetryClaim> claims);
  // A retry row's result for the committer (an outcome, or dead without running).
  void add_retry_result(store::RetryResult result);
  // Resolves slot `index`; the last resolution hands the range to the committer.
  void finish_slot(const std::shared_ptr<RangeWork>& range, size_t index, MessageState state);

  // The claimer's wait for room: until fewer than `limit` ranges are claimed, the claimed
  // ranges' payload bytes are below `byte_limit` (queue_bytes), and claiming is not paused, or
  // `until` (the next state check). False once claiming stops.
  bool await_claim_room(SteadyTime until, size_t limit, int64_t byte_limit);
  // The payload bytes of the claimed ranges not yet committed (gauge
  // sqlstreams_group_queued_bytes). Only the claimer adds to it, so a value it reads can only
  // have shrunk by the time its claim is enqueued.
  int64_t held_bytes() const;
  // The claimer's wait after a claim that let nothing in (store::ClaimResult::budget_full):
  // until held bytes drop below `bytes`, or `until`. False once claiming stops.
  bool await_bytes_below(int64_t bytes, SteadyTime until);
  // Sleeps `d` (on the injected steady clock) unless claiming stops first.
  void sleep_idle(std::chrono::milliseconds d);

  struct RetryRoom {
    size_t room = 0;        // rows the retrier may claim
    bool suspects = false;  // claim suspects (one at a time), not ready rows
  };
  // The retrier's wait: until `next_poll` or a poke by the committer, then (suspects due:
  // `isolating` or `next_suspect_check` passed) until no retry runs, else until the retries in
  // flight are down to the low water (half of `capacity` in a `backlog`). Nullopt once claiming
  // stops or the group was dropped.
  std::optional<RetryRoom> await_retry_room(SteadyTime next_poll, bool isolating,
                                            SteadyTime next_suspect_check, bool backlog,
                                            size_t capacity);

  // --- The committer.
  struct CommitWork {
    std::vector<std::shared_ptr<RangeWork>> ranges;
    std::vector<store::RetryResult> retries;
    bool final_flush = false;  // stop(): every claimed range, finished or not
  };
  // Waits until results are ready, the final flush, or `wake`; takes what there is. For an
  // ordered group a finished range is taken only when no unfinished range of this host has a
  // lower `low` (a later range may hold successes that began when an earlier range's message
  // of the same key resolved in memory: it commits with or after that range).
  CommitWork await_commit_work(std::chrono::steady_clock::time_point wake);
  // Ordered groups: the range at `low` lost its lease; every range held here above it is
  // revoked (RangeWork::revoked). Returns how many.
  size_t revoke_above(int64_t low);
  // The committer wrote a `ready` row: the retrier looks again.
  void poke_retrier();
  // Committed (or given up): no longer claimed here; frees room for the claimer / retrier.
  void release_ranges(const std::vector<std::shared_ptr<RangeWork>>& ranges);
  void release_retries(const std::vector<store::RetryResult>& results);
  struct LeaseTokens {
    std::vector<std::string> ranges;
    std::vector<std::string> retries;
  };
  LeaseTokens lease_tokens() const;
  // After a renewal taken at `deadline_ms` (steady ms): moves the deadlines, marks the lost.
  void apply_renewal(const LeaseTokens& renewed, int64_t deadline_ms,
                     const std::vector<std::string>& lost,
                     const std::vector<std::string>& lost_retries);

  // --- The group's state.
  size_t ranges_in_flight() const;
  bool paused() const;           // hung handlers hit the cap
  bool operator_paused() const;  // `sqlstreams group pause`
  bool dropped() const { return dropped_.load(); }
  // Follows the operator's pause: true when it changed (then queued work was handed back on
  // pause, and the claimer woken).
  bool set_operator_paused(bool pause);
  // Logs `group-dropped` once, hands queued work back and wakes the claimer and retrier.
  void mark_dropped();

  // --- stop(), in this order.
  void stop_claiming();
  // Hands back unstarted work, then the workers end once idle.
  void stop_workers();
  // The committer's last round: commit finished prefixes, hand the rest back, end.
  void final_flush();

  // --- The worker pool, with mu() held.
  bool empty() const SQLSTREAMS_REQUIRES(mu_) { return tasks_.empty(); }
  size_t queued() const SQLSTREAMS_REQUIRES(mu_) { return tasks_.size(); }
  bool stopping_workers() const SQLSTREAMS_REQUIRES(mu_) { return stop_workers_; }
  Task take_front() SQLSTREAMS_REQUIRES(mu_);
  // Pops the next tasks that may start, up to `limit` messages and 1 MiB of payloads (at least
  // one message).
  void take_batch(std::vector<Task>& batch, size_t limit) SQLSTREAMS_REQUIRES(mu_);
  // False when the task must not start (lease lost or too short, a version the group does not
  // accept); it was resolved already.
  bool may_start(const Task& task) SQLSTREAMS_REQUIRES(mu_);
  // Whether a task of a running batch still has its lease to start (may_start without its side
  // effects).
  bool may_continue(const Task& task) const SQLSTREAMS_REQUIRES(mu_);
  // Puts tasks that never reached the handler back at the front of the queue, in order (handed
  // back at once while the group stops or pauses).
  void requeue_front(std::vector<Task>::const_iterator first,
                     std::vector<Task>::const_iterator last) SQLSTREAMS_REQUIRES(mu_);
  // An unstarted or never-completed task goes back uncharged (a range slot: skipped, so the
  // range commits its resolved prefix and the rest is reclaimable; a retry row: ready).
  void hand_back(const Task& task) SQLSTREAMS_REQUIRES(mu_);
  // Unstarted tasks go back (ranges: reclaimable; rows: ready).
  void hand_back_queued() SQLSTREAMS_REQUIRES(mu_);
  bool hung_paused() const SQLSTREAMS_REQUIRES(mu_) { return paused_; }
  // Pausing hands queued work back; resuming wakes the claimer.
  void set_hung_paused(bool pause) SQLSTREAMS_REQUIRES(mu_);

  // Condition variables (a predicate runs with mu() held: annotate it SQLSTREAMS_REQUIRES).
  template <class Pred>
  void await_work(MutexLock& lock, Pred pred) SQLSTREAMS_REQUIRES(mu_) {
    work_cv_.wait(lock.native(), pred);
  }
  template <class Pred>
  bool await_freed_until(MutexLock& lock, std::chrono::steady_clock::time_point deadline, Pred pred)
      SQLSTREAMS_REQUIRES(mu_) {
    return claim_cv_.wait_until(lock.native(), deadline, pred);
  }
  void wake_worker() { work_cv_.notify_one(); }
  void wake_workers() { work_cv_.notify_all(); }
  void wake_claimers() { claim_cv_.notify_all(); }  // claimer, retrier, stop()'s drain
  void wake_committer() { commit_cv_.notify_one(); }

 private:
  bool claiming_paused() const SQLSTREAMS_REQUIRES(mu_) { return paused_ || operator_paused_; }
  // Resolves a range slot: the last resolution hands the range to the committer; a lane
  // member's resolution moves its lane on (ordered groups).
  void settle(const std::shared_ptr<RangeWork>& range, size_t index, MessageState state)
      SQLSTREAMS_REQUIRES(mu_);
  void settle_plain(const std::shared_ptr<RangeWork>& range, size_t index, MessageState state)
      SQLSTREAMS_REQUIRES(mu_);
  // A retry row's result for the committer (RetryResult::chained from its claim); for the
  // running row of a retry chain, `resolves_key` (a success, a version passed over) starts the
  // next row of the chain, anything else hands the rest back.
  void push_retry_result(store::RetryResult result, const RetryWork& work, bool resolves_key)
      SQLSTREAMS_REQUIRES(mu_);
  void settle_retry_chain(const RetryWork& work, bool resolves_key) SQLSTREAMS_REQUIRES(mu_);
  void hand_back_retry_chains() SQLSTREAMS_REQUIRES(mu_);
  // A lane member was resolved: the next head runs, or the rest is deferred / handed back.
  void advance_lane(const std::shared_ptr<RangeWork>& range, size_t index, MessageState state)
      SQLSTREAMS_REQUIRES(mu_);
  // A message of an ordered group that must not run here now becomes a `deferred` row.
  void defer(const std::shared_ptr<RangeWork>& range, size_t index) SQLSTREAMS_REQUIRES(mu_);
  // A message of a schema version the group does not accept: the row that keeps it (parked),
  // or, under unaccepted_versions = "skip", a note that it was passed over (logged once per
  // version, counted).
  store::FailedMessage parked_row(int64_t message_id, int32_t attempts, int32_t delays,
                                  int32_t version, const std::string& payload,
                                  const std::optional<std::string>& lane_key);
  void note_skipped_version(int32_t version, int64_t message_id);
  bool committable(const RangeWork& r) const SQLSTREAMS_REQUIRES(mu_);
  size_t revoke_above_locked(int64_t low) SQLSTREAMS_REQUIRES(mu_);
  bool any_committable() const SQLSTREAMS_REQUIRES(mu_);
  // cv.wait_until(until, pred) with `until` on the injected steady clock: a manual clock's
  // waiter wakes every ManualSteadyClock::kRecheck of real time and waits again until the
  // clock reached `until`. False when it timed out with `pred` false.
  template <class Pred>
  bool wait_until(std::condition_variable& cv, MutexLock& lock, SteadyTime until, Pred pred)
      SQLSTREAMS_REQUIRES(mu_) {
    const SteadyClock& clock = *options_.steady_clock;
    while (!pred()) {
      if (clock.now() >= until) return false;
      cv.wait_until(lock.native(), clock.to_real(until));
    }
    return true;
  }

  const PipelineOptions& options_;
  GroupMetrics& metrics_;
  std::set<int32_t> accepted_versions_;
  const bool ordered_;
  const bool dead_holds_key_;  // ordering_dead = "hold"
  // A planted defect (tests/chaos): an ordered group dispatched as if unordered.
  const bool plant_ignore_lanes_;
  // A planted defect (tests/chaos): a retry chain runs on past a row that failed.
  const bool plant_chain_past_failure_;
  const bool keep_unaccepted_;  // unaccepted_versions = "keep": such messages are parked

  mutable Mutex mu_;
  std::condition_variable work_cv_;    // workers: tasks available / stopping
  std::condition_variable claim_cv_;   // claimer: capacity freed / stopping; stop(): drained
  std::condition_variable commit_cv_;  // committer: results ready / flush
  std::deque<Task> tasks_ SQLSTREAMS_GUARDED_BY(mu_);
  // by lease token
  std::map<std::string, std::shared_ptr<RangeWork>> active_ SQLSTREAMS_GUARDED_BY(mu_);
  // the payload bytes of active_ (RangeWork::payload_bytes), mirrored in metrics_.queued_bytes
  int64_t held_bytes_ SQLSTREAMS_GUARDED_BY(mu_) = 0;
  // by row lease token
  std::map<std::string, std::shared_ptr<RetryWork>> active_retries_ SQLSTREAMS_GUARDED_BY(mu_);
  // Ordered groups: retry chains by lane key — the row running now and the rows claimed behind
  // it, in id order (each also in active_retries_).
  struct RetryChain {
    int64_t running = 0;
    std::deque<std::shared_ptr<RetryWork>> waiting;
  };
  std::map<std::string, RetryChain> retry_chains_ SQLSTREAMS_GUARDED_BY(mu_);
  std::vector<std::shared_ptr<RangeWork>> finished_ SQLSTREAMS_GUARDED_BY(mu_);
  std::vector<store::RetryResult> retry_results_ SQLSTREAMS_GUARDED_BY(mu_);
  bool stop_claiming_ SQLSTREAMS_GUARDED_BY(mu_) = false;
  bool stop_workers_ SQLSTREAMS_GUARDED_BY(mu_) = false;
  bool final_flush_ SQLSTREAMS_GUARDED_BY(mu_) = false;
  bool paused_ SQLSTREAMS_GUARDED_BY(mu_) = false;           // hung handlers hit the cap
  bool operator_paused_ SQLSTREAMS_GUARDED_BY(mu_) = false;  // groups.paused_at is set
  // the committer wrote a `ready` row: the retry loop looks again
  bool retry_poke_ SQLSTREAMS_GUARDED_BY(mu_) = false;
  std::atomic<bool> dropped_{false};           // the group row is gone (dropped by an operator)
  KeyLanes lanes_ SQLSTREAMS_GUARDED_BY(mu_);  // ordered groups
};

// True (after logging `group-dropped` once) when the group is gone; `store` asks the database
// unless it is known already. Never throws. (The claimer and the committer.)
bool group_gone(RangeQueue& queue, store::GroupStore& store);

}  // namespace sqlstreams::consume
