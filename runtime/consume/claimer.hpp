// consume/claimer — the claimer of one group's pipeline (docs/design.md#the-claim-fence).
// Owns: the claim thread (`ss-claim`) and its own store session. It reclaims expired range
// leases first, then observe → prove → claim (the fence), and puts each claimed range into the
// range queue; at most range_limit() ranges are claimed at once (backpressure). Every
// poll_interval it reads the group's row: an operator's pause stops claiming (queued work is
// handed back), a dropped group ends the loop. It logs fence-held / fence-released and keeps
// the fence-wait gauge.
// Threading: start() and join() from the pipeline's control thread; the loop ends when the
// queue stops claiming (or the group is dropped). It shares nothing but the queue and the
// metrics.
#pragma once

#include <cstddef>
#include <thread>

#include "consume/group_metrics.hpp"
#include "consume/pipeline_options.hpp"
#include "consume/range_queue.hpp"

namespace sqlstreams::consume {

class Claimer {
 public:
  Claimer(const PipelineOptions& options, RangeQueue& queue, GroupMetrics& metrics,
          bool asynchronous);
  Claimer(const Claimer&) = delete;
  Claimer& operator=(const Claimer&) = delete;

  void start();
  void join();
  bool running() const { return thread_.joinable(); }

  // Ranges the claimer keeps claimed: queue_ranges, or for an async handler enough to keep
  // max_in_flight busy (max(queue_ranges, 2 × max_in_flight / batch_size)).
  static size_t range_limit(const config::GroupConfig& g, bool asynchronous);
  // The most bytes the group may hold for a claim to take a next message of `next_bytes` text
  // bytes under its budgets (batch_bytes, queue_bytes); 0: only when it holds nothing.
  static int64_t held_bytes_allowing(int64_t next_bytes, const config::GroupConfig& g);

 private:
  void run();
  RangeQueue::OrderedGate gate_for(store::GroupStore& store, const store::ClaimedRange& range);
  // Hands a claimed or reclaimed range to the queue (through the gate for an ordered group).
  void enqueue(store::GroupStore& store, store::ClaimedRange range);
  // Follows the group's row: pauses or resumes for the operator; false when it was dropped.
  bool follow_group_state(const store::GroupState& state);

  const PipelineOptions& options_;
  RangeQueue& queue_;
  GroupMetrics& metrics_;
  const size_t range_limit_;
  std::thread thread_;
};

}  // namespace sqlstreams::consume
