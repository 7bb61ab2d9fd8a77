// WorkerPool: asynchronous handlers (ABI 1.2 handle_async). The worker threads start
// messages and move on; the plugin completes each later from its own thread, through the
// AsyncGate, into on_async_done(). Timeouts, lease checks, commit order and drain are those of
// the synchronous path; see worker_pool.hpp.
// Lock order: (registry shard) → gate_->mu (shared) → the queue's lock. cancel_async() and
// start_async() are never called with that lock held.
#include <spdlog/spdlog.h>

#include <algorithm>

#include "common/duration.hpp"
#include "consume/worker_pool.hpp"
#include "ops/crash_handler.hpp"

namespace sqlstreams::consume {

size_t WorkerPool::in_flight() const {
  MutexLock lock(queue_.mu());
  return flights_.size();
}

uint64_t WorkerPool::completions_dropped() const {
  return late_completions_.load() + handler_->dropped_completions();
}

void WorkerPool::async_worker_loop(std::shared_ptr<WorkerState> me) {
  std::shared_ptr<plugin_host::HandlerInstance> handler = handler_;  // outlives a write-off
  std::shared_ptr<std::atomic<int>> hung = hung_;
  ops::ensure_alternate_signal_stack();
  const auto limit = static_cast<size_t>(options_.group.max_in_flight);
  for (;;) {
    Task task;
    uint64_t flight = 0;
    {
      MutexLock lock(queue_.mu());
      queue_.await_work(lock, [&]() SQLSTREAMS_REQUIRES(queue_.mu()) {
        return queue_.stopping_workers() || (!queue_.empty() && flights_.size() < limit);
      });
      if (queue_.stopping_workers()) break;  // stop() handed the queue back already
      task = queue_.take_front();
      if (!queue_.may_start(task)) continue;
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
                               if (gate->pool != nullptr)
                                 gate->pool->on_async_done(flight, outcome);
                             });
    {
      std::lock_guard mine(me->mu);
      if (me->abandoned.load()) {  // the start call hung past handler_timeout: written off
        hung->fetch_sub(1);
        return;
      }
      me->finishing = true;
    }
    MutexLock lock(queue_.mu());
    if (auto it = flights_.find(flight); it != flights_.end()) it->second.token = token;
    me->idle();
  }
  retire_worker();
}

void WorkerPool::on_async_done(uint64_t flight, const plugin_host::Outcome& outcome) {
  Task task;
  SteadyTime started;
  {
    MutexLock lock(queue_.mu());
    auto it = flights_.find(flight);
    if (it == flights_.end()) {  // timed out or handed back meanwhile: the outcome is stale
      late_completions_++;
      return;
    }
    task = std::move(it->second.task);
    started = it->second.started;
    flights_.erase(it);
    // A worker waits for a free slot only while max_in_flight messages are out. Waking one at
    // every completion cost a futex wake and a wait per message (the http drain: 1.7 wakes a
    // request on the completing thread); wake it once a sixteenth of the slots (at most 32) is
    // free, and it starts messages until the limit again. Each completion takes exactly one flight
    // away, so the count passes the mark on its way down; timeouts wake every worker themselves.
    const auto limit = static_cast<size_t>(options_.group.max_in_flight);
    if (flights_.size() + std::clamp<size_t>(limit / 16, 1, 32) == limit) queue_.wake_worker();
    if (flights_.empty()) queue_.wake_claimers();  // stop() may be waiting for the drain
  }
  const auto took = options_.steady_clock->now() - started;
  metrics_.handler_seconds.observe(took);
  if (took >= options_.group.handler_timeout) {
    complete_late(task, options_.group.handler_timeout, "its asynchronous completion");
  } else {
    complete(task, outcome);
  }
}

// A message not completed by handler_timeout is a failed attempt, as for a synchronous handler;
// no thread is written off (none waits for it). Its late completion is dropped and counted.
void WorkerPool::check_async_timeouts() {
  std::vector<Flight> expired;
  {
    MutexLock lock(queue_.mu());
    if (queue_.stopping_workers()) return;
    const auto now = options_.steady_clock->now();
    for (auto it = flights_.begin(); it != flights_.end();) {
      if (now - it->second.started < options_.group.handler_timeout) {
        ++it;
        continue;
      }
      expired.push_back(std::move(it->second));
      it = flights_.erase(it);
    }
    if (!expired.empty()) queue_.wake_workers();
  }
  for (const Flight& f : expired) {
    if (f.token != 0) handler_->cancel_async(f.token);  // outside the queue lock (lock order)
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

void WorkerPool::drain_async(std::chrono::steady_clock::time_point deadline) {
  std::map<uint64_t, Flight> left;
  {
    MutexLock lock(queue_.mu());
    queue_.await_freed_until(lock, deadline,
                             [&]() SQLSTREAMS_REQUIRES(queue_.mu()) { return flights_.empty(); });
    left.swap(flights_);
  }
  // Completions from now on find no flight (late_completions_) or a cancelled token.
  for (auto& [id, f] : left) {
    if (f.token != 0) handler_->cancel_async(f.token);
  }
  {
    std::unique_lock closing(gate_->mu);  // waits for completions being recorded now
    gate_->pool = nullptr;
  }
  if (left.empty()) return;
  MutexLock lock(queue_.mu());
  for (auto& [id, f] : left) queue_.hand_back(f.task);  // never completed: handed back, not charged
  spdlog::warn(
      "drain-timeout stream={} group={} in_flight={}: asynchronous messages not completed by the "
      "stop deadline are handed back (their completions are dropped)",
      options_.ref.stream, options_.ref.name, left.size());
  queue_.wake_committer();
}

}  // namespace sqlstreams::consume
