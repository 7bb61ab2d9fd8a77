// consume/group_pipeline — everything that runs one consumer group on this host (DESIGN §6–7):
//   claimer thread   reclaims expired range leases first, then observe → prove → claim (the
//                    fence); at most `queue_ranges` ranges are in flight (backpressure);
//   retrier thread   claims due exception rows in batches sized to the free retry capacity
//                    (max(2 × concurrency, min(batch_size, 1000)) rows in flight), at once
//                    again while a backlog is due, else every poll_interval;
//   worker threads   `concurrency` threads run the handler, ranges in claim order, retries
//                    interleaved; a handler whose max_batch() > 1 (isolation = "process") gets
//                    several queued messages per handle_batch() call (about 20 ms of handler
//                    time, <= 1 MiB of payloads), each outcome recorded as it comes, what it
//                    did not reach put back at the front of the queue; a handler still running at
//                    `handler_timeout` is recorded as a failed attempt and its thread is written
//                    off and replaced; while `max_hung_handlers` written-off threads are still
//                    running the group is paused: nothing is claimed, queued work is handed back
//                    (log `group-paused`, gauge sqlstreams_group_paused, /readyz 503) until some
//                    return (`group-resumed`);
//   async handlers   (ABI 1.2 handle_async, async_dispatch.cpp) the `concurrency` threads only
//                    start messages: each start returns at once and the plugin completes the
//                    message later from its own thread; at most `max_in_flight` messages are
//                    accepted and not completed per group. Every rule stays: a message starts
//                    only with its lease covering handler_timeout; one not completed by
//                    handler_timeout is a failed attempt (its late completion is dropped and
//                    counted); the range tracker commits in order; stop() waits for in-flight
//                    completions up to the deadline, then gives the rest back. The claimer keeps
//                    up to max(queue_ranges, 2 × max_in_flight / batch_size) ranges claimed.
//   operator pause   the claimer reads the group's row (store/group_lifecycle) every
//                    poll_interval: while an operator has paused it (`sqlstreams group pause`)
//                    nothing is claimed (ranges or retries) and queued work is handed back;
//                    in-flight handlers finish and commit (`group-paused-by-operator`, then
//                    `group-resumed-by-operator`). Unlike the hung-handler pause, /readyz stays
//                    200. A group found dropped (its row gone, or its leases gone on commit)
//                    logs one `group-dropped` error, stops claiming and hands its work back;
//                    dropped() turns true and the owner stops the pipeline (service/ reaps it).
//   committer thread batches finished ranges and retry results into token-guarded
//                    transactions, renews range and row leases, runs the cursor advancer about
//                    once a second (when enabled) and the timeout watchdog.
// stop(): stop claiming, give unstarted work back, wait for in-flight handlers up to the
// deadline, commit finished prefixes and hand the rest back (reclaimable, not counted a crash).
// No commit retries past the deadline, even while the database is down (then the leases expire
// and the work is claimed again: at-least-once).
// Poison-proof commits (DESIGN §7): a commit the database refuses deterministically (SQLSTATE
// 22/23) is never retried as is; it is redone isolating each range and row, the refused rows
// recorded dead with "commit rejected: …". An in-doubt commit is resolved with pg_xact_status.
// Threading: start()/stop() from one control thread; everything else is internal.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <shared_mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/clock.hpp"
#include "common/mutex.hpp"
#include "common/random.hpp"
#include "config/config.hpp"
#include "consume/group_metrics.hpp"
#include "consume/range_work.hpp"
#include "consume/read_cache.hpp"
#include "ops/log_limiter.hpp"
#include "plugin_host/plugin_host.hpp"
#include "store/connection/session.hpp"
#include "store/group/group_store.hpp"
#include "store/schema/catalog.hpp"

namespace sqlstreams::consume {

// Where one claim cycle's time went (diagnostics: the bench's pickup breakdown). A cycle starts
// when the claimer wakes from an idle wait or has just taken the previous range, and ends with
// the claim that took the range (low, high]; steady-clock times.
struct ClaimTiming {
  int64_t low = 0;
  int64_t high = 0;
  std::chrono::steady_clock::time_point cycle_began;
  // When the wait for work (NOTIFY or poll) that began the cycle began; unset when the cycle
  // began right after the previous claim.
  std::optional<std::chrono::steady_clock::time_point> idle_began;
  std::chrono::steady_clock::time_point claim_began;   // the claim call (its await_read included)
  std::chrono::steady_clock::time_point claim_ended;   // committed, before the hand-off to workers
  std::chrono::steady_clock::duration backpressure{};  // waiting for a free queue_ranges slot
  std::chrono::steady_clock::duration proof_sleep{};   // sleeping for an unproven observation
  int unproven = 0;                                    // unproven observations and empty claims
  bool from_cache = false;
};

struct PipelineOptions {
  config::GroupConfig group;
  store::SessionOptions session;
  store::GroupRef ref;
  bool notify = false;  // LISTEN for the stream's wake-up hint
  std::string holder;   // "<host name>:<pid>", written into leases and audit rows
  const Clock* clock = &SystemClock::instance();  // dates audit records only (expiries: the DB)
  // This host's deadlines: handler_timeout (the watchdog, sync and async), the lease time a
  // message needs left to start, lease renewal. Tests pass a ManualSteadyClock and advance it.
  // (Polling, the advancer, stop()'s deadline and commit retries run on real time.)
  const SteadyClock* steady_clock = &RealSteadyClock::instance();
  std::function<double()> random01;  // injected jitter source; default: seeded splitmix64
  bool run_advancer = true;
  // Shared by the groups of one stream on this host (ReadCaches::for_stream); null = every claim
  // reads its range itself.
  std::shared_ptr<ReadCache> read_cache;
  // Diagnostics: called on the claim thread after each claim that took a fresh range (not a
  // reclaim). Null (the host): nothing is measured.
  std::function<void(const ClaimTiming&)> on_claim;
};

class GroupPipeline {
 public:
  GroupPipeline(PipelineOptions options, std::unique_ptr<plugin_host::HandlerInstance> handler);
  ~GroupPipeline();
  GroupPipeline(const GroupPipeline&) = delete;
  GroupPipeline& operator=(const GroupPipeline&) = delete;

  void start();
  // Drains (see above). Returns false when handlers were still running at the deadline: the
  // caller should then end the process (the stuck threads keep the handler alive).
  bool stop(std::chrono::steady_clock::time_point deadline);

  const GroupMetrics& metrics() const { return metrics_; }
  const PipelineOptions& options() const { return options_; }
  size_t ranges_in_flight() const;
  int live_workers() const;  // threads serving the pool now (abandoned ones excluded)
  int hung_handlers() const { return hung_->load(); }  // written off, still running
  bool paused() const;                                 // too many hung handlers: claiming nothing
  bool operator_paused() const;                        // `sqlstreams group pause`
  bool dropped() const { return dropped_.load(); }     // the group was dropped: stop() it
  bool asynchronous() const { return async_; }
  size_t in_flight() const;  // async messages accepted and not completed (0 for a sync handler)
  size_t peak_in_flight() const { return peak_in_flight_.load(); }
  // Async completions dropped: late (after handler_timeout), after stop, or repeated.
  uint64_t completions_dropped() const;

 private:
  struct Task {
    std::shared_ptr<RangeWork> range;  // a message of a claimed range, or
    size_t index = 0;
    std::shared_ptr<RetryWork> retry;  // an exception row being retried
  };
  struct WorkerState {
    std::thread thread;
    // Guards the hand-over between a returning handler and a write-off: once `finishing` is
    // set the watchdog leaves the worker alone; once `abandoned` is set the worker touches
    // nothing of the pipeline again (it may be gone).
    std::mutex mu;
    bool finishing = false;
    std::atomic<bool> abandoned{false};
    bool busy = false;
    Task task;  // the message running now: batch[at]
    // The tasks handed to the handler in one handle_batch() call, in order (guarded by mu_):
    // a write-off hands back those after `at`, which never started.
    std::vector<Task> batch;
    size_t at = 0;
    SteadyTime started;  // options_.steady_clock
    // What the handler's MessageView points at, owned here: a written-off handler may still
    // read its view after the pipeline is gone (found by ThreadSanitizer).
    std::string stream, group;
  };

  void claim_loop();
  void retry_loop();
  size_t retry_capacity() const;
  void worker_loop(std::shared_ptr<WorkerState> me);
  // async_dispatch.cpp: one message an async handler accepted and has not completed.
  struct Flight {
    Task task;
    SteadyTime started;  // options_.steady_clock
    uint64_t token = 0;  // the handler's completion token; 0 while start_async runs
  };
  // Reaches the pipeline from a plugin's completing thread while it lives: stop() closes it, so
  // a completion after the pipeline is gone finds no pipeline (whatever the plugin does).
  struct AsyncGate {
    std::shared_mutex mu;
    GroupPipeline* pipeline = nullptr;
  };
  void async_worker_loop(std::shared_ptr<WorkerState> me);
  void on_async_done(uint64_t flight, const plugin_host::Outcome& outcome);
  void check_async_timeouts();
  // stop(): waits for in-flight async messages up to `deadline`, then gives the rest back.
  void drain_async(std::chrono::steady_clock::time_point deadline);
  size_t range_limit() const;  // ranges the claimer keeps claimed
  void commit_loop();

  void spawn_worker() SQLSTREAMS_REQUIRES(mu_);
  // Pops the next tasks that may start, as many as one handle_batch() call should take (1 for
  // an in-process handler); requires mu_.
  void take_batch(std::vector<Task>& batch) SQLSTREAMS_REQUIRES(mu_);
  size_t batch_limit() const SQLSTREAMS_REQUIRES(mu_);
  // Puts tasks that never reached the handler back at the front of the queue, in order (handed
  // back at once while the group stops or pauses); requires mu_.
  void requeue_front(std::vector<Task>::const_iterator first,
                     std::vector<Task>::const_iterator last) SQLSTREAMS_REQUIRES(mu_);
  // Whether a task of a running batch still has its lease to start (may_start without its side
  // effects); requires mu_.
  bool may_continue(const Task& task) const SQLSTREAMS_REQUIRES(mu_);
  void observe_handler_time(std::chrono::steady_clock::duration took);
  class WorkerSink;
  void enqueue(store::ClaimedRange range);
  void enqueue_retry(store::RetryClaim claim);
  // False when the task must not start (lease lost or too short); it was resolved already.
  bool may_start(const Task& task) SQLSTREAMS_REQUIRES(mu_);
  static plugin_host::MessageView view_of(const Task& task, const WorkerState& worker);
  // Records an outcome; only the first resolver of a task wins.
  void complete(const Task& task, const plugin_host::Outcome& outcome);
  void finish_slot(const std::shared_ptr<RangeWork>& range, size_t index, SlotState state);
  void commit_batch(store::GroupStore& store, const std::vector<std::shared_ptr<RangeWork>>& ranges,
                    std::chrono::steady_clock::time_point give_up);
  void commit_retry_results(store::GroupStore& store, std::vector<store::RetryResult> results,
                            std::chrono::steady_clock::time_point give_up);
  void renew_leases(store::GroupStore& store);
  void check_timeouts();
  void update_pause() SQLSTREAMS_REQUIRES(mu_);  // pauses or resumes on hung_handlers()
  bool claiming_paused() const SQLSTREAMS_REQUIRES(mu_) { return paused_ || operator_paused_; }
  // Follows the group's row: pauses or resumes for the operator; false when it was dropped.
  bool follow_group_state(const store::GroupState& state);
  // True (after logging `group-dropped` once) when the group is gone; `store` asks the database
  // unless it is known already. Never throws.
  bool group_gone(store::GroupStore& store);
  void mark_dropped();
  // An unstarted or never-completed task goes back uncharged (a range slot: skipped, so the
  // range commits its resolved prefix and the rest is reclaimable; a retry row: ready). mu_
  void hand_back(const Task& task) SQLSTREAMS_REQUIRES(mu_);
  // unstarted tasks go back (ranges: reclaimable; rows: ready)
  void hand_back_queued() SQLSTREAMS_REQUIRES(mu_);
  void sleep_idle(std::chrono::milliseconds d);
  double random01();

  PipelineOptions options_;
  std::shared_ptr<plugin_host::HandlerInstance> handler_;
  std::set<int32_t> accepted_versions_;
  size_t max_batch_ = 1;                                           // handler_->max_batch()
  bool async_ = false;                                             // handler_->asynchronous()
  std::map<uint64_t, Flight> flights_ SQLSTREAMS_GUARDED_BY(mu_);  // async, by flight id
  uint64_t next_flight_ SQLSTREAMS_GUARDED_BY(mu_) = 1;
  std::atomic<size_t> peak_in_flight_{0};
  std::atomic<uint64_t> late_completions_{0};  // completions of flights no longer tracked
  std::shared_ptr<AsyncGate> gate_ = std::make_shared<AsyncGate>();
  // A moving average of one handler call, in ns (0 until the first): batches are sized to it.
  std::atomic<int64_t> mean_handler_ns_{0};
  GroupMetrics metrics_;

  mutable Mutex mu_;
  std::condition_variable work_cv_;    // workers: tasks available / stopping
  std::condition_variable claim_cv_;   // claimer: capacity freed / stopping; stop(): drained
  std::condition_variable commit_cv_;  // committer: results ready / flush
  std::deque<Task> tasks_ SQLSTREAMS_GUARDED_BY(mu_);
  // by lease token
  std::map<std::string, std::shared_ptr<RangeWork>> active_ SQLSTREAMS_GUARDED_BY(mu_);
  // by row lease token
  std::map<std::string, std::shared_ptr<RetryWork>> active_retries_ SQLSTREAMS_GUARDED_BY(mu_);
  std::vector<std::shared_ptr<RangeWork>> finished_ SQLSTREAMS_GUARDED_BY(mu_);
  std::vector<store::RetryResult> retry_results_ SQLSTREAMS_GUARDED_BY(mu_);
  std::vector<std::shared_ptr<WorkerState>> workers_ SQLSTREAMS_GUARDED_BY(mu_);
  bool stop_claiming_ SQLSTREAMS_GUARDED_BY(mu_) = false;
  bool stop_workers_ SQLSTREAMS_GUARDED_BY(mu_) = false;
  bool final_flush_ SQLSTREAMS_GUARDED_BY(mu_) = false;
  bool paused_ SQLSTREAMS_GUARDED_BY(mu_) = false;           // hung handlers hit the cap
  bool operator_paused_ SQLSTREAMS_GUARDED_BY(mu_) = false;  // groups.paused_at is set
  std::atomic<bool> dropped_{false};  // the group row is gone (dropped by an operator)
  // Written-off handler threads still running: shared with them, since they may return after
  // the pipeline is gone.
  std::shared_ptr<std::atomic<int>> hung_ = std::make_shared<std::atomic<int>>(0);
  // the committer wrote a `ready` row: the retry loop looks again
  bool retry_poke_ SQLSTREAMS_GUARDED_BY(mu_) = false;
  int running_workers_ SQLSTREAMS_GUARDED_BY(mu_) = 0;
  // stop()'s deadline (steady_clock ticks); max until stop() runs. Commits read it on every
  // retry so a drain is never held up by the database (DESIGN §7).
  std::atomic<int64_t> stop_deadline_ns_{
      std::chrono::steady_clock::time_point::max().time_since_epoch().count()};

  RandomSource rng_;
  ops::LogLimiter warn_limiter_;  // repeated identical warnings: one line + a suppressed count

  std::thread claimer_;
  std::thread retrier_;
  std::thread committer_;
};

}  // namespace sqlstreams::consume
