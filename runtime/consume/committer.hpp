// consume/committer — the committer of one group's pipeline
// (docs/design.md#range-leases-and-token-guarded-transitions,
// docs/design.md#retries-exception-rows-and-dead-letters).
// Owns: the commit thread (`ss-commit`) and its own store session. It takes finished ranges and
// retry results from the range queue and commits them in batches, in token-guarded
// transactions (a range or row whose lease was lost is reported, not committed); a commit the
// database refuses deterministically (SQLSTATE 22/23) is redone isolating each range and row;
// an in-doubt commit is resolved with pg_xact_status before anything is sent again. Between
// commits it renews range and row leases (every renew_every on the injected steady clock),
// advances the cursor soon after each commit batch (at most every 20 ms) and, when enabled,
// about once a second as well, and runs the watchdog it is given
// (the worker pool's handler timeouts). After a `ready` row was written it pokes the retrier.
// stop(): set_stop_deadline() first (no commit retries past it, even one retrying now), then
// RangeQueue::final_flush(): the last round commits finished prefixes, hands the rest back.
// Threading: start(), set_stop_deadline() and join() from the pipeline's control thread.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "consume/group_metrics.hpp"
#include "consume/pipeline_options.hpp"
#include "consume/range_queue.hpp"
#include "ops/log_limiter.hpp"
#include "store/group/group_store.hpp"

namespace sqlstreams::consume {

class Committer {
 public:
  Committer(const PipelineOptions& options, RangeQueue& queue, GroupMetrics& metrics,
            std::function<void()> watchdog);
  Committer(const Committer&) = delete;
  Committer& operator=(const Committer&) = delete;

  void start();
  void set_stop_deadline(std::chrono::steady_clock::time_point deadline);
  void join();
  bool running() const { return thread_.joinable(); }

 private:
  void run();
  void commit_batch(store::GroupStore& store, const std::vector<std::shared_ptr<RangeWork>>& ranges,
                    std::chrono::steady_clock::time_point give_up);
  // Commits these ranges in one transaction; false when any of them was not committed (its
  // lease lost, or the commit given up).
  bool commit_together(store::GroupStore& store,
                       const std::vector<std::shared_ptr<RangeWork>>& ranges,
                       std::chrono::steady_clock::time_point give_up);
  void commit_retry_results(store::GroupStore& store, std::vector<store::RetryResult> results,
                            std::chrono::steady_clock::time_point give_up);
  void renew_leases(store::GroupStore& store);

  const PipelineOptions& options_;
  RangeQueue& queue_;
  GroupMetrics& metrics_;
  std::function<void()> watchdog_;
  // stop()'s deadline (steady_clock ticks); max until stop() runs. Commits read it on every
  // retry so a drain is never held up by the database (docs/design.md#poison-proof-commits).
  std::atomic<int64_t> stop_deadline_ns_{
      std::chrono::steady_clock::time_point::max().time_since_epoch().count()};
  ops::LogLimiter warn_limiter_;  // repeated identical warnings: one line + a suppressed count
  std::thread thread_;
};

}  // namespace sqlstreams::consume
