// WorkerPool: the handler-timeout watchdog (run by the committer thread) and the hung-handler
// cap — written-off threads still running pause the group at max_hung_handlers.
#include <spdlog/spdlog.h>

#include <algorithm>

#include "common/duration.hpp"
#include "consume/worker_pool.hpp"

namespace sqlstreams::consume {

// A handler still running at handler_timeout is a failed attempt; its thread is written off
// (C++ cannot kill a thread) and replaced so the pool keeps its size. The messages of its batch
// after the hung one never started: they go back to the queue, not charged.
void WorkerPool::check_timeouts() {
  if (async_) check_async_timeouts();
  std::vector<Task> timed_out;
  const std::chrono::milliseconds limit = timeout_limit();
  {
    MutexLock lock(queue_.mu());
    if (queue_.stopping_workers()) return;
    const auto now = options_.steady_clock->now();
    for (auto& w : workers_) {
      if (!w->busy || w->abandoned.load() || now - w->started < limit) {
        continue;
      }
      {
        std::lock_guard theirs(w->mu);
        if (w->finishing) continue;  // the handler returned just now: let it record its outcome
        w->abandoned.store(true);
        hung_->fetch_add(1);  // under w->mu: the worker's decrement cannot come first
      }
      w->thread.detach();
      timed_out.push_back(w->task);
      // The rest of its batch never started: back to the queue, for the other workers.
      if (w->at + 1 < w->batch.size()) {
        queue_.requeue_front(w->batch.begin() + static_cast<std::ptrdiff_t>(w->at + 1),
                             w->batch.end());
      }
      w->batch.clear();
      --running_workers_;
    }
    for (size_t i = 0; i < timed_out.size(); ++i) spawn_worker();  // not while iterating
    workers_.erase(std::remove_if(workers_.begin(), workers_.end(),
                                  [](const auto& w) { return w->abandoned.load(); }),
                   workers_.end());
    update_pause();
  }
  for (const auto& task : timed_out) {
    metrics_.add(GroupCounter::kHandlerTimeouts);
    metrics_.add(GroupCounter::kWorkersAbandoned);
    const auto& view_id =
        task.range ? task.range->range().messages[task.index].id : task.retry->claim.message_id;
    if (auto n = warn_limiter_.admit("handler-timeout")) {
      spdlog::warn(
          "handler-timeout stream={} group={} message_id={} timeout={}: attempt failed, "
          "worker thread written off and replaced{}",
          options_.ref.stream, options_.ref.name, view_id, format_duration(limit),
          ops::suppressed_suffix(*n));
    }
    complete(task, plugin_host::Outcome{plugin_host::OutcomeKind::kRetry,
                                        {},
                                        "handler timed out after " + format_duration(limit)});
  }
}

std::chrono::milliseconds WorkerPool::timeout_limit() const {
  // One timeout owner: a handler that ends stuck messages itself (isolation) is only backed up
  // here, past the longest it can take; otherwise this is handler_timeout.
  const auto enforced = handler_->enforced_timeout();
  return enforced ? *enforced + std::chrono::milliseconds(1000) : options_.group.handler_timeout;
}

void WorkerPool::complete_late(const Task& task, std::chrono::milliseconds limit,
                               const char* what) {
  metrics_.add(GroupCounter::kHandlerTimeouts);
  const int64_t id =
      task.range ? task.range->range().messages[task.index].id : task.retry->claim.message_id;
  if (auto n = warn_limiter_.admit("handler-timeout")) {
    spdlog::warn(
        "handler-timeout stream={} group={} message_id={} timeout={}: {} came after the limit "
        "(before the watchdog looked); attempt failed, its outcome dropped{}",
        options_.ref.stream, options_.ref.name, id, format_duration(limit), what,
        ops::suppressed_suffix(*n));
  }
  complete(task, plugin_host::Outcome{plugin_host::OutcomeKind::kRetry,
                                      {},
                                      "handler timed out after " + format_duration(limit) + " (" +
                                          what + " came late)"});
}

// Hung handlers cannot be killed, only counted: at max_hung_handlers the group stops claiming
// and hands its queued work back (other hosts take it), so no further thread can hang here;
// it resumes when written-off threads return.
void WorkerPool::update_pause() {
  const int hung = hung_->load();
  const int cap = options_.group.max_hung_handlers;
  if (!queue_.hung_paused() && hung >= cap) {
    queue_.set_hung_paused(true);  // hands queued work back
    spdlog::error(
        "group-paused stream={} group={} hung_handlers={} max_hung_handlers={}: handler threads "
        "written off after handler_timeout ({}) are still running; the group claims nothing and "
        "its queued work was handed back until some return (restart the host to clear them; "
        "find the hanging handler's cause first)",
        options_.ref.stream, options_.ref.name, hung, cap,
        format_duration(options_.group.handler_timeout));
  } else if (queue_.hung_paused() && hung < cap) {
    queue_.set_hung_paused(false);  // wakes the claimer
    spdlog::warn("group-resumed stream={} group={} hung_handlers={} max_hung_handlers={}",
                 options_.ref.stream, options_.ref.name, hung, cap);
  }
}

}  // namespace sqlstreams::consume
