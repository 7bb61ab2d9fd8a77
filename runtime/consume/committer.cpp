// GroupPipeline: the commit loop (batched token-guarded range commits, lease renewal, the
// cursor advancer) and stop().
#include <spdlog/spdlog.h>

#include <algorithm>

#include "consume/group_pipeline.hpp"
#include "store/group_store.hpp"

namespace sqlstreams::consume {

namespace {
using SteadyClock = std::chrono::steady_clock;
constexpr std::chrono::milliseconds kAdvanceEvery{1000};
constexpr std::chrono::milliseconds kMaxErrorBackoff{5000};

// Logs every dead letter of a committed range (DESIGN §7: a structured `dead-lettered` line).
void log_dead(const GroupPipeline& p, const store::RangeCommit& c) {
  for (const auto& f : c.failures) {
    if (f.status != store::ExceptionStatus::kDead) continue;
    spdlog::warn("dead-lettered stream={} group={} message_id={} attempts={} error=\"{}\"",
                 p.options().ref.stream, p.options().ref.name, f.message_id, f.attempts, f.error);
  }
}
}  // namespace

void GroupPipeline::commit_loop() {
  const auto& g = options_.group;
  store::Session session(options_.session);
  store::GroupStore store(session, options_.ref.stream_id, options_.ref.id, options_.holder);
  const auto renew_every = std::max(std::chrono::milliseconds(50), g.lease_ttl / 3);
  auto next_renew = SteadyClock::now() + renew_every;
  auto next_advance = SteadyClock::now() + kAdvanceEvery;
  auto error_backoff = std::chrono::milliseconds(100);
  std::vector<std::shared_ptr<RangeWork>> batch;
  bool final_flush = false;
  for (;;) {
    {
      std::unique_lock lock(mu_);
      auto wake = std::min(next_renew, next_advance);
      commit_cv_.wait_until(lock, wake, [&] { return !finished_.empty() || final_flush_; });
      final_flush = final_flush_;
      if (final_flush) {
        // Everything still active: finished ranges commit fully, the rest commit their
        // resolved prefix and hand back the remainder.
        batch.clear();
        for (auto& [token, r] : active_) batch.push_back(r);
        finished_.clear();
      } else {
        batch.swap(finished_);
      }
    }
    if (!batch.empty()) {
      // Keep retrying a failed commit; at shutdown only while the leases could still be ours.
      auto give_up = final_flush ? SteadyClock::now() + g.lease_ttl
                                 : SteadyClock::time_point::max() - std::chrono::hours(1);
      commit_batch(store, batch, give_up);
      batch.clear();
    }
    auto now = SteadyClock::now();
    try {
      if (now >= next_renew && !final_flush) {
        renew_leases(store);
        next_renew = now + renew_every;
      }
      if (options_.run_advancer && (now >= next_advance || final_flush)) {
        store.advance_cursor();
        next_advance = now + kAdvanceEvery;
      }
      error_backoff = std::chrono::milliseconds(100);
    } catch (const store::StoreError& e) {
      metrics_.store_errors++;
      spdlog::debug("committer store error stream={} group={}: {}", options_.ref.stream,
                    options_.ref.name, e.what());
      next_renew = now + error_backoff;
      next_advance = now + error_backoff;
      error_backoff = std::min(error_backoff * 2, kMaxErrorBackoff);
    }
    if (final_flush) break;
  }
}

void GroupPipeline::commit_batch(store::GroupStore& store,
                                 const std::vector<std::shared_ptr<RangeWork>>& ranges,
                                 SteadyClock::time_point give_up) {
  const auto& g = options_.group;
  std::vector<std::shared_ptr<RangeWork>> to_commit;
  std::vector<store::RangeCommit> commits;
  for (const auto& r : ranges) {
    if (r->lost.load()) {
      metrics_.lease_lost++;
      spdlog::warn("lease-lost stream={} group={} low={} high={}: outcomes discarded",
                   options_.ref.stream, options_.ref.name, r->range().low, r->range().high);
      continue;
    }
    to_commit.push_back(r);
    commits.push_back(r->to_commit(g.audit));
  }
  auto backoff = std::chrono::milliseconds(100);
  bool outage = false;
  while (!commits.empty()) {
    try {
      auto ok = store.commit_ranges(commits);
      for (size_t i = 0; i < ok.size(); ++i) {
        if (!ok[i]) {
          metrics_.lease_lost++;
          spdlog::warn("lease-lost stream={} group={} low={} high={}: outcomes discarded",
                       options_.ref.stream, options_.ref.name, to_commit[i]->range().low,
                       to_commit[i]->range().high);
        } else if (commits[i].complete) {
          metrics_.ranges_committed++;
          log_dead(*this, commits[i]);
        } else {
          metrics_.ranges_handed_back++;
          log_dead(*this, commits[i]);
        }
      }
      if (outage) spdlog::info("commit-recovered stream={} group={}", options_.ref.stream, options_.ref.name);
      break;
    } catch (const store::StoreError& e) {
      metrics_.store_errors++;
      if (!outage) {
        spdlog::error("commit-failed stream={} group={} kind={}: {} (retrying; tokens make a "
                      "repeated commit safe)",
                      options_.ref.stream, options_.ref.name, store::kind_name(e.kind()), e.what());
        outage = true;
      }
      if (SteadyClock::now() + backoff > give_up) {
        spdlog::error("commit-abandoned stream={} group={}: leases will expire and the ranges "
                      "will be reclaimed",
                      options_.ref.stream, options_.ref.name);
        break;
      }
      std::this_thread::sleep_for(backoff);
      backoff = std::min(backoff * 2, kMaxErrorBackoff);
    }
  }
  std::lock_guard lock(mu_);
  for (const auto& r : ranges) active_.erase(r->range().token);
  claim_cv_.notify_all();
}

void GroupPipeline::renew_leases(store::GroupStore& store) {
  std::vector<std::string> tokens;
  {
    std::lock_guard lock(mu_);
    for (const auto& [token, r] : active_) tokens.push_back(token);
  }
  if (tokens.empty()) return;
  SysTime now = options_.clock->now();
  auto lost = store.renew_leases(tokens, now, options_.group.lease_ttl);
  std::lock_guard lock(mu_);
  const int64_t expires = (now + options_.group.lease_ttl).time_since_epoch().count();
  for (const auto& [token, r] : active_) r->expires_at_ms.store(expires);
  for (const auto& token : lost) {
    auto it = active_.find(token);
    if (it != active_.end()) it->second->lost.store(true, std::memory_order_release);
  }
}

bool GroupPipeline::stop(SteadyClock::time_point deadline) {
  {
    std::lock_guard lock(mu_);
    stop_claiming_ = true;
  }
  claim_cv_.notify_all();
  if (claimer_.joinable()) claimer_.join();
  {
    // Unstarted messages go back: their ranges commit the resolved prefix and hand back the rest.
    std::lock_guard lock(mu_);
    while (!tasks_.empty()) {
      Task t = std::move(tasks_.front());
      tasks_.pop_front();
      if (t.range->resolve(t.index, SlotState::kSkipped)) finished_.push_back(t.range);
    }
    stop_workers_ = true;
  }
  work_cv_.notify_all();
  bool drained;
  {
    std::unique_lock lock(mu_);
    drained = claim_cv_.wait_until(lock, deadline, [&] { return running_workers_ == 0; });
  }
  if (drained) {
    for (auto& w : workers_) w.join();
  } else {
    spdlog::warn("drain-timeout stream={} group={}: {} handler(s) still running; their ranges "
                 "are handed back",
                 options_.ref.stream, options_.ref.name, busy_workers_);
    for (auto& w : workers_) w.detach();
  }
  workers_.clear();
  {
    std::lock_guard lock(mu_);
    final_flush_ = true;
  }
  commit_cv_.notify_all();
  if (committer_.joinable()) committer_.join();
  return drained;
}

}  // namespace sqlstreams::consume
