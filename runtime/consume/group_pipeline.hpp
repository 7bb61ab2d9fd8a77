// consume/group_pipeline — everything that runs one consumer group on this host
// (runtime/consume/README.md):
//   claimer thread   reclaims expired range leases first, then observe → prove → claim (the
//                    fence); at most `queue_ranges` ranges and `queue_bytes` of their payloads
//                    are in flight (backpressure), each range cut at its byte budget;
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
// Poison-proof commits (docs/design.md#poison-proof-commits): a commit the database refuses
// deterministically (SQLSTATE 22/23) is never retried as is; it is redone isolating each range and
// row, the refused rows recorded dead with "commit rejected: …". An in-doubt commit is resolved
// with pg_xact_status. The parts (runtime/consume/README.md): RangeQueue (the shared work and group
// state, one lock), Claimer, Retrier, WorkerPool (workers, async dispatch, watchdog, write-off) and
// Committer, each owning its thread(s); GroupPipeline composes them, starts, stops and drains.
// Threading: start()/stop() from one control thread; everything else is internal.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>

#include "consume/group_metrics.hpp"
#include "consume/pipeline_options.hpp"
#include "plugin_host/plugin_host.hpp"

namespace sqlstreams::consume {

class RangeQueue;
class WorkerPool;
class Claimer;
class Retrier;
class Committer;

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
  int live_workers() const;      // threads serving the pool now (abandoned ones excluded)
  int hung_handlers() const;     // written off, still running
  bool paused() const;           // too many hung handlers: claiming nothing
  bool operator_paused() const;  // `sqlstreams group pause`
  bool dropped() const;          // the group was dropped: stop() it
  bool asynchronous() const;
  size_t in_flight() const;  // async messages accepted and not completed (0 for a sync handler)
  size_t peak_in_flight() const;
  // Async completions dropped: late (after handler_timeout), after stop, or repeated.
  uint64_t completions_dropped() const;
  // Isolated groups: lines of the children's stderr over their budget (not logged).
  uint64_t stderr_lines_dropped() const;
  uint64_t stderr_bytes_dropped() const;  // their bytes

 private:
  const PipelineOptions options_;
  GroupMetrics metrics_;
  // Declared in the order they are built; each part refers to those above it.
  std::unique_ptr<RangeQueue> queue_;
  std::unique_ptr<WorkerPool> pool_;
  std::unique_ptr<Committer> committer_;
  std::unique_ptr<Claimer> claimer_;
  std::unique_ptr<Retrier> retrier_;
};

}  // namespace sqlstreams::consume
