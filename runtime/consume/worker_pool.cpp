// WorkerPool: the workers, the batch hand-over, outcome recording and stop()'s drain; the
// watchdog is in watchdog.cpp, asynchronous handlers in async_dispatch.cpp.
#include "consume/worker_pool.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "common/thread.hpp"
#include "consume/outcome_policy.hpp"
#include "ops/crash_handler.hpp"

namespace sqlstreams::consume {

WorkerPool::WorkerPool(const PipelineOptions& options, RangeQueue& queue, GroupMetrics& metrics,
                       std::shared_ptr<plugin_host::HandlerInstance> handler)
    : options_(options), queue_(queue), metrics_(metrics), handler_(std::move(handler)) {
  max_batch_ = std::max<size_t>(handler_->max_batch(), 1);
  async_ = handler_->asynchronous();
  gate_->pool = this;
}

double WorkerPool::random01() {
  if (options_.random01) return options_.random01();
  return rng_.next01();
}

void WorkerPool::start() {
  MutexLock lock(queue_.mu());
  for (int i = 0; i < options_.group.concurrency; ++i) spawn_worker();
}

void WorkerPool::spawn_worker() {
  auto state = std::make_shared<WorkerState>();
  state->stream = options_.ref.stream;
  state->group = options_.ref.name;
  ++running_workers_;
  if (async_) {
    state->thread = start_thread("ss-work", [this, state] { async_worker_loop(state); });
  } else {
    state->thread = start_thread("ss-work", [this, state] { worker_loop(state); });
  }
  workers_.push_back(std::move(state));
}

void WorkerPool::retire_worker() {
  MutexLock lock(queue_.mu());
  --running_workers_;
  queue_.wake_claimers();
}

int WorkerPool::live_workers() const {
  MutexLock lock(queue_.mu());
  return running_workers_;
}

// Receives a batch's outcomes on the worker's thread: records each (unless the watchdog wrote
// the worker off meanwhile), moves the worker's `task` on to the next message, and stops the
// batch when that one's lease no longer covers a handler run (it goes back through may_start).
class WorkerPool::WorkerSink final : public plugin_host::BatchSink {
 public:
  WorkerSink(WorkerPool* pool, WorkerState* me, const std::vector<Task>& batch)
      : pool_(pool), me_(me), batch_(batch) {}

  bool on_outcome(size_t index, const plugin_host::Outcome& outcome) noexcept override {
    {
      std::lock_guard mine(me_->mu);
      if (me_->abandoned.load()) {  // the pipeline may be gone: touch nothing of it
        abandoned_ = true;
        return false;
      }
      me_->finishing = true;
    }
    const auto now = pool_->options_.steady_clock->now();
    const auto took = now - me_->started;
    pool_->metrics_.handler_seconds.observe(took);
    pool_->observe_handler_time(took);
    if (const auto limit = pool_->timeout_limit(); took >= limit) {
      pool_->complete_late(batch_[index], limit, "its return");
    } else {
      pool_->complete(batch_[index], outcome);
    }
    if (index + 1 >= batch_.size()) return true;
    MutexLock lock(pool_->queue_.mu());
    if (!pool_->queue_.may_continue(batch_[index + 1])) return false;  // stays `finishing`
    me_->at = index + 1;
    me_->task = batch_[index + 1];
    me_->started = now;
    std::lock_guard mine(me_->mu);
    me_->finishing = false;
    return true;
  }
  bool abandoned() const { return abandoned_; }

 private:
  WorkerPool* pool_;
  WorkerState* me_;
  const std::vector<Task>& batch_;
  bool abandoned_ = false;
};

void WorkerPool::worker_loop(std::shared_ptr<WorkerState> me) {
  std::shared_ptr<plugin_host::HandlerInstance> handler = handler_;  // outlives a write-off
  std::shared_ptr<std::atomic<int>> hung = hung_;                    // so does this count
  ops::ensure_alternate_signal_stack();  // a stack overflow in the plugin still gets its line
  std::vector<Task> batch;
  std::vector<plugin_host::MessageView> views;
  for (;;) {
    batch.clear();
    {
      MutexLock lock(queue_.mu());
      queue_.await_work(lock, [&]() SQLSTREAMS_REQUIRES(queue_.mu()) {
        return !queue_.empty() || queue_.stopping_workers();
      });
      if (queue_.empty()) break;
      queue_.take_batch(batch, batch_limit());
      if (batch.empty()) continue;
      me->busy = true;
      me->task = batch.front();
      me->batch = batch;
      me->at = 0;
      me->started = options_.steady_clock->now();
      std::lock_guard mine(me->mu);
      me->finishing = false;
    }
    views.clear();
    for (const Task& task : batch) views.push_back(view_of(task, *me));
    WorkerSink sink(this, me.get(), batch);
    // Outcomes are recorded by the sink as they come (one call per message in-process).
    const size_t reached = handler->handle_batch(views, sink);
    {
      std::lock_guard mine(me->mu);
      if (sink.abandoned() || me->abandoned.load()) {  // written off: the pipeline may be gone
        hung->fetch_sub(1);
        return;
      }
      me->finishing = true;
    }
    MutexLock lock(queue_.mu());
    // What never reached the handler (its child died before it, or the batch was stopped).
    if (reached < batch.size()) queue_.requeue_front(batch.begin() + reached, batch.end());
    me->idle();
  }
  retire_worker();
}

size_t WorkerPool::batch_limit() const {
  if (max_batch_ <= 1) return 1;
  // About kBatchBudget of handler time per batch (a slow handler gets one message at a time,
  // so lease checks and hand-backs stay per message), the queue shared among the workers.
  constexpr int64_t kBatchBudgetNs = 20'000'000;
  const int64_t mean = mean_handler_ns_.load(std::memory_order_relaxed);
  const size_t by_time = mean <= 0 ? 1 : static_cast<size_t>(kBatchBudgetNs / mean);
  const size_t workers = static_cast<size_t>(std::max(options_.group.concurrency, 1));
  const size_t fair = (queue_.queued() + workers - 1) / workers;
  return std::clamp(std::min({max_batch_, by_time, fair}), size_t{1}, max_batch_);
}

void WorkerPool::observe_handler_time(std::chrono::steady_clock::duration took) {
  const int64_t ns = std::max<int64_t>(1, std::chrono::nanoseconds(took).count());
  const int64_t mean = mean_handler_ns_.load(std::memory_order_relaxed);
  // An exponential moving average (1/8 per call); racing updates lose a sample, no more.
  mean_handler_ns_.store(mean == 0 ? ns : mean + (ns - mean) / 8, std::memory_order_relaxed);
}

plugin_host::MessageView WorkerPool::view_of(const Task& task, const WorkerState& worker) {
  const store::StoredMessage& msg =
      task.range ? task.range->range().messages[task.index] : *task.retry->claim.message;
  plugin_host::MessageView view;
  view.id = msg.id;
  view.stream = worker.stream;
  view.group = worker.group;
  view.payload = msg.payload;
  view.schema_version = msg.schema_version;
  view.attempt = task.retry ? task.retry->claim.attempts + 1 : 1;
  if (msg.key) view.message_key = *msg.key;
  view.created_at_unix_ms = msg.created_at_unix_ms;
  return view;
}

void WorkerPool::complete(const Task& task, const plugin_host::Outcome& outcome) {
  const auto& g = options_.group;
  AttemptState before;
  const store::StoredMessage* msg;
  if (task.range) {
    if (task.range->slot(task.index).taken.exchange(true)) return;
    msg = &task.range->range().messages[task.index];
  } else {
    if (task.retry->taken.exchange(true)) return;
    msg = &*task.retry->claim.message;
    before = {task.retry->claim.attempts, task.retry->claim.delays};
  }
  const SysTime now = options_.clock->now();
  auto decision = decide(outcome, before, g.retry, msg->id, msg->payload, random01());
  // Ordered groups: a failure's row carries its key, which it blocks (store/group/README.md).
  if (decision && queue_.ordered() && msg->key) decision->lane_key = msg->key;
  std::string audit = audit_outcome(decision, outcome);
  // A success's outputs go with its outcome to the commit (plugin_host keeps none otherwise).
  std::vector<store::EmittedMessage> outputs;
  if (!decision) {
    outputs.reserve(outcome.outputs.size());
    for (const auto& o : outcome.outputs) {
      outputs.push_back(store::EmittedMessage{
          o.stream, store::NewMessage{o.payload, o.schema_version, o.key, o.idempotency_key}});
    }
  }
  if (!decision) {
    metrics_.add(GroupCounter::kSucceeded);
  } else if (decision->status == store::ExceptionStatus::kDead) {
    metrics_.add(GroupCounter::kDead);
  } else if (outcome.kind == plugin_host::OutcomeKind::kDelay) {
    metrics_.add(GroupCounter::kDelayed);
  } else {
    metrics_.add(GroupCounter::kRetried);
  }
  if (task.range) {
    MessageSlot& slot = task.range->slot(task.index);
    slot.audit_outcome = audit;
    slot.audit_error = outcome.error;
    slot.decided_at = now;
    slot.decision = std::move(decision);
    slot.outputs = std::move(outputs);
    queue_.finish_slot(task.range, task.index, MessageState::kDone);
    return;
  }
  store::RetryResult result{msg->id, task.retry->claim.token, std::move(decision), false, {}};
  result.outputs = std::move(outputs);
  bool write_audit = g.audit == config::AuditMode::kAll ||
                     (g.audit == config::AuditMode::kFailures && result.decision.has_value());
  if (write_audit) {
    result.audit = store::AuditEntry{msg->id, before.attempts + 1, audit, outcome.error, now};
  }
  queue_.add_retry_result(std::move(result));
}

bool WorkerPool::stop(std::chrono::steady_clock::time_point deadline) {
  bool drained;
  std::vector<std::shared_ptr<WorkerState>> workers;
  {
    MutexLock lock(queue_.mu());
    drained = queue_.await_freed_until(
        lock, deadline, [&]() SQLSTREAMS_REQUIRES(queue_.mu()) { return running_workers_ == 0; });
    workers.swap(workers_);
  }
  for (auto& w : workers) {
    if (drained) {
      w->thread.join();
      continue;
    }
    bool finishing;
    {
      std::lock_guard theirs(w->mu);
      finishing = w->finishing && w->busy;
      if (!finishing) {
        w->abandoned.store(true);  // it must not touch us on return
        hung_->fetch_add(1);
      }
    }
    if (finishing) {
      w->thread.join();  // recording an outcome takes microseconds
    } else {
      w->thread.detach();
    }
  }
  if (async_) drain_async(deadline);
  if (!drained) {
    MutexLock lock(queue_.mu());
    for (auto& w : workers) {  // the rest of a written-off batch never started: hand it back
      if (w->abandoned.load() && w->at + 1 < w->batch.size()) {
        queue_.requeue_front(w->batch.begin() + static_cast<std::ptrdiff_t>(w->at + 1),
                             w->batch.end());
      }
    }
    spdlog::warn(
        "drain-timeout stream={} group={}: handler(s) still running; their ranges are "
        "handed back",
        options_.ref.stream, options_.ref.name);
  }
  return drained;
}

}  // namespace sqlstreams::consume
