// GroupPipeline: lifecycle, dispatch, the worker pool and outcome recording.
#include "consume/group_pipeline.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <random>

#include "common/thread.hpp"
#include "consume/lease_timing.hpp"
#include "consume/outcome_policy.hpp"
#include "ops/crash_handler.hpp"

namespace sqlstreams::consume {

GroupPipeline::GroupPipeline(PipelineOptions options,
                             std::unique_ptr<plugin_host::HandlerInstance> handler)
    : options_(std::move(options)), handler_(std::move(handler)) {
  max_batch_ = std::max<size_t>(handler_->max_batch(), 1);
  async_ = handler_->asynchronous();
  gate_->pipeline = this;
  accepted_versions_.insert(options_.group.schema_versions.begin(),
                            options_.group.schema_versions.end());
}

GroupPipeline::~GroupPipeline() {
  if (claimer_.joinable() || committer_.joinable()) {
    stop(std::chrono::steady_clock::now() + options_.group.handler_timeout);
  }
}

double GroupPipeline::random01() {
  if (options_.random01) return options_.random01();
  return rng_.next01();
}

void GroupPipeline::start() {
  {
    MutexLock lock(mu_);
    for (int i = 0; i < options_.group.concurrency; ++i) spawn_worker();
  }
  committer_ = start_thread("ss-commit", [this] { commit_loop(); });
  claimer_ = start_thread("ss-claim", [this] { claim_loop(); });
  retrier_ = start_thread("ss-retry", [this] { retry_loop(); });
}

void GroupPipeline::spawn_worker() {
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

size_t GroupPipeline::ranges_in_flight() const {
  MutexLock lock(mu_);
  return active_.size();
}

bool GroupPipeline::paused() const {
  MutexLock lock(mu_);
  return paused_;
}

int GroupPipeline::live_workers() const {
  MutexLock lock(mu_);
  return running_workers_;
}

void GroupPipeline::enqueue(store::ClaimedRange range) {
  metrics_.add(GroupCounter::kRangesClaimed);
  if (range.from_cache) metrics_.add(GroupCounter::kRangesFromCache);
  metrics_.add(GroupCounter::kMessagesClaimed, range.messages.size());
  range.deadline = options_.steady_clock->from_real(range.deadline);  // the store's: real
  auto work = std::make_shared<RangeWork>(std::move(range));
  MutexLock lock(mu_);
  active_[work->range().token] = work;
  if (work->size() == 0) {  // a gap-only range: nothing to run
    finished_.push_back(work);
    commit_cv_.notify_one();
    return;
  }
  for (size_t i = 0; i < work->size(); ++i) tasks_.push_back(Task{work, i, nullptr});
  work_cv_.notify_all();
}

void GroupPipeline::enqueue_retry(store::RetryClaim claim) {
  metrics_.add(GroupCounter::kRetriesClaimed);
  claim.deadline = options_.steady_clock->from_real(claim.deadline);  // the store's: real
  auto work = std::make_shared<RetryWork>(std::move(claim));
  MutexLock lock(mu_);
  active_retries_[work->claim.token] = work;
  tasks_.push_back(Task{nullptr, 0, work});
  work_cv_.notify_one();
}

void GroupPipeline::finish_slot(const std::shared_ptr<RangeWork>& range, size_t index,
                                SlotState state) {
  if (range->resolve(index, state)) {
    MutexLock lock(mu_);
    finished_.push_back(range);
    commit_cv_.notify_one();
  }
}

// Receives a batch's outcomes on the worker's thread: records each (unless the watchdog wrote
// the worker off meanwhile), moves the worker's `task` on to the next message, and stops the
// batch when that one's lease no longer covers a handler run (it goes back through may_start).
class GroupPipeline::WorkerSink final : public plugin_host::BatchSink {
 public:
  WorkerSink(GroupPipeline* pipeline, WorkerState* me, const std::vector<Task>& batch)
      : pipeline_(pipeline), me_(me), batch_(batch) {}

  bool on_outcome(size_t index, const plugin_host::Outcome& outcome) noexcept override {
    {
      std::lock_guard mine(me_->mu);
      if (me_->abandoned.load()) {  // the pipeline may be gone: touch nothing of it
        abandoned_ = true;
        return false;
      }
      me_->finishing = true;
    }
    const auto now = pipeline_->options_.steady_clock->now();
    pipeline_->metrics_.handler_seconds.observe(now - me_->started);
    pipeline_->observe_handler_time(now - me_->started);
    pipeline_->complete(batch_[index], outcome);
    if (index + 1 >= batch_.size()) return true;
    MutexLock lock(pipeline_->mu_);
    if (!pipeline_->may_continue(batch_[index + 1])) return false;  // stays `finishing`
    me_->at = index + 1;
    me_->task = batch_[index + 1];
    me_->started = now;
    std::lock_guard mine(me_->mu);
    me_->finishing = false;
    return true;
  }
  bool abandoned() const { return abandoned_; }

 private:
  GroupPipeline* pipeline_;
  WorkerState* me_;
  const std::vector<Task>& batch_;
  bool abandoned_ = false;
};

void GroupPipeline::worker_loop(std::shared_ptr<WorkerState> me) {
  std::shared_ptr<plugin_host::HandlerInstance> handler = handler_;  // outlives a write-off
  std::shared_ptr<std::atomic<int>> hung = hung_;                    // so does this count
  ops::ensure_alternate_signal_stack();  // a stack overflow in the plugin still gets its line
  std::vector<Task> batch;
  std::vector<plugin_host::MessageView> views;
  for (;;) {
    batch.clear();
    {
      MutexLock lock(mu_);
      work_cv_.wait(lock.native(),
                    [&]() SQLSTREAMS_REQUIRES(mu_) { return !tasks_.empty() || stop_workers_; });
      if (tasks_.empty()) break;
      take_batch(batch);
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
    MutexLock lock(mu_);
    // What never reached the handler (its child died before it, or the batch was stopped).
    if (reached < batch.size()) requeue_front(batch.begin() + reached, batch.end());
    me->busy = false;
    me->task = Task{};
    me->batch.clear();
  }
  MutexLock lock(mu_);
  --running_workers_;
  claim_cv_.notify_all();
}

size_t GroupPipeline::batch_limit() const {
  if (max_batch_ <= 1) return 1;
  // About kBatchBudget of handler time per batch (a slow handler gets one message at a time,
  // so lease checks and hand-backs stay per message), the queue shared among the workers.
  constexpr int64_t kBatchBudgetNs = 20'000'000;
  const int64_t mean = mean_handler_ns_.load(std::memory_order_relaxed);
  const size_t by_time = mean <= 0 ? 1 : static_cast<size_t>(kBatchBudgetNs / mean);
  const size_t workers = static_cast<size_t>(std::max(options_.group.concurrency, 1));
  const size_t fair = (tasks_.size() + workers - 1) / workers;
  return std::clamp(std::min({max_batch_, by_time, fair}), size_t{1}, max_batch_);
}

void GroupPipeline::take_batch(std::vector<Task>& batch) {
  constexpr size_t kMaxBatchBytes = 1 << 20;  // payload bytes per batch (at least one message)
  const size_t limit = batch_limit();
  size_t bytes = 0;
  while (!tasks_.empty() && batch.size() < limit) {
    const Task& next = tasks_.front();
    const size_t size = next.range ? next.range->range().messages[next.index].payload.size()
                                   : next.retry->claim.message->payload.size();
    if (!batch.empty() && bytes + size > kMaxBatchBytes) break;
    Task task = std::move(tasks_.front());
    tasks_.pop_front();
    if (!may_start(task)) continue;
    bytes += size;
    batch.push_back(std::move(task));
  }
}

void GroupPipeline::requeue_front(std::vector<Task>::const_iterator first,
                                  std::vector<Task>::const_iterator last) {
  for (auto it = last; it != first;) {
    --it;
    if (it->range) {
      it->range->slot(it->index).state.store(SlotState::kPending, std::memory_order_release);
    }
    tasks_.push_front(*it);
  }
  if (stop_workers_ || claiming_paused() || dropped_.load()) {
    hand_back_queued();
  } else {
    work_cv_.notify_all();
  }
}

bool GroupPipeline::may_continue(const Task& task) const {
  const auto& g = options_.group;
  const int64_t left =
      (task.range ? task.range->deadline_ms.load() : task.retry->deadline_ms.load()) -
      steady_ms(options_.steady_clock->now());
  const bool lost = task.range ? task.range->lost.load() : task.retry->lost.load();
  return !lost && left >= lease_timing(g.lease_ttl, g.handler_timeout).start_needed.count();
}

void GroupPipeline::observe_handler_time(std::chrono::steady_clock::duration took) {
  const int64_t ns = std::max<int64_t>(1, std::chrono::nanoseconds(took).count());
  const int64_t mean = mean_handler_ns_.load(std::memory_order_relaxed);
  // An exponential moving average (1/8 per call); racing updates lose a sample, no more.
  mean_handler_ns_.store(mean == 0 ? ns : mean + (ns - mean) / 8, std::memory_order_relaxed);
}

// Called with mu_ held. Leaves a task for reclaim when its lease is lost or too short to cover
// a whole handler run; passes over schema versions the group does not declare.
bool GroupPipeline::may_start(const Task& task) {
  const auto& g = options_.group;
  const int64_t now_ms = steady_ms(options_.steady_clock->now());
  const int64_t needed = lease_timing(g.lease_ttl, g.handler_timeout).start_needed.count();
  if (task.range) {
    auto& r = *task.range;
    if (r.lost.load() || r.deadline_ms.load() - now_ms < needed) {
      if (!r.slot(task.index).taken.exchange(true)) {
        if (r.resolve(task.index, SlotState::kSkipped)) {
          finished_.push_back(task.range);
          commit_cv_.notify_one();
        }
      }
      return false;
    }
    const auto& msg = r.range().messages[task.index];
    if (!accepted_versions_.count(msg.schema_version)) {
      if (metrics_.count_skipped_version(msg.schema_version)) {  // passed over, never silent
        spdlog::warn(
            "version-skipped stream={} group={} schema_version={} message_id={}: the "
            "group declares schema_versions it does not include; such messages are "
            "passed over and counted",
            options_.ref.stream, options_.ref.name, msg.schema_version, msg.id);
      }
      if (!r.slot(task.index).taken.exchange(true) && r.resolve(task.index, SlotState::kDone)) {
        finished_.push_back(task.range);
        commit_cv_.notify_one();
      }
      return false;
    }
    r.slot(task.index).state.store(SlotState::kRunning, std::memory_order_release);
    return true;
  }
  auto& w = *task.retry;
  if (w.lost.load()) {
    w.taken.store(true);
    active_retries_.erase(w.claim.token);
    return false;
  }
  if (w.deadline_ms.load() - now_ms < needed) {
    if (!w.taken.exchange(true)) {
      retry_results_.push_back(store::RetryResult{w.claim.message_id, w.claim.token, {}, true, {}});
      commit_cv_.notify_one();
    }
    return false;
  }
  // Retries and quarantined rows pass over versions the group does not accept, like ranges
  // do: counted, and the exception row is deleted as an outcome (nothing left to run). 0 is a
  // dead letter kept before its version was recorded (V003): unknown, so it runs.
  const int32_t version = w.claim.message->schema_version;
  if (version != 0 && !accepted_versions_.count(version)) {
    if (metrics_.count_skipped_version(version)) {
      spdlog::warn(
          "version-skipped stream={} group={} schema_version={} message_id={}: a retry "
          "of a version the group does not accept is passed over (its exception row "
          "is deleted) and counted",
          options_.ref.stream, options_.ref.name, version, w.claim.message_id);
    }
    if (!w.taken.exchange(true)) {
      retry_results_.push_back(
          store::RetryResult{w.claim.message_id, w.claim.token, {}, false, {}});
      commit_cv_.notify_one();
    }
    return false;
  }
  return true;
}

plugin_host::MessageView GroupPipeline::view_of(const Task& task, const WorkerState& worker) {
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

void GroupPipeline::complete(const Task& task, const plugin_host::Outcome& outcome) {
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
  std::string audit = audit_outcome(decision, outcome);
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
    Slot& slot = task.range->slot(task.index);
    slot.audit_outcome = audit;
    slot.audit_error = outcome.error;
    slot.decided_at = now;
    slot.decision = std::move(decision);
    finish_slot(task.range, task.index, SlotState::kDone);
    return;
  }
  store::RetryResult result{msg->id, task.retry->claim.token, std::move(decision), false, {}};
  bool write_audit = g.audit == config::AuditMode::kAll ||
                     (g.audit == config::AuditMode::kFailures && result.decision.has_value());
  if (write_audit) {
    result.audit = store::AuditEntry{msg->id, before.attempts + 1, audit, outcome.error, now};
  }
  MutexLock lock(mu_);
  retry_results_.push_back(std::move(result));
  commit_cv_.notify_one();
}

}  // namespace sqlstreams::consume
