// GroupPipeline: lifecycle, dispatch and the worker pool.
#include "consume/group_pipeline.hpp"

#include <spdlog/spdlog.h>

#include <random>

#include "consume/outcome_policy.hpp"

namespace sqlstreams::consume {

GroupPipeline::GroupPipeline(PipelineOptions options,
                             std::unique_ptr<plugin_host::HandlerInstance> handler)
    : options_(std::move(options)), handler_(std::move(handler)) {
  accepted_versions_.insert(options_.group.schema_versions.begin(),
                            options_.group.schema_versions.end());
  rng_state_ = std::random_device{}() ^ (static_cast<uint64_t>(std::random_device{}()) << 32);
}

GroupPipeline::~GroupPipeline() {
  if (claimer_.joinable() || committer_.joinable()) {
    stop(std::chrono::steady_clock::now() + options_.group.handler_timeout);
  }
}

double GroupPipeline::random01() {
  if (options_.random01) return options_.random01();
  std::lock_guard lock(rng_mu_);
  // splitmix64: cheap, good enough for jitter.
  uint64_t z = (rng_state_ += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  z ^= z >> 31;
  return static_cast<double>(z >> 11) / 9007199254740992.0;
}

void GroupPipeline::start() {
  int n = options_.group.concurrency;
  {
    std::lock_guard lock(mu_);
    running_workers_ = n;
  }
  for (int i = 0; i < n; ++i) workers_.emplace_back([this] { worker_loop(); });
  committer_ = std::thread([this] { commit_loop(); });
  claimer_ = std::thread([this] { claim_loop(); });
}

size_t GroupPipeline::ranges_in_flight() const {
  std::lock_guard lock(mu_);
  return active_.size();
}

void GroupPipeline::enqueue(store::ClaimedRange range) {
  metrics_.ranges_claimed++;
  metrics_.messages_claimed += range.messages.size();
  auto work = std::make_shared<RangeWork>(std::move(range));
  std::lock_guard lock(mu_);
  active_[work->range().token] = work;
  if (work->size() == 0) {  // a gap-only range: nothing to run
    finished_.push_back(work);
    commit_cv_.notify_one();
    return;
  }
  for (size_t i = 0; i < work->size(); ++i) tasks_.push_back(Task{work, i});
  work_cv_.notify_all();
}

void GroupPipeline::finish_slot(const std::shared_ptr<RangeWork>& range, size_t index,
                                SlotState state) {
  if (range->resolve(index, state)) {
    std::lock_guard lock(mu_);
    finished_.push_back(range);
    commit_cv_.notify_one();
  }
}

void GroupPipeline::worker_loop() {
  for (;;) {
    Task task;
    {
      std::unique_lock lock(mu_);
      work_cv_.wait(lock, [&] { return !tasks_.empty() || stop_workers_; });
      if (tasks_.empty()) break;
      task = std::move(tasks_.front());
      tasks_.pop_front();
      ++busy_workers_;
    }
    run_one(task.range, task.index);
    {
      std::lock_guard lock(mu_);
      --busy_workers_;
    }
  }
  std::lock_guard lock(mu_);
  --running_workers_;
  claim_cv_.notify_all();
}

void GroupPipeline::run_one(const std::shared_ptr<RangeWork>& range, size_t index) {
  const auto& g = options_.group;
  const store::StoredMessage& msg = range->range().messages[index];
  Slot& slot = range->slot(index);
  if (range->lost.load(std::memory_order_acquire)) {
    finish_slot(range, index, SlotState::kSkipped);
    return;
  }
  // Never start a handler that could outlive the lease: leave the message for reclaim.
  const int64_t now_ms = options_.clock->now().time_since_epoch().count();
  const int64_t margin = std::min<int64_t>(1000, (g.lease_ttl - g.handler_timeout).count() / 2);
  if (range->expires_at_ms.load() - now_ms < g.handler_timeout.count() + margin) {
    finish_slot(range, index, SlotState::kSkipped);
    return;
  }
  if (!accepted_versions_.count(msg.schema_version)) {
    metrics_.skipped_version++;  // passed over, counted, never silent
    finish_slot(range, index, SlotState::kDone);
    return;
  }
  slot.state.store(SlotState::kRunning, std::memory_order_release);
  plugin_host::MessageView view;
  view.id = msg.id;
  view.stream = options_.ref.stream;
  view.group = options_.ref.name;
  view.payload = msg.payload;
  view.schema_version = msg.schema_version;
  view.attempt = 1;
  if (msg.key) view.message_key = *msg.key;
  view.created_at_unix_ms = msg.created_at_unix_ms;
  plugin_host::Outcome outcome = handler_->handle(view);
  auto decision = decide(outcome, AttemptState{}, g.retry, msg.id, msg.payload,
                         options_.clock->now(), random01());
  slot.audit_outcome = audit_outcome(decision, outcome);
  slot.audit_error = outcome.error;
  if (!decision) {
    metrics_.succeeded++;
  } else if (decision->status == store::ExceptionStatus::kDead) {
    metrics_.dead++;
  } else if (outcome.kind == plugin_host::OutcomeKind::kDelay) {
    metrics_.delayed++;
  } else {
    metrics_.retried++;
  }
  slot.decision = std::move(decision);
  finish_slot(range, index, SlotState::kDone);
}

}  // namespace sqlstreams::consume
