// consume/pipeline_options — what a group's pipeline is given: its config, session, group,
// holder, clocks, jitter source and read cache, and the claim-timing diagnostics hook.
// Threading: read-only once the pipeline is constructed.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "common/clock.hpp"
#include "config/config.hpp"
#include "consume/read_cache.hpp"
#include "store/connection/session.hpp"
#include "store/group/group_store.hpp"

namespace sqlstreams::consume {

// Where one claim cycle's time went (diagnostics: the bench's pickup breakdown). A cycle starts
// when the claimer wakes from an idle wait or has just taken the previous range, and ends with
// the claim that took the range (low, high]; times on PipelineOptions::steady_clock.
struct ClaimTiming {
  int64_t low = 0;
  int64_t high = 0;
  std::chrono::steady_clock::time_point cycle_began;
  // When the wait for work (NOTIFY or poll) that began the cycle began; unset when the cycle
  // began right after the previous claim.
  std::optional<std::chrono::steady_clock::time_point> idle_began;
  std::chrono::steady_clock::time_point claim_began;   // the claim call (its await_read included)
  std::chrono::steady_clock::time_point claim_ended;   // committed, before the hand-off to workers
  std::chrono::steady_clock::duration backpressure{};  // waiting for room (queue_ranges, _bytes)
  std::chrono::steady_clock::duration proof_sleep{};   // sleeping for an unproven observation
  int unproven = 0;                                    // unproven observations and empty claims
  bool from_cache = false;
};

struct PipelineOptions {
  config::GroupConfig group;
  store::SessionOptions session;
  store::GroupRef ref;
  bool notify = false;  // LISTEN for the stream's wake-up hint
  std::string holder;   // "<host name>:<pid>", written into leases and audit rows
  const Clock* clock = &SystemClock::instance();  // dates audit records only (expiries: the DB)
  // This host's deadlines and every wait of the claimer and the retrier: handler_timeout (the
  // watchdog, sync and async), the lease time a message needs left to start, lease renewal,
  // the claimer's state and reclaim checks, proof waits, idle backoff, outage backoff and the
  // fence's warning, the retrier's polls and suspect checks, and ClaimTiming's times. Tests
  // pass a ManualSteadyClock and advance it. (The LISTEN wait, the advancer, stop()'s deadline
  // and commit retries run on real time.)
  const SteadyClock* steady_clock = &RealSteadyClock::instance();
  std::function<double()> random01;  // injected jitter source; default: seeded splitmix64
  bool run_advancer = true;
  // Shared by the groups of one stream on this host (ReadCaches::for_stream); null = every claim
  // reads its range itself.
  std::shared_ptr<ReadCache> read_cache;
  // The streams the group emits to (config `emits`, looked up in the database): with any, each
  // handler call may emit under EmitPolicy (docs/operating/emits.md).
  std::vector<store::StreamRef> emit_targets;
  // Diagnostics: called on the claim thread after each claim that took a fresh range (not a
  // reclaim). Null (the host): nothing is measured.
  std::function<void(const ClaimTiming&)> on_claim;
  // Tests: called on the claim thread as it begins an idle, proof or outage sleep, with the time
  // on steady_clock it sleeps until. A test that advances a ManualSteadyClock waits for it first:
  // a sleep that began after the advance would end a whole sleep later. Null: nothing is called.
  std::function<void(SteadyTime until)> on_claimer_sleep;
};

// The store's ordering mode for a group's config (`ordering`, `ordering_dead`).
inline store::OrderingMode ordering_mode(const config::GroupConfig& g) {
  if (g.ordering != config::Ordering::kKey) return store::OrderingMode::kNone;
  return g.ordering_dead == config::OrderingDead::kHold ? store::OrderingMode::kKeyHold
                                                        : store::OrderingMode::kKeyRelease;
}

}  // namespace sqlstreams::consume
