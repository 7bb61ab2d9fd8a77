// Committer: the commit loop (batched token-guarded range and retry commits, lease renewal, the
// cursor advancer; it also runs the worker pool's watchdog).
#include "consume/committer.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <functional>
#include <optional>
#include <string>

#include "common/chaos_plant.hpp"
#include "common/duration.hpp"
#include "common/outage_backoff.hpp"
#include "common/thread.hpp"
#include "consume/lease_timing.hpp"
#include "ops/logging.hpp"
#include "store/group/group_store.hpp"

namespace sqlstreams::consume {

namespace {
using Steady = std::chrono::steady_clock;
constexpr std::chrono::milliseconds kAdvanceEvery{1000};
// After a commit batch the cursor advances at most this long after the previous advance, so
// `committed` follows handling within a commit cycle plus this, at most ~50 extra advances a
// second per group (two cheap statements each;
// docs/design.md#the-committed-cursor-and-the-advancer).
constexpr std::chrono::milliseconds kAdvanceAfterCommitGap{20};
constexpr std::chrono::milliseconds kFirstErrorBackoff{100};

void log_dead(const PipelineOptions& o, const store::FailedMessage& f) {
  if (f.status != store::ExceptionStatus::kDead) return;
  spdlog::warn("dead-lettered stream={} group={} message_id={} attempts={} error={}", o.ref.stream,
               o.ref.name, f.message_id, f.attempts, ops::log_quoted(f.error));
}

// True when a commit of these will write a `ready` or `deferred` exception row (the retry
// loop's business).
bool has_ready_outcome(const std::vector<std::shared_ptr<RangeWork>>& ranges,
                       const std::vector<store::RetryResult>& retries) {
  auto ready = [](const std::optional<store::FailedMessage>& d) {
    return d && (d->status == store::ExceptionStatus::kReady ||
                 d->status == store::ExceptionStatus::kDeferred);
  };
  for (const auto& r : retries) {
    if (ready(r.decision)) return true;
  }
  for (const auto& r : ranges) {
    for (size_t i = 0; i < r->size(); ++i) {
      if (r->slot(i).state.load(std::memory_order_acquire) == MessageState::kDone &&
          ready(r->slot(i).decision)) {
        return true;
      }
    }
  }
  return false;
}

enum class Attempt { kDone, kGaveUp, kRejected };

// Runs `op` until it succeeds, `give_up` or the stop deadline passes (whichever is first; the
// stop deadline is read on every turn so a drain interrupts a commit retrying through an
// outage), or the database refuses it deterministically (SQLSTATE 22/23: retrying the same
// input cannot help — the caller isolates the offending row instead). Logs the first failure
// of an outage and keeps the metrics' commit_failing_since_ns.
template <class Op>
Attempt with_retries(const PipelineOptions& o, GroupMetrics& m, const char* what,
                     Steady::time_point give_up, const std::atomic<int64_t>& stop_deadline_ns,
                     Op&& op) {
  OutageBackoff outage(kFirstErrorBackoff, OutageBackoff::kMaxDelay);
  for (;;) {
    try {
      op();
      m.commit_failing_since_ns.store(0);
      if (outage.on_success()) {
        spdlog::info("{}-recovered stream={} group={}", what, o.ref.stream, o.ref.name);
      }
      return Attempt::kDone;
    } catch (const store::StoreError& e) {
      m.add(GroupCounter::kStoreErrors);
      int64_t expected = 0;
      m.commit_failing_since_ns.compare_exchange_strong(expected,
                                                        Steady::now().time_since_epoch().count());
      if (e.deterministic()) {
        spdlog::error(
            "{}-rejected stream={} group={} sqlstate={}: {} (isolating the offending "
            "rows; not retried as is)",
            what, o.ref.stream, o.ref.name, e.sqlstate(), e.what());
        return Attempt::kRejected;
      }
      const auto step = outage.on_failure();
      if (step.log_now) {
        spdlog::error(
            "{}-failed stream={} group={} kind={}: {} (retrying; tokens make a "
            "repeated commit safe)",
            what, o.ref.stream, o.ref.name, store::kind_name(e.kind()), e.what());
      }
      auto deadline =
          std::min(give_up, Steady::time_point(Steady::duration(stop_deadline_ns.load())));
      if (Steady::now() + step.delay > deadline) {
        spdlog::error(
            "{}-abandoned stream={} group={}: the leases will expire and the work "
            "will be claimed again",
            what, o.ref.stream, o.ref.name);
        m.commit_failing_since_ns.store(0);  // nothing waits on this committer any more
        return Attempt::kGaveUp;
      }
      std::this_thread::sleep_for(step.delay);
    }
  }
}

void log_rejected(const PipelineOptions& o, GroupMetrics& m,
                  const std::vector<store::RejectedWrite>& rejected) {
  for (const auto& r : rejected) {
    m.add(GroupCounter::kCommitRejected);
    spdlog::error("commit-rejected stream={} group={} message_id={} sqlstate={}: {} ({})",
                  o.ref.stream, o.ref.name, r.message_id, r.sqlstate,
                  r.audit_only ? "audit row refused; its error text was replaced" : "recorded dead",
                  r.error);
  }
}
// How a commit's in-doubt resolution is logged (the range and retry commits say it apiece).
struct InDoubtLog {
  std::function<void()> committed;    // commit-in-doubt-committed
  std::function<void()> not_applied;  // commit-in-doubt-not-applied
};

// One batch commit (ranges or retry rows), the rules written once: sent through with_retries;
// an in-doubt COMMIT is resolved with pg_xact_status before anything is sent again (had it
// committed, a second attempt would find its tokens gone and report every outcome as a lost
// lease: its outcomes are reported from the in-doubt record instead); a deterministic refusal
// is redone isolating each row (`<what>-isolating`), the refused rows left in `rejected` and
// logged. `send` commits (isolating when given a vector) and returns what committed per row;
// `report` takes that.
template <class Send, class Report>
Attempt commit_with_retries(const PipelineOptions& o, GroupMetrics& m, store::GroupStore& store,
                            const std::string& what, Steady::time_point give_up,
                            const std::atomic<int64_t>& stop_deadline_ns, Send&& send,
                            Report&& report, const InDoubtLog& log,
                            std::vector<store::RejectedWrite>& rejected) {
  bool doubt = false;
  auto attempt = [&](std::vector<store::RejectedWrite>* isolate) {
    if (doubt && store.in_doubt()) {
      auto would_have = store.in_doubt()->committed;
      auto resolution = store.resolve_in_doubt();  // throws while the database is unreachable
      doubt = false;
      if (resolution == store::InDoubtResolution::kCommitted) {
        m.add(GroupCounter::kCommitsInDoubt);
        log.committed();
        report(would_have);
        return;
      }
      log.not_applied();
    }
    if (isolate != nullptr) isolate->clear();
    try {
      report(send(isolate));
    } catch (const store::StoreError& e) {
      if (e.kind() == store::StoreError::Kind::kInDoubt) doubt = true;
      throw;
    }
  };
  auto result =
      with_retries(o, m, what.c_str(), give_up, stop_deadline_ns, [&] { attempt(nullptr); });
  if (result == Attempt::kRejected) {
    result = with_retries(o, m, (what + "-isolating").c_str(), give_up, stop_deadline_ns,
                          [&] { attempt(&rejected); });
    if (result == Attempt::kDone) log_rejected(o, m, rejected);
  }
  return result;
}
}  // namespace

Committer::Committer(const PipelineOptions& options, RangeQueue& queue, GroupMetrics& metrics,
                     std::function<void()> watchdog)
    : options_(options), queue_(queue), metrics_(metrics), watchdog_(std::move(watchdog)) {}

void Committer::start() {
  thread_ = start_thread("ss-commit", [this] { run(); });
}

void Committer::set_stop_deadline(Steady::time_point deadline) {
  // From now on no commit retries past the deadline, including one already retrying.
  stop_deadline_ns_.store(deadline.time_since_epoch().count());
}

void Committer::join() {
  if (thread_.joinable()) thread_.join();
}

void Committer::run() {
  const auto& g = options_.group;
  store::Session session(options_.session);
  store::GroupStore store(session, options_.ref.stream_id, options_.ref.id, options_.holder);
  store.set_ordering(ordering_mode(g));
  const auto renew_every = lease_timing(g.lease_ttl, g.handler_timeout).renew_every;
  const auto watch_every = std::clamp(g.handler_timeout / 4, std::chrono::milliseconds(10),
                                      std::chrono::milliseconds(250));
  // Renewals and the watchdog on the injected clock; the advancer on real time.
  const SteadyClock& clock = *options_.steady_clock;
  auto next_renew = clock.now() + renew_every;
  auto next_advance = Steady::now() + kAdvanceEvery;
  // Set by a commit batch: when to advance the cursor next (any host may run the advancer's
  // two statements: the generation guard makes a second runner harmless). The periodic
  // advancer (this loop's when run_advancer, else the fleet's worker) stays the backstop.
  std::optional<Steady::time_point> advance_due;
  Steady::time_point last_advance{};
  OutageBackoff outage(kFirstErrorBackoff, OutageBackoff::kMaxDelay);
  for (;;) {
    // Only deadlines this loop will move: next_advance stays put when the advancer is off
    // (a past wake time here made an idle host spin a core per group).
    auto wake = clock.to_real(std::min(next_renew, clock.now() + watch_every));
    if (options_.run_advancer) wake = std::min(wake, next_advance);
    if (advance_due) wake = std::min(wake, *advance_due);
    // The final flush takes every claimed range: finished ones commit fully, the rest commit
    // their resolved prefix and hand back.
    auto work = queue_.await_commit_work(wake);
    auto& batch = work.ranges;
    auto& retries = work.retries;
    const bool final_flush = work.final_flush;
    // The final flush gives up at stop()'s deadline (shutdown_timeout): while the database is
    // down the leases expire and the work is reclaimed (at-least-once, nothing lost).
    auto give_up = final_flush ? Steady::time_point(Steady::duration(stop_deadline_ns_.load()))
                               : Steady::time_point::max() - std::chrono::hours(1);
    // Ordered groups: a retry row resolved may let its key's next (deferred) row run now.
    const bool poke = !final_flush &&
                      (has_ready_outcome(batch, retries) || (queue_.ordered() && !retries.empty()));
    if (!batch.empty()) {
      commit_batch(store, batch, give_up);
      if (!advance_due)
        advance_due = std::max(Steady::now(), last_advance + kAdvanceAfterCommitGap);
    }
    if (!retries.empty()) commit_retry_results(store, std::move(retries), give_up);
    if (poke) queue_.poke_retrier();
    if (!final_flush) watchdog_();
    const auto now = clock.now();
    const auto real_now = Steady::now();
    try {
      if (now >= next_renew && !final_flush) {
        renew_leases(store);
        next_renew = now + renew_every;
      }
      const bool tick = options_.run_advancer && (real_now >= next_advance || final_flush);
      // Not in the final flush: the database may be gone, and stop() must keep its deadline
      // (the fleet's advancer runs one last pass when its host stops).
      const bool after_commit = advance_due && real_now >= *advance_due && !final_flush;
      if (tick || after_commit) {
        advance_due.reset();
        last_advance = real_now;
        store.advance_cursor();
        next_advance = real_now + kAdvanceEvery;
      }
      (void)outage.on_success();  // each failure is logged (debug) as it happens
    } catch (const store::StoreError& e) {
      metrics_.add(GroupCounter::kStoreErrors);
      spdlog::debug("committer store error stream={} group={}: {}", options_.ref.stream,
                    options_.ref.name, e.what());
      const auto step = outage.on_failure();
      next_renew = now + step.delay;
      next_advance = real_now + step.delay;
      if (advance_due) advance_due = real_now + step.delay;
    }
    if (final_flush) break;
  }
}

void Committer::commit_batch(store::GroupStore& store,
                             const std::vector<std::shared_ptr<RangeWork>>& ranges,
                             Steady::time_point give_up) {
  if (!queue_.ordered()) {
    commit_together(store, ranges, give_up);
    queue_.release_ranges(ranges);
    return;
  }
  // Ordered groups: one range per transaction, lowest first (the queue hands them over in that
  // order). A range that lost its lease revokes every later range held here before they
  // commit: they may hold successes that began when its messages resolved in memory.
  for (const auto& r : ranges) {
    if (!commit_together(store, {r}, give_up)) queue_.revoke_above(r->range().low);
    queue_.release_ranges({r});
  }
}

bool Committer::commit_together(store::GroupStore& store,
                                const std::vector<std::shared_ptr<RangeWork>>& ranges,
                                Steady::time_point give_up) {
  bool all_held = true;
  std::vector<std::shared_ptr<RangeWork>> to_commit;
  std::vector<store::RangeCommit> commits;
  // Leases lost because the group was dropped are no news: `group-dropped` said it once.
  std::optional<bool> gone;
  auto dropped = [&] {
    if (!gone) gone = group_gone(queue_, store);
    return *gone;
  };
  for (const auto& r : ranges) {
    // Test builds: the planted defect also commits a range its renewal found lost (without this
    // the planted store check is reached only in the moment between a renewal and a commit).
    if (r->lost.load() && !chaos_plant("commit-without-token") &&
        !chaos_plant("emit-without-token")) {
      all_held = false;
      if (dropped()) continue;
      metrics_.add(GroupCounter::kLeaseLost);
      // Not rate-limited: each lost range explains its re-deliveries (rare by construction).
      spdlog::warn("lease-lost stream={} group={} low={} high={}: outcomes discarded",
                   options_.ref.stream, options_.ref.name, r->range().low, r->range().high);
      continue;
    }
    to_commit.push_back(r);
    commits.push_back(r->to_commit(options_.group.audit));
  }
  auto report = [&](const std::vector<bool>& ok) {
    for (size_t i = 0; i < ok.size(); ++i) {
      if (!ok[i]) {
        all_held = false;
        if (dropped()) continue;
        metrics_.add(GroupCounter::kLeaseLost);
        spdlog::warn("lease-lost stream={} group={} low={} high={}: outcomes discarded",
                     options_.ref.stream, options_.ref.name, to_commit[i]->range().low,
                     to_commit[i]->range().high);
        continue;
      }
      metrics_.add(commits[i].complete ? GroupCounter::kRangesCommitted
                                       : GroupCounter::kRangesHandedBack);
      for (const auto& f : commits[i].failures) log_dead(options_, f);
    }
  };
  std::vector<store::RejectedWrite> rejected;
  auto result = commit_with_retries(
      options_, metrics_, store, "commit", give_up, stop_deadline_ns_,
      [&](std::vector<store::RejectedWrite>* isolate) {
        if (commits.empty()) return std::vector<bool>{};
        return store.commit_ranges(commits, isolate);
      },
      report,
      {[&] {
         spdlog::info(
             "commit-in-doubt-committed stream={} group={} ranges={}: the commit whose "
             "outcome was unknown had been applied",
             options_.ref.stream, options_.ref.name, commits.size());
       },
       [&] {
         spdlog::info("commit-in-doubt-not-applied stream={} group={}: committing again",
                      options_.ref.stream, options_.ref.name);
       }},
      rejected);
  if (result == Attempt::kRejected) {
    metrics_.commit_failing_since_ns.store(0);
    spdlog::error(
        "commit-abandoned stream={} group={}: refused even row by row; the leases "
        "will expire and the ranges be reclaimed, then quarantined",
        options_.ref.stream, options_.ref.name);
  }
  // Given up (an outage past the stop deadline, a refusal): the lease stays ours until it
  // expires, and is then reclaimed elsewhere.
  if (result != Attempt::kDone) all_held = false;
  return all_held;
}

void Committer::commit_retry_results(store::GroupStore& store,
                                     std::vector<store::RetryResult> results,
                                     Steady::time_point give_up) {
  std::optional<bool> gone;  // as in commit_batch
  auto report = [&](const std::vector<bool>& ok) {
    for (size_t i = 0; i < ok.size(); ++i) {
      if (!ok[i]) {
        if (!gone) gone = group_gone(queue_, store);
        if (*gone) continue;
        metrics_.add(GroupCounter::kRetryLeaseLost);
        if (auto n = warn_limiter_.admit("lease-lost-retry")) {
          spdlog::warn("lease-lost stream={} group={} message_id={}: retry outcome discarded{}",
                       options_.ref.stream, options_.ref.name, results[i].message_id,
                       ops::suppressed_suffix(*n));
        }
      } else if (results[i].decision) {
        log_dead(options_, *results[i].decision);
      }
    }
  };
  std::vector<store::RejectedWrite> rejected;
  commit_with_retries(
      options_, metrics_, store, "commit-retries", give_up, stop_deadline_ns_,
      [&](std::vector<store::RejectedWrite>* isolate) {
        return store.commit_retries(results, isolate);
      },
      report,
      {[&] {
         spdlog::info(
             "commit-in-doubt-committed stream={} group={} retries={}: the retry commit whose "
             "outcome was unknown had been applied",
             options_.ref.stream, options_.ref.name, results.size());
       },
       [&] {
         spdlog::info("commit-in-doubt-not-applied stream={} group={} retries={}: committing again",
                      options_.ref.stream, options_.ref.name, results.size());
       }},
      rejected);
  queue_.release_retries(results);
}

void Committer::renew_leases(store::GroupStore& store) {
  const auto tokens = queue_.lease_tokens();
  // Taken before the renewals are sent: never later than the expiry the database sets.
  const int64_t deadline = steady_ms(options_.steady_clock->now() + options_.group.lease_ttl);
  auto lost = store.renew_leases(tokens.ranges, options_.group.lease_ttl);
  auto lost_retries = store.renew_retry_leases(tokens.retries, options_.group.lease_ttl);
  queue_.apply_renewal(tokens, deadline, lost, lost_retries);
}

}  // namespace sqlstreams::consume
