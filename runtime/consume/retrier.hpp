// consume/retrier — the retrier of one group's pipeline
// (docs/design.md#retries-exception-rows-and-dead-letters).
// Owns: the retry thread (`ss-retry`) and its own store session. It claims due exception rows
// in batches sized to the free retry capacity (max(2 × runners, min(batch_size, 1000)) rows in
// flight; runners: concurrency, or max_in_flight for an async handler) and puts them into the
// range queue for the worker pool: at once again while a backlog is due, else when the next row
// is due (at most max_poll_interval), or when the committer pokes it after writing a `ready`
// row. Suspects (rows whose host died while running them) are claimed one at a time, alone.
// A row whose retry budget the unfinished attempt spent is recorded dead without running.
// Threading: start() and join() from the pipeline's control thread; the loop ends when the
// queue stops claiming or the group is dropped. It shares nothing but the queue and the
// metrics.
#pragma once

#include <chrono>
#include <cstddef>
#include <thread>

#include "consume/group_metrics.hpp"
#include "consume/pipeline_options.hpp"
#include "consume/range_queue.hpp"
#include "ops/log_limiter.hpp"

namespace sqlstreams::consume {

class Retrier {
 public:
  Retrier(const PipelineOptions& options, RangeQueue& queue, GroupMetrics& metrics,
          bool asynchronous);
  Retrier(const Retrier&) = delete;
  Retrier& operator=(const Retrier&) = delete;

  void start();
  void join();

 private:
  void run();
  size_t capacity() const;  // retry rows in flight at most
  // Logs `retry-claim-slow` (rate-limited) when a claim that took rows took over a quarter of
  // lease_ttl.
  void warn_if_slow(std::chrono::nanoseconds took, size_t rows);

  const PipelineOptions& options_;
  RangeQueue& queue_;
  GroupMetrics& metrics_;
  const bool async_;
  ops::LogLimiter warn_limiter_;  // repeated identical warnings: one line + a suppressed count
  std::thread thread_;
};

}  // namespace sqlstreams::consume
