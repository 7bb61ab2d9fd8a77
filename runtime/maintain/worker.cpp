#include "maintain/worker.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>

namespace sqlstreams::maintain {

store::WorkerKey janitor_key(int64_t stream_id) {
  return {"janitor", fmt::format("stream:{}", stream_id)};
}

store::WorkerKey advancer_key(int64_t group_id) {
  return {"advancer", fmt::format("group:{}", group_id)};
}

JanitorWorker::JanitorWorker(store::Session& session, JanitorOptions options,
                             JanitorCounters& counters)
    : MaintenanceWorker(janitor_key(options.stream_id), options.schedule),
      options_(std::move(options)),
      counters_(counters),
      janitor_(session, options_.stream_id) {}

void JanitorWorker::run(SysTime now, const store::WorkerFence* fence) {
  JanitorCounters& c = counters_;
  c.runs++;
  last_ = janitor_.run_once(now, options_.settings, fence);
  c.partitions_created += last_.created.size();
  c.partitions_dropped += last_.dropped.size();
  c.rows_swept += static_cast<uint64_t>(last_.swept);
  c.lock_busy += last_.busy.size();
  if (!last_.errors.empty()) c.failures++;
  log(last_);
  if (!last_.errors.empty()) {
    throw store::StoreError(store::StoreError::Kind::kOther, last_.errors.front());
  }
}

std::string JanitorWorker::group_name(int64_t id) const {
  auto it = options_.group_names.find(id);
  return it == options_.group_names.end() ? fmt::format("#{}", id) : it->second;
}

void JanitorWorker::log(const store::JanitorReport& r) {
  const std::string& stream = options_.stream;
  // Once per holder and partition, not every pass: who keeps retention waiting.
  const std::string hold =
      r.held_by ? fmt::format("{}/{}", r.held_by->group_id, r.held_by->needs) : std::string();
  if (r.held_by && hold != last_hold_) {
    const auto& h = *r.held_by;
    spdlog::warn(
        "retention-held stream={} group={} committed={} needs={} last_seen={}{}: the oldest "
        "partition stays until this group commits through id {} (drop the group with `sqlstreams "
        "group drop` if no running config uses it)",
        stream, h.group, h.committed, h.needs,
        h.last_seen ? format_duration(*h.last_seen) + " ago" : std::string("never"),
        h.paused ? " paused=true" : "", h.needs);
  }
  if (r.errors.empty()) last_hold_ = hold;
  for (const auto& p : r.created) {
    if (p.rehomed > 0) {
      // Ids written while no partition existed for them (no host ran): moved in from the
      // default partition; `held` is how long producers of the stream waited for it.
      spdlog::info(
          "partition-rehomed stream={} partition={} first_id={} last_id={} rows={} held={}ms",
          stream, p.table, p.first_id, p.last_id, p.rehomed, p.held.count());
      continue;
    }
    spdlog::info("partition-created stream={} partition={} first_id={} last_id={}", stream, p.table,
                 p.first_id, p.last_id);
  }
  for (const auto& d : r.dropped) {
    spdlog::info("partition-dropped stream={} partition={} first_id={} last_id={}", stream,
                 d.partition.table, d.partition.first_id, d.partition.last_id);
    for (const auto& loss : d.losses) {
      spdlog::warn(
          "retention-dropped-uncommitted stream={} group={} partition={} lost={} "
          "(allow_drop_past_committed)",
          stream, group_name(loss.group_id), d.partition.table, loss.lost);
    }
  }
  for (const auto& loss : r.swept_losses) {
    spdlog::warn(
        "retention-dropped-uncommitted stream={} group={} lost={} (row sweep, "
        "allow_drop_past_committed)",
        stream, group_name(loss.group_id), loss.lost);
  }
  for (const auto& c : r.raised) {
    spdlog::info("cursor-raised stream={} group={} from={} to={}: ids below are gone", stream,
                 group_name(c.group_id), c.committed_before, c.floor);
  }
  if (r.swept > 0 || r.audit_trimmed > 0 || r.exceptions_removed > 0 || r.keys_expired > 0) {
    spdlog::debug(
        "janitor-swept stream={} messages={} audit_rows={} exceptions={} idempotency_keys={}",
        stream, r.swept, r.audit_trimmed, r.exceptions_removed, r.keys_expired);
  }
  for (const auto& e : r.errors) spdlog::warn("janitor-step-failed stream={}: {}", stream, e);
  // Lock misses are normal under load (the DDL never queues): counted, and a warning only for
  // a step that keeps finding its locks taken; its end is logged too.
  for (auto it = busy_passes_.begin(); it != busy_passes_.end();) {
    if (std::find(r.busy.begin(), r.busy.end(), it->first) != r.busy.end()) {
      ++it;
      continue;
    }
    if (it->second >= kBusyPassesBeforeWarning) {
      spdlog::info("janitor-step-unblocked stream={} step=\"{}\" after={}: it ran again", stream,
                   it->first, it->second);
    }
    it = busy_passes_.erase(it);
  }
  for (const auto& step : r.busy) {
    const int n = ++busy_passes_[step];
    if (n == kBusyPassesBeforeWarning) {
      spdlog::warn(
          "janitor-step-busy stream={} step=\"{}\" passes={}: the stream's tables stayed locked "
          "by other sessions past lock_timeout every time (a long transaction on them? see "
          "pg_locks); the step is tried again each pass",
          stream, step, n);
    } else {
      spdlog::debug("janitor-step-busy stream={} step=\"{}\" passes={}", stream, step, n);
    }
  }
}

AdvancerWorker::AdvancerWorker(store::Session& session, store::GroupRef group,
                               const std::string& holder, Schedule schedule)
    : MaintenanceWorker(advancer_key(group.id), schedule),
      group_(std::move(group)),
      store_(session, group_.stream_id, group_.id, holder) {}

void AdvancerWorker::run(SysTime, const store::WorkerFence*) {
  auto r = store_.advance_cursor();
  if (r.committed_after != r.committed_before) {
    spdlog::trace("cursor-advanced stream={} group={} committed={}", group_.stream, group_.name,
                  r.committed_after);
  }
}

}  // namespace sqlstreams::maintain
