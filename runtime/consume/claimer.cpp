// Claimer: the claim loop (reclaim first, then observe → prove → claim). Due exception rows
// are claimed by the Retrier.
#include "consume/claimer.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <optional>

#include "common/duration.hpp"
#include "common/outage_backoff.hpp"
#include "common/thread.hpp"
#include "ops/logging.hpp"
#include "store/group/group_store.hpp"
#include "store/reporting/group_lifecycle.hpp"

namespace sqlstreams::consume {

namespace {
constexpr std::chrono::milliseconds kReclaimCheckEvery{1000};
constexpr size_t kFenceHoldersNamed = 3;

// "backend pid 12 (...); backend pid 14 (...) and 2 more", or why none is named.
std::string name_fence_holders(store::GroupStore& store) {
  try {
    auto holders = store.fence_holders();
    if (holders.empty()) return "no holder is visible any more (it has just ended)";
    std::string out;
    for (size_t i = 0; i < holders.size() && i < kFenceHoldersNamed; ++i) {
      out += (i ? "; " : "") + store::describe(holders[i]);
    }
    if (holders.size() > kFenceHoldersNamed) {
      out += fmt::format(" and {} more", holders.size() - kFenceHoldersNamed);
    }
    return out;
  } catch (const store::StoreError& e) {
    return std::string("the holders could not be read: ") + e.what();
  }
}

Millis whole_millis(SteadyTime::duration d) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(d);
}
}  // namespace

Claimer::Claimer(const PipelineOptions& options, RangeQueue& queue, GroupMetrics& metrics,
                 bool asynchronous)
    : options_(options),
      queue_(queue),
      metrics_(metrics),
      range_limit_(range_limit(options.group, asynchronous)) {}

int64_t Claimer::held_bytes_allowing(int64_t next_bytes, const config::GroupConfig& g) {
  // A claim's budget is min(batch_bytes, queue_bytes - held); a message larger than either
  // fits only as the first of an empty queue (ClaimBudget::first_always).
  if (next_bytes > g.batch_bytes || next_bytes > g.queue_bytes) return 0;
  return g.queue_bytes - next_bytes;
}

size_t Claimer::range_limit(const config::GroupConfig& g, bool asynchronous) {
  const auto queue = static_cast<size_t>(g.queue_ranges);
  if (!asynchronous) return queue;
  // Enough claimed messages to keep max_in_flight busy while the next ranges are claimed.
  const auto batch = static_cast<size_t>(std::max(g.batch_size, 1));
  return std::max(queue, (2 * static_cast<size_t>(g.max_in_flight) + batch - 1) / batch);
}

void Claimer::start() {
  thread_ = start_thread("ss-claim", [this] { run(); });
}

void Claimer::join() {
  if (thread_.joinable()) thread_.join();
}

// Ordered groups: the gate for a range just claimed or reclaimed — this host's lanes first (the
// snapshot), then the database's verdict in one statement (store/group/README.md "Per-key
// ordering"). A failed statement defers every keyed message of the range (always safe).
RangeQueue::OrderedGate Claimer::gate_for(store::GroupStore& store,
                                          const store::ClaimedRange& range) {
  RangeQueue::OrderedGate gate;
  const auto snapshot = queue_.gate_snapshot();
  gate.epoch = snapshot.epoch;
  try {  // (a range without keys sends no statement: GroupStore::gate_range)
    auto verdict = store.gate_range(range, snapshot.own_tokens);
    gate.keys = std::move(verdict.keys);
    if (verdict.lease_gone) {
      // A rewind or a reclaim took the range before its keys were gated: their earlier messages
      // may be under no lease and in no row. None of its keyed messages runs here (deferred,
      // and the commit finds no token).
      spdlog::info(
          "ordering-gate-lease-gone stream={} group={} low={} high={}: the range's lease is "
          "gone (rewound or reclaimed); its keyed messages do not run here",
          options_.ref.stream, options_.ref.name, range.low, range.high);
      gate.failed = true;
    }
  } catch (const store::StoreError& e) {
    metrics_.add(GroupCounter::kStoreErrors);
    spdlog::warn(
        "ordering-gate-failed stream={} group={} low={} high={}: {} (the range's keyed messages "
        "are deferred to the retry path, which runs them in key order)",
        options_.ref.stream, options_.ref.name, range.low, range.high, e.what());
    gate.failed = true;
  }
  return gate;
}

void Claimer::enqueue(store::GroupStore& store, store::ClaimedRange range) {
  if (!queue_.ordered()) {
    queue_.enqueue(std::move(range));
    return;
  }
  const auto gate = gate_for(store, range);
  queue_.enqueue(std::move(range), &gate);
}

void Claimer::run() {
  const auto& g = options_.group;
  // Every wait and cadence (state checks, reclaim checks, proof waits, idle backoff, the fence's
  // warning) on the injected clock.
  const SteadyClock& clock = *options_.steady_clock;
  store::Session session(options_.session);
  store::GroupStore store(session, options_.ref.stream_id, options_.ref.id, options_.holder);
  store.set_ordering(ordering_mode(g));
  // The stream's fan-out read cache on this host (docs/design.md#sharing-a-range-read), when there
  // is one.
  auto cache = options_.read_cache ? options_.read_cache->join() : nullptr;
  auto idle = g.poll_interval;
  // While a pending observation waits for its proof, only transactions already in flight hold
  // it back: re-observe soon (1 ms, doubling up to poll_interval), not after a full poll.
  auto proof_wait = std::chrono::milliseconds(1);
  OutageBackoff outage(g.poll_interval, OutageBackoff::kMaxDelay);
  auto next_reclaim_check = clock.now();
  auto next_state_check = clock.now();
  // The fence's wait (runtime/store/group/README.md#the-fence): since when claims have been
  // held back by an open producer, and whether fence-held was logged for this wait.
  std::optional<SteadyTime> fence_wait_began;
  bool fence_held_logged = false;
  auto fence_waiting = [&] {
    const auto now = clock.now();
    if (!fence_wait_began) {
      fence_wait_began = now;
      // The gauge is read on the real steady clock (GroupMetrics::fence_wait_for).
      const auto real_now = std::chrono::steady_clock::now().time_since_epoch();
      metrics_.fence_waiting_since_ns.store(std::max<int64_t>(
          1, std::chrono::duration_cast<std::chrono::nanoseconds>(real_now).count()));
    }
    if (!fence_held_logged && now - *fence_wait_began >= g.fence_warn_after) {
      fence_held_logged = true;
      spdlog::warn(
          "fence-held stream={} group={} waited={}: claims wait for {}, a transaction that "
          "drew an id of this stream and has not ended; every later message of the stream "
          "waits with it. End it, or bound such sessions with "
          "idle_in_transaction_session_timeout (README: Operating)",
          options_.ref.stream, options_.ref.name,
          format_duration(whole_millis(now - *fence_wait_began)), name_fence_holders(store));
    }
  };
  auto fence_clear = [&] {
    if (!fence_wait_began) return;
    if (fence_held_logged) {
      spdlog::info("fence-released stream={} group={} waited={}", options_.ref.stream,
                   options_.ref.name,
                   format_duration(whole_millis(clock.now() - *fence_wait_began)));
    }
    fence_wait_began.reset();
    fence_held_logged = false;
    metrics_.fence_waiting_since_ns.store(0);
  };
  // Ids per claim: batch_size, halved toward what the byte budget let in after a cut range, so
  // that the read statement does not convert many payloads past the cut; doubled back after a
  // range the budget did not cut (small messages never leave batch_size).
  int32_t batch = g.batch_size;
  // After a claim the byte budget cut: the text bytes of the message the next claim starts
  // with (the first past next_bytes_at). The claim waits for room for it
  // (held_bytes_allowing): a freed byte that cannot let it in wakes no claim, whose read
  // would convert the range's payloads and take nothing (a claim per poll_interval read the
  // same payloads ~4 times per message). Forgotten once the group's cursor moved elsewhere
  // (another host claimed that message).
  int64_t next_bytes = 0;
  int64_t next_bytes_at = 0;
  ClaimTiming timing;  // this cycle's, for options_.on_claim
  timing.cycle_began = clock.now();
  // A failed statement: true when the group was dropped (its cursor row is gone: no outage);
  // otherwise the outage is logged once and the loop backs off.
  auto failed = [&](const store::StoreError& e) {
    if (e.kind() != store::StoreError::Kind::kConnection && group_gone(queue_, store)) return true;
    metrics_.add(GroupCounter::kStoreErrors);
    const auto step = outage.on_failure();
    if (step.log_now) {
      spdlog::error("database-unavailable stream={} group={} kind={}: {}", options_.ref.stream,
                    options_.ref.name, store::kind_name(e.kind()), e.what());
    }
    queue_.sleep_idle(step.delay);
    return false;
  };
  for (;;) {
    {
      const auto waited_from = clock.now();
      // Backpressure: at most range_limit_ claimed ranges in flight. Wakes for the operator's
      // pause/drop check at least every poll_interval.
      if (!queue_.await_claim_room(next_state_check, range_limit_, g.queue_bytes)) break;
      timing.backpressure += clock.now() - waited_from;
    }
    if (clock.now() >= next_state_check) {
      next_state_check = clock.now() + g.poll_interval;
      try {
        if (!follow_group_state(store.state())) break;  // dropped
      } catch (const store::StoreError& e) {
        if (failed(e)) break;
      }
      continue;
    }
    try {
      if (clock.now() >= next_reclaim_check) {
        auto r = store.reclaim_expired(g.lease_ttl, g.max_range_reclaims, cache.get());
        if (r.quarantined) {
          metrics_.add(GroupCounter::kRangesQuarantined);
          spdlog::warn("range-quarantined stream={} group={} low={} high={} reclaims={}",
                       options_.ref.stream, options_.ref.name, r.quarantined->low,
                       r.quarantined->high, r.quarantined->reclaims);
        }
        if (r.range) {
          metrics_.add(GroupCounter::kRangesReclaimed);
          spdlog::info("lease-reclaimed stream={} group={} low={} high={} reclaims={}",
                       options_.ref.stream, options_.ref.name, r.range->low, r.range->high,
                       r.range->reclaims);
          enqueue(store, std::move(*r.range));
        }
        if (!r.found) next_reclaim_check = clock.now() + kReclaimCheckEvery;
        if (r.found) continue;  // reclaim before fresh claims, as long as any are expired
      }
      auto obs = store.observe();
      if (outage.on_success()) {
        spdlog::info("database-reconnected stream={} group={}", options_.ref.stream,
                     options_.ref.name);
      }
      if (!obs.worth_claiming() && obs.pending && !obs.pending_proven) {
        fence_waiting();
        const auto slept_from = clock.now();
        queue_.sleep_idle(proof_wait);  // read-only while the pending pair is unproven
        timing.proof_sleep += clock.now() - slept_from;
        ++timing.unproven;
        proof_wait = std::min(proof_wait * 2, std::chrono::milliseconds(g.poll_interval));
        continue;
      }
      if (!obs.worth_claiming()) {
        fence_clear();
        // Caught up: no xid, no write. Back off the polling.
        const auto idle_from = clock.now();
        if (options_.notify) {
          store.wait_for_notify(std::min(idle, std::chrono::milliseconds(250)));
        } else {
          queue_.sleep_idle(idle);
        }
        idle = std::min(idle * 2, g.max_poll_interval);
        timing = ClaimTiming{};
        timing.cycle_began = clock.now();
        timing.idle_began = idle_from;
        continue;
      }
      // The byte budgets (batch_bytes, queue_bytes): only this thread adds held bytes, so the
      // claimed range keeps the group within queue_bytes; a first message always fits.
      const int64_t held = queue_.held_bytes();
      if (next_bytes > 0 && obs.claimed != next_bytes_at) next_bytes = 0;
      if (const int64_t allowed = held_bytes_allowing(next_bytes, g);
          next_bytes > 0 && held > allowed) {
        // The next message does not fit yet: wait for room for it (or the next state check).
        if (!queue_.await_bytes_below(allowed + 1, next_state_check)) break;
        continue;
      }
      timing.claim_began = clock.now();
      store::ClaimBudget budget;
      budget.bytes = std::min(g.batch_bytes, g.queue_bytes - held);
      budget.first_always = held == 0;
      auto res = store.claim(obs, batch, g.lease_ttl, cache.get(), budget);
      // The next message does not fit beside what is held: wait for room for it (before the
      // next claim when its size came back, else until any held bytes are freed).
      next_bytes = res.budget_cut || res.budget_full ? res.next_bytes : 0;
      next_bytes_at = res.range ? res.range->high : obs.claimed;
      if (res.budget_full) {
        metrics_.add(GroupCounter::kClaimsBudgetFull);
        fence_clear();
        timing = ClaimTiming{};
        timing.cycle_began = clock.now();
        if (next_bytes == 0 && !queue_.await_bytes_below(held, next_state_check)) break;
        continue;
      }
      if (res.range) {
        const int64_t span = res.range->high - res.range->low;
        batch = res.budget_cut
                    ? static_cast<int32_t>(std::clamp<int64_t>(2 * span, 1, g.batch_size))
                    : static_cast<int32_t>(std::min<int64_t>(int64_t{2} * batch, g.batch_size));
        fence_clear();
        idle = g.poll_interval;
        proof_wait = std::chrono::milliseconds(1);
        if (options_.on_claim) {
          timing.claim_ended = clock.now();
          timing.low = res.range->low;
          timing.high = res.range->high;
          timing.from_cache = res.range->from_cache;
          options_.on_claim(timing);
        }
        enqueue(store, std::move(*res.range));
        timing = ClaimTiming{};
        timing.cycle_began = clock.now();
        continue;  // more may be claimable right away
      }
      if (res.proven <= obs.claimed) fence_waiting();  // nothing proven past the claimed ids
      const auto slept_from = clock.now();
      ++timing.unproven;
      queue_.sleep_idle(proof_wait);  // an unproven observation waits for older producers
      timing.proof_sleep += clock.now() - slept_from;
      proof_wait = std::min(proof_wait * 2, std::chrono::milliseconds(g.poll_interval));
    } catch (const store::StoreError& e) {
      if (failed(e)) break;
    }
  }
}

bool Claimer::follow_group_state(const store::GroupState& st) {
  if (st.kind == store::GroupState::Kind::kGone) {
    queue_.mark_dropped();
    return false;
  }
  const bool pause = st.kind == store::GroupState::Kind::kPaused;
  if (!queue_.set_operator_paused(pause)) return true;
  if (pause) {
    spdlog::warn(
        "group-paused-by-operator stream={} group={} paused_by={}: claiming nothing; "
        "in-flight work finishes and commits, queued work was handed back (`sqlstreams group "
        "resume` restarts it)",
        options_.ref.stream, options_.ref.name, ops::log_quoted(st.paused_by));
  } else {
    spdlog::info("group-resumed-by-operator stream={} group={}", options_.ref.stream,
                 options_.ref.name);
  }
  return true;
}

}  // namespace sqlstreams::consume
