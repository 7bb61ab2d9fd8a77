// GroupPipeline: asynchronous handlers (ABI 1.2 handle_async). The worker threads start
// messages and move on; the plugin completes each later from its own thread, through the
// AsyncGate, into on_async_done(). Timeouts, lease checks, commit order and drain are those of
// the synchronous path; see group_pipeline.hpp.
// Lock order: (registry shard) → gate_->mu (shared) → mu_. cancel_async() and start_async()
// are never called with mu_ held.
#include <spdlog/spdlog.h>

#include "common/duration.hpp"
#include "consume/group_pipeline.hpp"
#include "ops/crash_handler.hpp"

namespace sqlstreams::consume {

using Steady = std::chrono::steady_clock;

size_t GroupPipeline::range_limit() const {
  const auto& g = options_.group;
  const auto queue = static_cast<size_t>(g.queue_ranges);
  if (!async_) return queue;
  // Enough claimed messages to keep max_in_flight busy while the next ranges are claimed.
  const auto batch = static_cast<size_t>(std::max(g.batch_size, 1));
  return std::max(queue, (2 * static_cast<size_t>(g.max_in_flight) + batch - 1) / batch);
}

size_t GroupPipeline::in_flight() const {
  MutexLock lock(mu_);
  return flights_.size();
}

uint64_t GroupPipeline::completions_dropped() const {
  return late_completions_.load() + handler_->dropped_completions();
}

void GroupPipeline::async_worker_loop(std::shared_ptr<WorkerState> me) {
  std::shared_ptr<plugin_host::HandlerInstance> handler = handler_;  // outlives a write-off
  std::shared_ptr<std::atomic<int>> hung = hung_;
  ops::ensure_alternate_signal_stack();
  const auto limit = static_cast<size_t>(options_.group.max_in_flight);
  for (;;) {
    Task task;
    uint64_t flight = 0;
    {
      MutexLock lock(mu_);
      work_cv_.wait(lock.native(), [&]() SQLSTREAMS_REQUIRES(mu_) {
        return stop_workers_ || (!tasks_.empty() && flights_.size() < limit);
      });
      if (stop_workers_) break;  // stop() handed the queue back already
      task = std::move(tasks_.front());
      tasks_.pop_front();
      if (!may_start(task)) continue;
      const auto now = options_.steady_clock->now();
      flight = next_flight_++;
      flights_.emplace(flight, Flight{task, now, 0});
      if (flights_.size() > peak_in_flight_.load()) peak_in_flight_.store(flights_.size());
      // The start call itself is watched like a synchronous handler (it must return at once).
      me->busy = true;
      me->task = task;
      me->batch.assign(1, task);
      me->at = 0;
      me->started = now;
      std::lock_guard mine(me->mu);
      me->finishing = false;
    }
    std::shared_ptr<const void> keep_alive = task.range ? std::shared_ptr<const void>(task.range)
                                                        : std::shared_ptr<const void>(task.retry);
    std::shared_ptr<AsyncGate> gate = gate_;
    const uint64_t token =
        handler->start_async(view_of(task, *me), std::move(keep_alive),
                             [gate, flight](const plugin_host::Outcome& outcome) {
                               std::shared_lock open(gate->mu);
                               if (gate->pipeline != nullptr)
                                 gate->pipeline->on_async_done(flight, outcome);
                             });
    {
      std::lock_guard mine(me->mu);
      if (me->abandoned.load()) {  // the start call hung past handler_timeout: written off
        hung->fetch_sub(1);
        return;
      }
      me->finishing = true;
    }
    MutexLock lock(mu_);
    if (auto it = flights_.find(flight); it != flights_.end()) it->second.token = token;
    me->busy = false;
    me->task = Task{};
    me->batch.clear();
  }
  MutexLock lock(mu_);
  --running_workers_;
  claim_cv_.notify_all();
}

void GroupPipeline::on_async_done(uint64_t flight, const plugin_host::Outcome& outcome) {
  Task task;
  SteadyTime started;
  {
    MutexLock lock(mu_);
    auto it = flights_.find(flight);
    if (it == flights_.end()) {  // timed out or handed back meanwhile: the outcome is stale
      late_completions_++;
      return;
    }
    task = std::move(it->second.task);
    started = it->second.started;
    flights_.erase(it);
    work_cv_.notify_one();
    if (flights_.empty()) claim_cv_.notify_all();  // stop() may be waiting for the drain
  }
  const auto took = options_.steady_clock->now() - started;
  metrics_.handler_seconds.observe(took);
  complete(task, outcome);
}

// A message not completed by handler_timeout is a failed attempt, as for a synchronous handler;
// no thread is written off (none waits for it). Its late completion is dropped and counted.
void GroupPipeline::check_async_timeouts() {
  std::vector<Flight> expired;
  {
    MutexLock lock(mu_);
    if (stop_workers_) return;
    const auto now = options_.steady_clock->now();
    for (auto it = flights_.begin(); it != flights_.end();) {
      if (now - it->second.started < options_.group.handler_timeout) {
        ++it;
        continue;
      }
      expired.push_back(std::move(it->second));
      it = flights_.erase(it);
    }
    if (!expired.empty()) work_cv_.notify_all();
  }
  for (const Flight& f : expired) {
    if (f.token != 0) handler_->cancel_async(f.token);  // outside mu_ (lock order)
    metrics_.add(GroupCounter::kHandlerTimeouts);
    const int64_t id = f.task.range ? f.task.range->range().messages[f.task.index].id
                                    : f.task.retry->claim.message_id;
    if (auto n = warn_limiter_.admit("handler-timeout")) {
      spdlog::warn(
          "handler-timeout stream={} group={} message_id={} timeout={}: asynchronous completion "
          "did not come in time; attempt failed, a late completion is dropped{}",
          options_.ref.stream, options_.ref.name, id,
          format_duration(options_.group.handler_timeout), ops::suppressed_suffix(*n));
    }
    complete(f.task, plugin_host::Outcome{plugin_host::OutcomeKind::kRetry,
                                          {},
                                          "handler timed out after " +
                                              format_duration(options_.group.handler_timeout) +
                                              " (asynchronous completion never came)"});
  }
}

void GroupPipeline::drain_async(Steady::time_point deadline) {
  std::map<uint64_t, Flight> left;
  {
    MutexLock lock(mu_);
    claim_cv_.wait_until(lock.native(), deadline,
                         [&]() SQLSTREAMS_REQUIRES(mu_) { return flights_.empty(); });
    left.swap(flights_);
  }
  // Completions from now on find no flight (late_completions_) or a cancelled token.
  for (auto& [id, f] : left) {
    if (f.token != 0) handler_->cancel_async(f.token);
  }
  {
    std::unique_lock closing(gate_->mu);  // waits for completions being recorded now
    gate_->pipeline = nullptr;
  }
  if (left.empty()) return;
  MutexLock lock(mu_);
  for (auto& [id, f] : left) hand_back(f.task);  // never completed: handed back, not charged
  spdlog::warn(
      "drain-timeout stream={} group={} in_flight={}: asynchronous messages not completed by the "
      "stop deadline are handed back (their completions are dropped)",
      options_.ref.stream, options_.ref.name, left.size());
  commit_cv_.notify_one();
}

}  // namespace sqlstreams::consume
