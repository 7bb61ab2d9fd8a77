// GroupPipeline: the claim loop (reclaim first, then observe → prove → claim).
#include <spdlog/spdlog.h>

#include <algorithm>

#include "consume/group_pipeline.hpp"
#include "store/group_store.hpp"

namespace sqlstreams::consume {

namespace {
using SteadyClock = std::chrono::steady_clock;
constexpr std::chrono::milliseconds kReclaimCheckEvery{1000};
constexpr std::chrono::milliseconds kMaxErrorBackoff{5000};
}  // namespace

void GroupPipeline::sleep_idle(std::chrono::milliseconds d) {
  std::unique_lock lock(mu_);
  claim_cv_.wait_for(lock, d, [&] { return stop_claiming_; });
}

void GroupPipeline::claim_loop() {
  const auto& g = options_.group;
  store::Session session(options_.session);
  store::GroupStore store(session, options_.ref.stream_id, options_.ref.id, options_.holder);
  auto idle = g.poll_interval;
  // While a pending observation waits for its proof, only transactions already in flight hold
  // it back: re-observe soon (1 ms, doubling up to poll_interval), not after a full poll.
  auto proof_wait = std::chrono::milliseconds(1);
  auto error_backoff = g.poll_interval;
  bool outage = false;
  auto next_reclaim_check = SteadyClock::now();
  auto next_retry_check = SteadyClock::now();
  const size_t max_retries_in_flight = static_cast<size_t>(2 * g.concurrency);
  for (;;) {
    {
      std::unique_lock lock(mu_);
      // Backpressure: at most queue_ranges claimed ranges in flight.
      claim_cv_.wait(lock, [&] {
        return stop_claiming_ || active_.size() < static_cast<size_t>(g.queue_ranges);
      });
      if (stop_claiming_) break;
    }
    try {
      // Due exception rows share the worker pool with fresh ranges.
      if (SteadyClock::now() >= next_retry_check) {
        size_t room;
        {
          std::lock_guard lock(mu_);
          room = max_retries_in_flight - std::min(max_retries_in_flight, active_retries_.size());
        }
        size_t got = 0;
        if (room > 0) {
          auto due = store.claim_due_retries(options_.clock->now(), g.lease_ttl,
                                             static_cast<int32_t>(room));
          got = due.size();
          for (auto& c : due) {
            if (c.expired_inflight) {
              if (auto n = warn_limiter_.admit("retry-lease-expired")) {
                spdlog::warn("retry-lease-expired stream={} group={} message_id={} attempts={}: "
                             "the unfinished attempt counts as a failure{}",
                             options_.ref.stream, options_.ref.name, c.message_id, c.attempts,
                             ops::suppressed_suffix(*n));
              }
              if (c.attempts - c.delays > g.retry.max_retries) {
                // The budget is spent by the attempt its host never finished: dead, not rerun.
                store::FailedMessage dead{c.message_id, store::ExceptionStatus::kDead,
                                          c.attempts, c.delays, options_.clock->now(),
                                          c.last_error, c.message->payload};
                metrics_.dead++;
                std::lock_guard lock(mu_);
                retry_results_.push_back(store::RetryResult{
                    c.message_id, c.token, std::move(dead), false,
                    store::AuditEntry{c.message_id, c.attempts, "dead", c.last_error}});
                commit_cv_.notify_one();
                continue;
              }
            }
            enqueue_retry(std::move(c));
          }
        }
        next_retry_check = SteadyClock::now() + (got == room && got > 0 ? std::chrono::milliseconds(0)
                                                                        : g.poll_interval);
      }
      if (SteadyClock::now() >= next_reclaim_check) {
        auto r = store.reclaim_expired(options_.clock->now(), g.lease_ttl, g.max_range_reclaims);
        if (r.quarantined) {
          metrics_.ranges_quarantined++;
          spdlog::warn("range-quarantined stream={} group={} low={} high={} reclaims={}",
                       options_.ref.stream, options_.ref.name, r.quarantined->low,
                       r.quarantined->high, r.quarantined->reclaims);
        }
        if (r.range) {
          metrics_.ranges_reclaimed++;
          spdlog::info("lease-reclaimed stream={} group={} low={} high={} reclaims={}",
                       options_.ref.stream, options_.ref.name, r.range->low, r.range->high,
                       r.range->reclaims);
          enqueue(std::move(*r.range));
        }
        if (!r.found) next_reclaim_check = SteadyClock::now() + kReclaimCheckEvery;
        if (r.found) continue;  // reclaim before fresh claims, as long as any are expired
      }
      auto obs = store.observe();
      if (outage) {
        spdlog::info("database-reconnected stream={} group={}", options_.ref.stream,
                     options_.ref.name);
        outage = false;
      }
      error_backoff = g.poll_interval;
      if (!obs.worth_claiming() && obs.pending && !obs.pending_proven) {
        sleep_idle(proof_wait);  // read-only while the pending pair is unproven
        proof_wait = std::min(proof_wait * 2, std::chrono::milliseconds(g.poll_interval));
        continue;
      }
      if (!obs.worth_claiming()) {
        // Caught up: no xid, no write. Back off the polling.
        if (options_.notify) {
          store.wait_for_notify(std::min(idle, std::chrono::milliseconds(250)));
        } else {
          sleep_idle(idle);
        }
        idle = std::min(idle * 2, g.max_poll_interval);
        continue;
      }
      auto res = store.claim(obs, g.batch_size, options_.clock->now(), g.lease_ttl);
      if (res.range) {
        idle = g.poll_interval;
        proof_wait = std::chrono::milliseconds(1);
        enqueue(std::move(*res.range));
        continue;  // more may be claimable right away
      }
      sleep_idle(proof_wait);  // an unproven observation waits for older producers
      proof_wait = std::min(proof_wait * 2, std::chrono::milliseconds(g.poll_interval));
    } catch (const store::StoreError& e) {
      metrics_.store_errors++;
      if (!outage) {
        spdlog::error("database-unavailable stream={} group={} kind={}: {}", options_.ref.stream,
                      options_.ref.name, store::kind_name(e.kind()), e.what());
        outage = true;
      }
      sleep_idle(error_backoff);
      error_backoff = std::min(error_backoff * 2, kMaxErrorBackoff);
    }
  }
}

}  // namespace sqlstreams::consume
