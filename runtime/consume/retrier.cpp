// Retrier: the retry loop — claims due exception rows
// (docs/design.md#retries-exception-rows-and-dead-letters) on its own cadence, in batches sized to
// the free retry capacity, and feeds them to the shared worker pool. While a backlog is due it
// claims again as soon as half the capacity is free. Otherwise it asks the database when the next
// row becomes claimable and sleeps until then (at most max_poll_interval); the committer pokes it
// whenever it writes a `ready` row, so a due time is honoured within poll_interval without an idle
// host polling ten times a second per group. Rows whose host died while running them run alone, one
// by one (see Retrier::run).
#include "consume/retrier.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "common/duration.hpp"
#include "common/outage_backoff.hpp"
#include "common/thread.hpp"
#include "store/group/group_store.hpp"

namespace sqlstreams::consume {

namespace {
constexpr size_t kMaxRetryCapacity = 1000;
// How often parked rows (messages of versions the group did not accept when they came) are
// looked at again: at start (a reload or an upgrade that accepts a version starts the group's
// pipeline), then this often, for rows another host of an older config parked meanwhile.
constexpr std::chrono::seconds kReleaseParkedEvery{30};
}  // namespace

Retrier::Retrier(const PipelineOptions& options, RangeQueue& queue, GroupMetrics& metrics,
                 bool asynchronous)
    : options_(options), queue_(queue), metrics_(metrics), async_(asynchronous) {}

void Retrier::start() {
  thread_ = start_thread("ss-retry", [this] { run(); });
}

void Retrier::join() {
  if (thread_.joinable()) thread_.join();
}

size_t Retrier::capacity() const {
  const auto& g = options_.group;
  // An async handler holds up to max_in_flight messages, not `concurrency`.
  const size_t runners = static_cast<size_t>(async_ ? g.max_in_flight : g.concurrency);
  return std::max<size_t>(2 * runners,
                          std::min<size_t>(static_cast<size_t>(g.batch_size), kMaxRetryCapacity));
}

void Retrier::run() {
  const auto& g = options_.group;
  const SteadyClock& clock = *options_.steady_clock;  // every poll and suspect check
  store::Session session(options_.session);
  store::GroupStore store(session, options_.ref.stream_id, options_.ref.id, options_.holder);
  store.set_ordering(ordering_mode(g));
  const size_t capacity = this->capacity();
  auto next_poll = clock.now();
  bool backlog = false;  // the last claim was full: more rows are probably due
  OutageBackoff outage(g.poll_interval, OutageBackoff::kMaxDelay);
  // Suspects (rows whose host stopped while running them: maybe killed by that very message)
  // are claimed one at a time, only while no other retry of the group runs here, and each
  // result is committed before the next claim: a message that crashes hosts takes no innocent
  // row down with it twice. Looked for at start, then every lease_ttl (a suspect appears at
  // most a lease_ttl after its host died), and again right after each suspect.
  auto next_suspect_check = clock.now();
  bool isolating = false;
  auto next_release = clock.now();
  // Parked rows this group may run: its versions, or every one when it skips the others (they
  // are then passed over as retries).
  std::optional<std::vector<int32_t>> releasable;
  if (g.unaccepted_versions == config::UnacceptedVersions::kKeep) releasable = g.schema_versions;
  for (;;) {
    // Until next_poll or a poke, then until there is room (in a backlog: half the capacity).
    auto turn =
        queue_.await_retry_room(next_poll, isolating, next_suspect_check, backlog, capacity);
    if (!turn) break;  // stopping, or the group was dropped
    const size_t room = turn->room;
    const bool suspects = turn->suspects;
    try {
      if (clock.now() >= next_release) {
        next_release = clock.now() + kReleaseParkedEvery;
        if (const int64_t n = store.release_parked(releasable); n > 0) {
          spdlog::info(
              "version-released stream={} group={} rows={}: kept messages of versions "
              "the group accepts now are due",
              options_.ref.stream, options_.ref.name, n);
        }
      }
      using Pick = store::GroupStore::RetryPick;
      // Ordered groups: each key's head brings its retry chain (up to the whole room).
      const auto claim_started = clock.now();
      auto due = store.claim_due_retries(g.lease_ttl, static_cast<int32_t>(room),
                                         suspects ? Pick::kSuspects : Pick::kReady,
                                         g.retry.max_retries, static_cast<int32_t>(room));
      warn_if_slow(clock.now() - claim_started, due.size());
      next_poll = clock.now();
      if (suspects) {
        isolating = !due.empty();
        if (!isolating) next_suspect_check = clock.now() + g.lease_ttl;
      } else {
        // An ordered group's key walk that stopped part of the way goes on at once when it
        // took rows, else at the next poll (a walk that finds nothing claimable in a group of
        // many blocked keys must not spin).
        const bool walk_left_keys = store.retry_claim_left_keys();
        backlog = due.size() == room || (walk_left_keys && !due.empty());
        if (!backlog) {
          auto wait = g.max_poll_interval;
          if (walk_left_keys) {
            wait = g.poll_interval;
          } else if (auto next = store.next_retry_due()) {
            // <= 0: claimable but not ours (locked by another host now): look again soon.
            wait = next->count() <= 0 ? g.poll_interval
                                      : std::clamp(*next, std::chrono::milliseconds(1), wait);
            // Claimable, yet no ready row came: maybe an expired inflight row (a suspect).
            if (next->count() <= 0 && due.empty()) next_suspect_check = clock.now();
          }
          next_poll += wait;
        }
      }
      (void)outage.on_success();  // each failure is logged (debug) as it happens
      std::vector<store::RetryClaim> runnable;
      for (auto& c : due) {
        if (c.expired_inflight) {
          if (auto n = warn_limiter_.admit("retry-lease-expired")) {
            spdlog::warn(
                "retry-lease-expired stream={} group={} message_id={} attempts={}: "
                "the unfinished attempt counts as a failure{}",
                options_.ref.stream, options_.ref.name, c.message_id, c.attempts,
                ops::suppressed_suffix(*n));
          }
          if (c.attempts - c.delays > g.retry.max_retries) {
            // The budget is spent by the attempt its host never finished: dead, not rerun.
            store::FailedMessage dead{c.message_id,      store::ExceptionStatus::kDead,
                                      c.attempts,        c.delays,
                                      Millis(0),         c.last_error,
                                      c.message->payload};
            metrics_.add(GroupCounter::kDead);
            queue_.add_retry_result(
                store::RetryResult{c.message_id, c.token, std::move(dead), false,
                                   store::AuditEntry{c.message_id, c.attempts, "dead", c.last_error,
                                                     options_.clock->now()}});
            continue;
          }
        }
        runnable.push_back(std::move(c));
      }
      queue_.enqueue_retries(std::move(runnable));
    } catch (const store::StoreError& e) {
      metrics_.add(GroupCounter::kStoreErrors);
      spdlog::debug("retry-claim-failed stream={} group={}: {}", options_.ref.stream,
                    options_.ref.name, e.what());
      backlog = false;
      next_poll = clock.now() + outage.on_failure().delay;
    }
  }
}

void Retrier::warn_if_slow(std::chrono::nanoseconds took, size_t rows) {
  // A row starts only with most of its lease left (lease_timing.hpp): a claim that takes a
  // large part of lease_ttl hands what it claimed straight back, and one that always does so
  // stalls the group's retries without an error (a 30-minute chaos run's ordered claims did).
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(took);
  if (rows == 0 || ms * 4 < options_.group.lease_ttl) return;
  if (auto n = warn_limiter_.admit("retry-claim-slow")) {
    spdlog::warn(
        "retry-claim-slow stream={} group={} took_ms={} rows={} lease_ttl={}: the retry claim "
        "took over a quarter of the lease; rows whose lease is too short to start are handed "
        "back unrun (a larger lease_ttl, or fewer open exception rows){}",
        options_.ref.stream, options_.ref.name, ms.count(), rows,
        format_duration(options_.group.lease_ttl), ops::suppressed_suffix(*n));
  }
}

}  // namespace sqlstreams::consume
