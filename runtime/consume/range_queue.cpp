// RangeQueue: the pipeline's shared work and group state (see range_queue.hpp).
#include "consume/range_queue.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <unordered_set>

#include "common/chaos_plant.hpp"
#include "consume/lease_timing.hpp"

namespace sqlstreams::consume {

RangeQueue::RangeQueue(const PipelineOptions& options, GroupMetrics& metrics)
    : options_(options),
      metrics_(metrics),
      ordered_(options.group.ordering == config::Ordering::kKey),
      dead_holds_key_(options.group.ordering_dead == config::OrderingDead::kHold),
      plant_ignore_lanes_(chaos_plant("ordering-ignore-lanes")),
      plant_chain_past_failure_(chaos_plant("ordering-chain-past-failure")),
      keep_unaccepted_(options_.group.unaccepted_versions == config::UnacceptedVersions::kKeep) {
  accepted_versions_.insert(options_.group.schema_versions.begin(),
                            options_.group.schema_versions.end());
}

RangeQueue::GateSnapshot RangeQueue::gate_snapshot() const {
  GateSnapshot out;
  MutexLock lock(mu_);
  out.epoch = lanes_.epoch();
  for (const auto& [token, r] : active_) out.own_tokens.push_back(token);
  return out;
}

void RangeQueue::enqueue(store::ClaimedRange range, const OrderedGate* gate) {
  metrics_.add(GroupCounter::kRangesClaimed);
  if (range.from_cache) metrics_.add(GroupCounter::kRangesFromCache);
  metrics_.add(GroupCounter::kMessagesClaimed, range.messages.size());
  range.deadline = options_.steady_clock->from_real(range.deadline);  // the store's: real
  auto work = std::make_shared<RangeWork>(std::move(range));
  MutexLock lock(mu_);
  active_[work->range().token] = work;
  held_bytes_ += work->payload_bytes();
  metrics_.queued_bytes.store(held_bytes_);
  if (work->size() == 0) {  // a gap-only range: nothing to run
    finished_.push_back(work);
    commit_cv_.notify_one();
    return;
  }
  if (!ordered_ || plant_ignore_lanes_) {
    for (size_t i = 0; i < work->size(); ++i) tasks_.push_back(Task{work, i, nullptr});
    work_cv_.notify_all();
    return;
  }
  // Per-key ordering: keyless messages run at once; a keyed one joins its key's lane here, or
  // runs as a new lane's head, or is deferred (key_lanes.hpp).
  std::unordered_set<std::string> closed;
  if (gate) {
    for (const auto& k : gate->keys) {
      if (k.blocked_from || k.gated_by_other) closed.insert(k.key);
    }
  }
  const bool gate_failed = gate == nullptr || gate->failed;
  const uint64_t epoch = gate ? gate->epoch : 0;
  for (size_t i = 0; i < work->size(); ++i) {
    const auto& msg = work->range().messages[i];
    if (!msg.key) {
      tasks_.push_back(Task{work, i, nullptr});
      continue;
    }
    const bool db_free = !gate_failed && (closed.empty() || closed.count(*msg.key) == 0);
    switch (
        lanes_.admit(*msg.key, LaneEntry{work, i, msg.id}, work->range().token, db_free, epoch)) {
      case KeyLanes::Admission::kRun:
        work->slot(i).laned = true;
        tasks_.push_back(Task{work, i, nullptr});
        break;
      case KeyLanes::Admission::kQueued:
        work->slot(i).laned = true;
        break;
      case KeyLanes::Admission::kDefer:
        defer(work, i);
        break;
    }
  }
  work_cv_.notify_all();
}

void RangeQueue::settle_plain(const std::shared_ptr<RangeWork>& range, size_t index,
                              MessageState state) {
  if (range->resolve(index, state)) {
    finished_.push_back(range);
    commit_cv_.notify_one();
  }
}

void RangeQueue::settle(const std::shared_ptr<RangeWork>& range, size_t index, MessageState state) {
  settle_plain(range, index, state);
  if (range->slot(index).laned) advance_lane(range, index, state);
}

void RangeQueue::defer(const std::shared_ptr<RangeWork>& range, size_t index) {
  MessageSlot& slot = range->slot(index);
  if (slot.taken.exchange(true)) return;
  const auto& msg = range->range().messages[index];
  store::FailedMessage f;
  f.message_id = msg.id;
  f.status = store::ExceptionStatus::kDeferred;
  f.attempts = 0;
  f.lane_key = msg.key;
  slot.decision = std::move(f);
  metrics_.add(GroupCounter::kDeferred);
  settle_plain(range, index, MessageState::kDone);
}

void RangeQueue::advance_lane(const std::shared_ptr<RangeWork>& range, size_t index,
                              MessageState state) {
  MessageSlot& slot = range->slot(index);
  slot.laned = false;
  const auto& msg = range->range().messages[index];
  // Resolved for the key: a success, a version passed over, dead under "release".
  const bool goes_on = state == MessageState::kDone &&
                       (!slot.decision || (slot.decision->status == store::ExceptionStatus::kDead &&
                                           !dead_holds_key_));
  std::vector<LaneEntry> rest;
  auto next = lanes_.resolve_head(*msg.key, msg.id, range->range().token, goes_on, &rest);
  for (const auto& e : rest) {
    e.range->slot(e.index).laned = false;
    if (state == MessageState::kSkipped) {
      // Handed back with its head: its range commits the prefix before it, the rest is
      // reclaimable (and gated by that lease until it commits).
      if (!e.range->slot(e.index).taken.exchange(true)) {
        settle_plain(e.range, e.index, MessageState::kSkipped);
      }
    } else {
      defer(e.range, e.index);
    }
  }
  if (!next) return;
  if (stop_workers_ || claiming_paused() || dropped_.load()) {
    hand_back(Task{next->range, next->index, nullptr});  // moves the lane on: the rest too
    return;
  }
  tasks_.push_back(Task{next->range, next->index, nullptr});
  work_cv_.notify_one();
}

void RangeQueue::enqueue_retries(std::vector<store::RetryClaim> claims) {
  if (claims.empty()) return;
  metrics_.add(GroupCounter::kRetriesClaimed, claims.size());
  std::vector<std::shared_ptr<RetryWork>> works;
  for (auto& c : claims) {
    c.deadline = options_.steady_clock->from_real(c.deadline);  // the store's: real
    works.push_back(std::make_shared<RetryWork>(std::move(c)));
  }
  MutexLock lock(mu_);
  std::set<std::string> chains_here;  // keys whose chain starts in this claim
  bool handed_back = false;
  for (auto& work : works) {
    const auto& claim = work->claim;
    active_retries_[claim.token] = work;
    if (ordered_ && claim.lane_key) {
      const std::string& key = *claim.lane_key;
      if (claim.chained) {
        if (chains_here.count(key)) {
          retry_chains_[key].waiting.push_back(work);
          metrics_.add(GroupCounter::kRetriesChained);
        } else {  // its head is not in this claim (the store returns heads with their chains)
          work->taken.store(true);
          push_retry_result(store::RetryResult{claim.message_id, claim.token, {}, true, {}}, *work,
                            false);
          handed_back = true;
        }
        continue;
      }
      if (auto old = retry_chains_.find(key); old != retry_chains_.end()) {
        // Another row of the key still runs here: impossible while the claim orders keys (a
        // planted defect); its chain ends, so that no row waits forever.
        for (auto& w : old->second.waiting) hand_back(Task{nullptr, 0, w});
        retry_chains_.erase(old);
        handed_back = true;
      }
      retry_chains_[key] = RetryChain{claim.message_id, {}};
      chains_here.insert(key);
    }
    tasks_.push_back(Task{nullptr, 0, work});
  }
  work_cv_.notify_all();
  if (handed_back) commit_cv_.notify_one();
}

void RangeQueue::add_retry_result(store::RetryResult result) {
  MutexLock lock(mu_);
  auto it = active_retries_.find(result.token);
  if (it == active_retries_.end()) {  // recorded dead without running (the retrier)
    retry_results_.push_back(std::move(result));
  } else {
    const bool resolves = !result.hand_back && !result.decision;
    push_retry_result(std::move(result), *it->second, resolves);
  }
  commit_cv_.notify_one();
}

void RangeQueue::push_retry_result(store::RetryResult result, const RetryWork& work,
                                   bool resolves_key) {
  result.chained = work.claim.chained;
  retry_results_.push_back(std::move(result));
  settle_retry_chain(work, resolves_key);
}

void RangeQueue::settle_retry_chain(const RetryWork& work, bool resolves_key) {
  if (!ordered_ || !work.claim.lane_key) return;
  auto it = retry_chains_.find(*work.claim.lane_key);
  if (it == retry_chains_.end() || it->second.running != work.claim.message_id) return;
  RetryChain& chain = it->second;
  const bool go_on = (resolves_key || plant_chain_past_failure_) && !stop_workers_ &&
                     !claiming_paused() && !dropped_.load();
  if (go_on && !chain.waiting.empty()) {
    // The key's next row runs now, here: no claim, no poll in between.
    auto next = std::move(chain.waiting.front());
    chain.waiting.pop_front();
    chain.running = next->claim.message_id;
    tasks_.push_back(Task{nullptr, 0, std::move(next)});
    work_cv_.notify_one();
    return;
  }
  // The key stays blocked (a failure, a hand-back): the rest goes back to `deferred`.
  auto waiting = std::move(chain.waiting);
  retry_chains_.erase(it);
  for (auto& w : waiting) {
    if (!w->taken.exchange(true)) {
      retry_results_.push_back(
          store::RetryResult{w->claim.message_id, w->claim.token, {}, true, {}, true});
    }
  }
}

void RangeQueue::hand_back_retry_chains() {
  auto chains = std::move(retry_chains_);
  retry_chains_.clear();
  for (auto& [key, chain] : chains) {
    for (auto& w : chain.waiting) {
      if (!w->taken.exchange(true)) {
        retry_results_.push_back(
            store::RetryResult{w->claim.message_id, w->claim.token, {}, true, {}, true});
      }
    }
  }
}

void RangeQueue::finish_slot(const std::shared_ptr<RangeWork>& range, size_t index,
                             MessageState state) {
  if (ordered_) {
    MutexLock lock(mu_);
    settle(range, index, state);
    return;
  }
  if (range->resolve(index, state)) {
    MutexLock lock(mu_);
    finished_.push_back(range);
    commit_cv_.notify_one();
  }
}

bool RangeQueue::await_claim_room(SteadyTime until, size_t limit, int64_t byte_limit) {
  MutexLock lock(mu_);
  // Backpressure: at most `limit` claimed ranges in flight, and fewer than `byte_limit` bytes
  // of their payloads. Wakes for the operator's pause/drop check at least every poll_interval.
  wait_until(claim_cv_, lock, until, [&]() SQLSTREAMS_REQUIRES(mu_) {
    return stop_claiming_ ||
           (!claiming_paused() && active_.size() < limit && held_bytes_ < byte_limit);
  });
  return !stop_claiming_;
}

int64_t RangeQueue::held_bytes() const {
  MutexLock lock(mu_);
  return held_bytes_;
}

bool RangeQueue::await_bytes_below(int64_t bytes, SteadyTime until) {
  MutexLock lock(mu_);
  wait_until(claim_cv_, lock, until,
             [&]() SQLSTREAMS_REQUIRES(mu_) { return stop_claiming_ || held_bytes_ < bytes; });
  return !stop_claiming_;
}

void RangeQueue::sleep_idle(std::chrono::milliseconds d) {
  const SteadyTime until = options_.steady_clock->now() + d;
  if (options_.on_claimer_sleep) options_.on_claimer_sleep(until);
  MutexLock lock(mu_);
  wait_until(claim_cv_, lock, until, [&]() SQLSTREAMS_REQUIRES(mu_) { return stop_claiming_; });
}

std::optional<RangeQueue::RetryRoom> RangeQueue::await_retry_room(SteadyTime next_poll,
                                                                  bool isolating,
                                                                  SteadyTime next_suspect_check,
                                                                  bool backlog, size_t capacity) {
  RetryRoom out;
  MutexLock lock(mu_);
  wait_until(claim_cv_, lock, next_poll, [&]() SQLSTREAMS_REQUIRES(mu_) {
    return stop_claiming_ || dropped_.load() || retry_poke_;
  });
  if (stop_claiming_ || dropped_.load()) return std::nullopt;
  retry_poke_ = false;
  out.suspects = isolating || options_.steady_clock->now() >= next_suspect_check;
  if (out.suspects) {
    claim_cv_.wait(lock.native(), [&]() SQLSTREAMS_REQUIRES(mu_) {
      return stop_claiming_ || dropped_.load() || (!claiming_paused() && active_retries_.empty());
    });
    out.room = 1;
  } else {
    // In a backlog, claim in big batches: wait until half the capacity is free again.
    const size_t low_water = backlog ? capacity / 2 : capacity - 1;
    claim_cv_.wait(lock.native(), [&]() SQLSTREAMS_REQUIRES(mu_) {
      return stop_claiming_ || dropped_.load() ||
             (!claiming_paused() && active_retries_.size() <= low_water);
    });
    out.room = capacity - active_retries_.size();
  }
  if (stop_claiming_ || dropped_.load()) return std::nullopt;
  return out;
}

RangeQueue::CommitWork RangeQueue::await_commit_work(std::chrono::steady_clock::time_point wake) {
  CommitWork work;
  MutexLock lock(mu_);
  commit_cv_.wait_until(lock.native(), wake, [&]() SQLSTREAMS_REQUIRES(mu_) {
    return any_committable() || !retry_results_.empty() || final_flush_;
  });
  work.final_flush = final_flush_;
  if (work.final_flush) {
    // Finished ranges commit fully; the rest commit their resolved prefix and hand back.
    for (auto& [token, r] : active_) work.ranges.push_back(r);
    finished_.clear();
  } else if (!ordered_) {
    work.ranges.swap(finished_);
  } else {
    auto keep = std::stable_partition(finished_.begin(), finished_.end(),
                                      [&](const std::shared_ptr<RangeWork>& r)
                                          SQLSTREAMS_REQUIRES(mu_) { return !committable(*r); });
    work.ranges.assign(keep, finished_.end());
    finished_.erase(keep, finished_.end());
  }
  if (ordered_) {
    std::sort(work.ranges.begin(), work.ranges.end(),
              [](const auto& a, const auto& b) { return a->range().low < b->range().low; });
  }
  work.retries.swap(retry_results_);
  return work;
}

bool RangeQueue::committable(const RangeWork& r) const {
  if (!ordered_) return true;
  // Every range held here below it is finished too (it commits in the same batch, first).
  for (const auto& [token, other] : active_) {
    if (other->range().low < r.range().low && !other->finished()) return false;
  }
  return true;
}

bool RangeQueue::any_committable() const {
  if (!ordered_) return !finished_.empty();
  for (const auto& r : finished_) {
    if (committable(*r)) return true;
  }
  return false;
}

size_t RangeQueue::revoke_above(int64_t low) {
  MutexLock lock(mu_);
  return revoke_above_locked(low);
}

size_t RangeQueue::revoke_above_locked(int64_t low) {
  size_t n = 0;
  for (const auto& [token, r] : active_) {
    if (r->range().low > low && !r->revoked.exchange(true)) ++n;
  }
  if (n > 0) metrics_.add(GroupCounter::kRangesRevoked, n);
  return n;
}

void RangeQueue::poke_retrier() {
  MutexLock lock(mu_);
  retry_poke_ = true;
  claim_cv_.notify_all();
}

void RangeQueue::release_ranges(const std::vector<std::shared_ptr<RangeWork>>& ranges) {
  MutexLock lock(mu_);
  for (const auto& r : ranges) {
    if (active_.erase(r->range().token) > 0) held_bytes_ -= r->payload_bytes();
    if (ordered_) lanes_.range_released(r->range().token);
  }
  metrics_.queued_bytes.store(held_bytes_);
  claim_cv_.notify_all();
  // Ordered: a later finished range may have been waiting for these.
  if (ordered_ && !finished_.empty()) commit_cv_.notify_one();
}

void RangeQueue::release_retries(const std::vector<store::RetryResult>& results) {
  MutexLock lock(mu_);
  for (const auto& r : results) active_retries_.erase(r.token);
  claim_cv_.notify_all();
}

RangeQueue::LeaseTokens RangeQueue::lease_tokens() const {
  LeaseTokens out;
  MutexLock lock(mu_);
  for (const auto& [token, r] : active_) out.ranges.push_back(token);
  for (const auto& [token, r] : active_retries_) out.retries.push_back(token);
  return out;
}

void RangeQueue::apply_renewal(const LeaseTokens& renewed, int64_t deadline_ms,
                               const std::vector<std::string>& lost,
                               const std::vector<std::string>& lost_retries) {
  MutexLock lock(mu_);
  for (const auto& t : renewed.ranges) {
    if (auto it = active_.find(t); it != active_.end()) it->second->deadline_ms.store(deadline_ms);
  }
  for (const auto& t : renewed.retries) {
    if (auto it = active_retries_.find(t); it != active_retries_.end()) {
      it->second->deadline_ms.store(deadline_ms);
    }
  }
  std::optional<int64_t> lowest_lost;
  for (const auto& token : lost) {
    if (auto it = active_.find(token); it != active_.end()) {
      it->second->lost.store(true);
      const int64_t low = it->second->range().low;
      if (!lowest_lost || low < *lowest_lost) lowest_lost = low;
    }
  }
  if (ordered_ && lowest_lost) revoke_above_locked(*lowest_lost);
  for (const auto& token : lost_retries) {
    if (auto it = active_retries_.find(token); it != active_retries_.end()) {
      it->second->lost.store(true);
    }
  }
}

size_t RangeQueue::ranges_in_flight() const {
  MutexLock lock(mu_);
  return active_.size();
}

bool RangeQueue::paused() const {
  MutexLock lock(mu_);
  return paused_;
}

bool RangeQueue::operator_paused() const {
  MutexLock lock(mu_);
  return operator_paused_;
}

bool RangeQueue::set_operator_paused(bool pause) {
  MutexLock lock(mu_);
  if (pause == operator_paused_) return false;
  operator_paused_ = pause;
  if (pause) hand_back_queued();
  claim_cv_.notify_all();
  return true;
}

void RangeQueue::mark_dropped() {
  if (dropped_.exchange(true)) return;
  spdlog::error(
      "group-dropped stream={} group={} id={}: the group was dropped (`sqlstreams group drop`); "
      "this host stops its pipeline and discards its unfinished work. It is not declared again "
      "until the host restarts or reloads (SIGHUP) with the group still in its config",
      options_.ref.stream, options_.ref.name, options_.ref.id);
  MutexLock lock(mu_);
  hand_back_queued();
  claim_cv_.notify_all();
}

bool group_gone(RangeQueue& queue, store::GroupStore& store) {
  if (queue.dropped()) return true;
  try {
    if (store.state().kind != store::GroupState::Kind::kGone) return false;
  } catch (const store::StoreError&) {
    return false;
  }
  queue.mark_dropped();
  return true;
}

void RangeQueue::stop_claiming() {
  {
    MutexLock lock(mu_);
    stop_claiming_ = true;
  }
  claim_cv_.notify_all();
}

void RangeQueue::stop_workers() {
  {
    // Unstarted work goes back: ranges commit their resolved prefix and hand back the rest;
    // retry rows return to `ready` without counting an attempt.
    MutexLock lock(mu_);
    hand_back_queued();
    stop_workers_ = true;
  }
  work_cv_.notify_all();
}

void RangeQueue::final_flush() {
  {
    MutexLock lock(mu_);
    final_flush_ = true;
  }
  commit_cv_.notify_all();
}

Task RangeQueue::take_front() {
  Task task = std::move(tasks_.front());
  tasks_.pop_front();
  return task;
}

void RangeQueue::take_batch(std::vector<Task>& batch, size_t limit) {
  constexpr size_t kMaxBatchBytes = 1 << 20;  // payload bytes per batch (at least one message)
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

void RangeQueue::requeue_front(std::vector<Task>::const_iterator first,
                               std::vector<Task>::const_iterator last) {
  for (auto it = last; it != first;) {
    --it;
    if (it->range) {
      it->range->slot(it->index).state.store(MessageState::kPending, std::memory_order_release);
    }
    tasks_.push_front(*it);
  }
  if (stop_workers_ || claiming_paused() || dropped_.load()) {
    hand_back_queued();
  } else {
    work_cv_.notify_all();
  }
}

bool RangeQueue::may_continue(const Task& task) const {
  const auto& g = options_.group;
  const int64_t left =
      (task.range ? task.range->deadline_ms.load() : task.retry->deadline_ms.load()) -
      steady_ms(options_.steady_clock->now());
  const bool lost =
      task.range ? task.range->lost.load() || task.range->revoked.load() : task.retry->lost.load();
  return !lost && left >= lease_timing(g.lease_ttl, g.handler_timeout).start_needed.count();
}

// Leaves a task for reclaim when its lease is lost or too short to cover a whole handler run;
// passes over schema versions the group does not declare.
bool RangeQueue::may_start(const Task& task) {
  const auto& g = options_.group;
  const int64_t now_ms = steady_ms(options_.steady_clock->now());
  const int64_t needed = lease_timing(g.lease_ttl, g.handler_timeout).start_needed.count();
  if (task.range) {
    auto& r = *task.range;
    if (r.lost.load() || r.revoked.load() || r.deadline_ms.load() - now_ms < needed) {
      if (!r.slot(task.index).taken.exchange(true))
        settle(task.range, task.index, MessageState::kSkipped);
      return false;
    }
    const auto& msg = r.range().messages[task.index];
    if (!accepted_versions_.count(msg.schema_version)) {
      if (!r.slot(task.index).taken.exchange(true)) {
        if (keep_unaccepted_) {
          // Kept: a parked row with its payload (an ordered group's key stays blocked behind it).
          MessageSlot& slot = r.slot(task.index);
          slot.decision = parked_row(msg.id, 0, 0, msg.schema_version, msg.payload,
                                     ordered_ ? msg.key : std::nullopt);
        } else {
          note_skipped_version(msg.schema_version, msg.id);
        }
        settle(task.range, task.index, MessageState::kDone);
      }
      return false;
    }
    r.slot(task.index).state.store(MessageState::kRunning, std::memory_order_release);
    return true;
  }
  auto& w = *task.retry;
  if (w.lost.load()) {
    w.taken.store(true);
    settle_retry_chain(w, false);
    active_retries_.erase(w.claim.token);
    commit_cv_.notify_one();
    return false;
  }
  if (w.deadline_ms.load() - now_ms < needed) {
    if (!w.taken.exchange(true)) {
      push_retry_result(store::RetryResult{w.claim.message_id, w.claim.token, {}, true, {}}, w,
                        false);
      commit_cv_.notify_one();
    }
    return false;
  }
  // Retries and quarantined rows of versions the group does not accept are kept (the row
  // becomes parked, keeping its attempts) or passed over (the row is deleted as an outcome),
  // like ranges. 0 is a dead letter kept before its version was recorded (V003): unknown, so it
  // runs.
  const int32_t version = w.claim.message->schema_version;
  if (version != 0 && !accepted_versions_.count(version)) {
    if (!w.taken.exchange(true)) {
      std::optional<store::FailedMessage> decision;  // nullopt: passed over, the row deleted
      if (keep_unaccepted_) {
        decision = parked_row(w.claim.message_id, w.claim.attempts, w.claim.delays, version,
                              w.claim.message->payload, w.claim.lane_key);
      } else {
        note_skipped_version(version, w.claim.message_id);
      }
      const bool passed_over = !decision;
      push_retry_result(
          store::RetryResult{w.claim.message_id, w.claim.token, std::move(decision), false, {}}, w,
          passed_over);
      commit_cv_.notify_one();
    }
    return false;
  }
  return true;
}

void RangeQueue::note_skipped_version(int32_t version, int64_t message_id) {
  if (metrics_.count_skipped_version(version)) {  // passed over, never silent
    spdlog::warn(
        "version-skipped stream={} group={} schema_version={} message_id={}: the group does "
        "not accept this version (schema_versions) and says unaccepted_versions = \"skip\": "
        "such messages are passed over for good and counted",
        options_.ref.stream, options_.ref.name, version, message_id);
  }
}

store::FailedMessage RangeQueue::parked_row(int64_t message_id, int32_t attempts, int32_t delays,
                                            int32_t version, const std::string& payload,
                                            const std::optional<std::string>& lane_key) {
  if (metrics_.count_kept_version(version)) {  // once per version; `status` counts the rows
    spdlog::warn(
        "version-kept stream={} group={} schema_version={} message_id={}: the group does not "
        "accept this version (schema_versions); such messages are kept with their payload and "
        "run once the group accepts the version (after a reload or an upgrade)",
        options_.ref.stream, options_.ref.name, version, message_id);
  }
  store::FailedMessage f;
  f.message_id = message_id;
  f.status = store::ExceptionStatus::kParked;
  f.attempts = attempts;
  f.delays = delays;
  f.error = "schema_version " + std::to_string(version) +
            " is not accepted by the group (schema_versions): kept until it is";
  f.payload = payload;
  f.lane_key = lane_key;
  return f;
}

void RangeQueue::hand_back(const Task& t) {
  if (t.range) {
    if (!t.range->slot(t.index).taken.exchange(true))
      settle(t.range, t.index, MessageState::kSkipped);
  } else if (!t.retry->taken.exchange(true)) {
    push_retry_result(
        store::RetryResult{t.retry->claim.message_id, t.retry->claim.token, {}, true, {}}, *t.retry,
        false);
  }
}

void RangeQueue::hand_back_queued() {
  while (!tasks_.empty()) {
    hand_back(tasks_.front());
    tasks_.pop_front();
  }
  hand_back_retry_chains();
  commit_cv_.notify_one();
}

void RangeQueue::set_hung_paused(bool pause) {
  paused_ = pause;
  if (pause) {
    hand_back_queued();
  } else {
    claim_cv_.notify_all();
  }
}

}  // namespace sqlstreams::consume
