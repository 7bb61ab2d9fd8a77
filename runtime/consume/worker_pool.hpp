// consume/worker_pool — the threads that run a group's handler (runtime/consume/README.md).
// Owns: `concurrency` worker threads (replacements included), their bookkeeping, the outcome
// recording (outcome policy, audit, metrics), the handler-timeout watchdog and its write-off
// hand-over, the hung-handler pause, and for an async handler (ABI 1.2 handle_async,
// async_dispatch.cpp) the messages accepted and not completed (flights) and the gate its
// completions come through.
//   sync    each worker takes a batch (1 message in-process; about 20 ms of handler time and
//           <= 1 MiB for a handler whose max_batch() > 1), records each outcome as it comes and
//           puts back at the front of the queue what the handler did not reach;
//   async   the workers only start messages (at most max_in_flight not completed); the plugin
//           completes them later from its own thread;
//   watchdog check_timeouts() (run by the committer's thread): a handler still running at
//           handler_timeout is a failed attempt, its thread is written off and replaced, the
//           rest of its batch handed back; at max_hung_handlers written-off threads still
//           running the group pauses (worker_pool's watchdog.cpp). A call that returns past
//           the limit before the watchdog came round failed all the same (complete_late).
// Threading: the workers' bookkeeping is guarded by the range queue's lock (RangeQueue::mu():
// it changes atomically with the queue). A worker and the watchdog hand a running batch over
// under the worker's own mutex (WorkerState::mu); a written-off worker touches nothing of the
// pool again. start()/stop() from the pipeline's control thread.
#pragma once

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/clock.hpp"
#include "common/mutex.hpp"
#include "common/random.hpp"
#include "consume/group_metrics.hpp"
#include "consume/pipeline_options.hpp"
#include "consume/range_queue.hpp"
#include "ops/log_limiter.hpp"
#include "plugin_host/plugin_host.hpp"

namespace sqlstreams::consume {

class WorkerPool {
 public:
  WorkerPool(const PipelineOptions& options, RangeQueue& queue, GroupMetrics& metrics,
             std::shared_ptr<plugin_host::HandlerInstance> handler);
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  void start();  // `concurrency` workers
  // After RangeQueue::stop_workers(): waits for the workers up to `deadline` (writing off the
  // ones still running), then for async completions; hands back what never ran. False when
  // handlers were still running at the deadline.
  bool stop(std::chrono::steady_clock::time_point deadline);
  // The watchdog (the committer's thread, between commits).
  void check_timeouts();

  bool asynchronous() const { return async_; }
  int live_workers() const;  // threads serving the pool now (abandoned ones excluded)
  int hung_handlers() const { return hung_->load(); }  // written off, still running
  size_t in_flight() const;  // async messages accepted and not completed (0 for a sync handler)
  size_t peak_in_flight() const { return peak_in_flight_.load(); }
  // Async completions dropped: late (after handler_timeout), after stop, or repeated.
  uint64_t completions_dropped() const;
  uint64_t stderr_lines_dropped() const { return handler_->stderr_lines_dropped(); }
  uint64_t stderr_bytes_dropped() const { return handler_->stderr_bytes_dropped(); }

 private:
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
    // The tasks handed to the handler in one handle_batch() call, in order (guarded by the
    // queue's lock): a write-off hands back those after `at`, which never started.
    std::vector<Task> batch;
    size_t at = 0;
    SteadyTime started;  // options_.steady_clock
    // What the handler's MessageView points at, owned here: a written-off handler may still
    // read its view after the pipeline is gone (found by ThreadSanitizer).
    std::string stream, group;

    // Its batch is over (the queue's lock held).
    void idle() {
      busy = false;
      task = Task{};
      batch.clear();
    }
  };
  // async_dispatch.cpp: one message an async handler accepted and has not completed.
  struct Flight {
    Task task;
    SteadyTime started;  // options_.steady_clock
    uint64_t token = 0;  // the handler's completion token; 0 while start_async runs
  };
  // Reaches the pool from a plugin's completing thread while it lives: stop() closes it, so
  // a completion after the pipeline is gone finds no pool (whatever the plugin does).
  struct AsyncGate {
    std::shared_mutex mu;
    WorkerPool* pool = nullptr;
  };
  class WorkerSink;

  void spawn_worker() SQLSTREAMS_REQUIRES(queue_.mu());
  // A worker's loop ends (stop()): one fewer running; stop() may be waiting for the last.
  void retire_worker();
  void worker_loop(std::shared_ptr<WorkerState> me);
  // Messages one handle_batch() call should take (1 for an in-process handler).
  size_t batch_limit() const SQLSTREAMS_REQUIRES(queue_.mu());
  void observe_handler_time(std::chrono::steady_clock::duration took);
  static plugin_host::MessageView view_of(const Task& task, const WorkerState& worker);
  // Records an outcome; only the first resolver of a task wins.
  void complete(const Task& task, const plugin_host::Outcome& outcome);
  // watchdog.cpp: how long a synchronous call may take (handler_timeout, or a little past the
  // limit a handler enforces itself: isolation).
  std::chrono::milliseconds timeout_limit() const;
  // An outcome that came `took` >= the limit after its call began is a failed attempt, as if the
  // watchdog had written the call off in time: it runs on the committer's thread, which a commit
  // retrying through a database outage holds for seconds, and what a late call did must not
  // depend on when that thread came round (a late success would let the next message of its key
  // start while the chaos checker, and the contract, count the message as timed out).
  void complete_late(const Task& task, std::chrono::milliseconds limit, const char* what);
  double random01();
  void update_pause() SQLSTREAMS_REQUIRES(queue_.mu());  // pauses or resumes on hung_handlers()
  // async_dispatch.cpp
  void async_worker_loop(std::shared_ptr<WorkerState> me);
  void on_async_done(uint64_t flight, const plugin_host::Outcome& outcome);
  void check_async_timeouts();
  // stop(): waits for in-flight async messages up to `deadline`, then gives the rest back.
  void drain_async(std::chrono::steady_clock::time_point deadline);

  const PipelineOptions& options_;
  RangeQueue& queue_;
  GroupMetrics& metrics_;
  std::shared_ptr<plugin_host::HandlerInstance> handler_;
  size_t max_batch_ = 1;  // handler_->max_batch()
  bool async_ = false;    // handler_->asynchronous()

  std::vector<std::shared_ptr<WorkerState>> workers_ SQLSTREAMS_GUARDED_BY(queue_.mu());
  int running_workers_ SQLSTREAMS_GUARDED_BY(queue_.mu()) = 0;
  // Written-off handler threads still running: shared with them, since they may return after
  // the pipeline is gone.
  std::shared_ptr<std::atomic<int>> hung_ = std::make_shared<std::atomic<int>>(0);
  // A moving average of one handler call, in ns (0 until the first): batches are sized to it.
  std::atomic<int64_t> mean_handler_ns_{0};

  // async, by flight id
  std::map<uint64_t, Flight> flights_ SQLSTREAMS_GUARDED_BY(queue_.mu());
  uint64_t next_flight_ SQLSTREAMS_GUARDED_BY(queue_.mu()) = 1;
  std::atomic<size_t> peak_in_flight_{0};
  std::atomic<uint64_t> late_completions_{0};  // completions of flights no longer tracked
  std::shared_ptr<AsyncGate> gate_ = std::make_shared<AsyncGate>();

  RandomSource rng_;
  ops::LogLimiter warn_limiter_;  // repeated identical warnings: one line + a suppressed count
};

}  // namespace sqlstreams::consume
