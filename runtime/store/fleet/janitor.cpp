// StreamJanitor: the pass, create-ahead/heal and partition drops. (Floor, sweep and audit trim
// are in janitor_cleanup.cpp.)
#include "store/fleet/janitor.hpp"

#include <fmt/format.h>

#include <set>

#include "store/core/pq.hpp"
#include "store/core/sql_time.hpp"
#include "store/fleet/maintenance_pq.hpp"

namespace sqlstreams::store {
namespace {

// Statement names (store/core/statement.hpp).
constexpr StatementName kReadStream{"janitor_read_stream"};
constexpr StatementName kLaggingGroups{"lagging_groups"};
constexpr StatementName kJanitorLockTimeout{"janitor_lock_timeout"};
constexpr StatementName kPartitionsLock{"partitions_advisory_lock"};
constexpr StatementName kLockLogNowait{"lock_log_nowait"};
constexpr StatementName kEnsurePartitions{"ensure_partitions"};
constexpr StatementName kHealPartition{"heal_partition"};
constexpr StatementName kGiveToHost{"give_to_host"};
constexpr StatementName kNewestRowAge{"newest_row_age"};
constexpr StatementName kNewestMessageAge{"newest_message_age"};
constexpr StatementName kPartitionExists{"partition_exists"};
constexpr StatementName kLockForDrop{"lock_for_drop"};
constexpr StatementName kRecordLoss{"record_loss"};
constexpr StatementName kKeepDeadPayloads{"keep_dead_payloads"};
constexpr StatementName kDropPartition{"drop_partition"};
constexpr StatementName kDefaultFloor{"default_partition_floor"};
constexpr StatementName kDefaultRows{"default_partition_rows"};

struct StreamRow {
  int64_t partition_size = 0;
  int64_t partitions_upto = 1;
  std::optional<int64_t> retention_ms;
  bool allow_drop_past_committed = false;
};

StreamRow read_stream(pqxx::transaction_base& tx, const Session& session, int64_t stream_id) {
  auto r =
      exec(tx, kReadStream,
           fmt::format("SELECT partition_size, partitions_upto, {}, allow_drop_past_committed FROM "
                       "{}.streams WHERE id = $1",
                       to_epoch_ms("retention"), session.schema_sql()),
           stream_id);
  if (r.empty()) {
    throw StoreError(StoreError::Kind::kRejected, fmt::format("no stream with id {}", stream_id));
  }
  StreamRow s;
  s.partition_size = r[0][0].as<int64_t>();
  s.partitions_upto = r[0][1].as<int64_t>();
  if (!r[0][2].is_null()) s.retention_ms = r[0][2].as<int64_t>();
  s.allow_drop_past_committed = r[0][3].as<bool>();
  return s;
}

PartitionRange range_of(const StreamTables& t, int64_t k, int64_t size) {
  return {t.partition_name(k), k * size + 1, (k + 1) * size};
}

// Groups that have not committed the partition's last id: they lose what is left of it.
pqxx::result lagging_groups(pqxx::transaction_base& tx, const std::string& s,
                            const std::string& part, const std::string& exceptions,
                            const std::string& cursors, int64_t last_id) {
  // The most lagging first: it is the one that holds retention back.
  return exec(
      tx, kLaggingGroups,
      fmt::format("SELECT c.group_id, g.name, (SELECT count(*) FROM {0} m WHERE m.id > "
                  "c.committed AND NOT EXISTS (SELECT 1 FROM {1} e WHERE e.group_id = "
                  "c.group_id AND e.message_id = m.id AND e.payload IS NOT NULL)), c.committed, "
                  "{4}, g.paused_at IS NOT NULL FROM {2} c "
                  "JOIN {3}.groups g ON g.id = c.group_id WHERE c.committed < $1 ORDER BY "
                  "c.committed, c.group_id",
                  part, exceptions, cursors, s,
                  to_epoch_ms(fmt::format("({} - g.last_seen_at)", kDbNow))),
      last_id);
}

RetentionHolder holder_of(const pqxx::row& row, int64_t needs) {
  RetentionHolder h;
  h.group_id = row[0].as<int64_t>();
  h.group = row[1].as<std::string>();
  h.committed = row[3].as<int64_t>();
  h.needs = needs;
  if (!row[4].is_null()) h.last_seen = Millis(row[4].as<int64_t>());
  h.paused = row[5].as<bool>();
  return h;
}

std::string hold_text(const RetentionHolder& h) {
  return fmt::format("group '{}' has not committed through id {} (committed {}, {}{})", h.group,
                     h.needs, h.committed,
                     h.last_seen
                         ? "last seen by a running host " + format_duration(*h.last_seen) + " ago"
                         : std::string("never seen by a running host"),
                     h.paused ? ", paused" : "");
}

void set_lock_timeout(pqxx::transaction_base& tx, Millis timeout) {
  exec(tx, kJanitorLockTimeout,
       fmt::format("SET LOCAL lock_timeout = {}", std::max<int64_t>(1, timeout.count())));
}

}  // namespace

StreamJanitor::StreamJanitor(Session& session, int64_t stream_id)
    : session_(session), stream_id_(stream_id), tables_(session_.schema_sql(), stream_id) {}

JanitorReport StreamJanitor::run_once(SysTime now, const JanitorSettings& settings,
                                      const WorkerFence* fence) {
  JanitorReport report;
  auto step = [&](const char* name, auto&& fn) {
    try {
      fn();
    } catch (const FencedOut&) {
      throw;
    } catch (const StoreError& e) {
      if (e.condition() == Condition::kLockNotAvailable) {
        report.busy.push_back(name);
      } else {
        report.errors.push_back(fmt::format("{}: {}", name, e.what()));
      }
    }
  };
  step("create ahead", [&] {
    // While re-homing ids from the default partition: one range per transaction, up to
    // max_batches ranges per pass.
    for (int i = 0; i < settings.max_batches; ++i) {
      auto created = create_ahead(now, settings, fence);
      report.created.insert(report.created.end(), created.begin(), created.end());
      if (!rehoming_) return;
    }
  });
  bool dropped_all = false;
  step("drop", [&] {
    for (int i = 0; i < settings.max_drops_per_pass; ++i) {
      auto d = drop_oldest(settings, fence, &report.kept_because, &report.held_by);
      if (!d) return;
      report.dropped.push_back(std::move(*d));
    }
    dropped_all = true;  // more may be due: the next pass continues
  });
  step("raise floor", [&] { report.raised = raise_floor(fence, &report.exceptions_removed); });
  if (!dropped_all) {
    step("sweep", [&] {
      for (int i = 0; i < settings.max_batches; ++i) {
        int64_t n = sweep_batch(settings, fence, &report.swept_losses);
        report.swept += n;
        if (n < settings.delete_batch) return;
      }
    });
  }
  step("trim audit", [&] {
    for (int i = 0; i < settings.max_batches; ++i) {
      int64_t n = trim_audit_batch(settings, fence);
      report.audit_trimmed += n;
      if (n < settings.delete_batch) return;
    }
  });
  step("expire keys", [&] {
    for (int i = 0; i < settings.max_batches; ++i) {
      int64_t n = expire_keys_batch(settings, fence);
      report.keys_expired += n;
      if (n < settings.delete_batch) return;
    }
  });
  return report;
}

int64_t StreamJanitor::ids_ahead(SysTime now, int64_t drawn, int64_t size,
                                 const JanitorSettings& settings) {
  int64_t ahead = std::max<int64_t>(1, settings.partitions_ahead) * size;
  if (last_sample_ && now > last_sample_->at && drawn > last_sample_->drawn) {
    // Ids drawn per ms since the last pass, times the time until the pass after next (a pass
    // can be late by its jitter or skipped on a lock timeout): the safety factor covers both.
    const double per_ms = static_cast<double>(drawn - last_sample_->drawn) /
                          static_cast<double>((now - last_sample_->at).count());
    const double want =
        per_ms * static_cast<double>(settings.janitor_period.count()) * kRateSafetyFactor;
    const double cap = static_cast<double>(kMaxPartitionsAhead) * static_cast<double>(size);
    ahead = std::max<int64_t>(ahead, static_cast<int64_t>(std::min(want, cap)));
  }
  last_sample_ = RateSample{now, drawn};
  return ahead;
}

std::vector<PartitionRange> StreamJanitor::create_ahead(SysTime now,
                                                        const JanitorSettings& settings,
                                                        const WorkerFence* fence) {
  rehoming_ = false;
  // Sized once per pass (the rate sample moves once per pass, not per lock attempt).
  const auto sized = guarded(session_, "create partitions", [&] {
    pqxx::read_transaction tx(connection_of(session_));
    return std::make_pair(read_stream(tx, session_, stream_id_).partition_size,
                          last_drawn_id(tx, session_, stream_id_));
  });
  const int64_t size = sized.first;
  const int64_t ahead = ids_ahead(now, sized.second, size, settings);
  return retry_busy_lock(settings.lock_timeout, [&] {
    return guarded(session_, "create partitions", [&] {
      const std::string& s = session_.schema_sql();
      pqxx::work tx(connection_of(session_));
      set_lock_timeout(tx, settings.lock_timeout);
      // The advisory lock (store::ensure_partitions takes it too, in the same order) and the
      // reads assign no xid.
      exec(tx, kPartitionsLock,
           "SELECT pg_advisory_xact_lock(hashtext('sqlstreams.partitions'), $1::integer)",
           stream_id_);
      const StreamRow st = read_stream(tx, session_, stream_id_);
      int64_t drawn = last_drawn_id(tx, session_, stream_id_);
      auto before = partition_indexes(tx, session_, stream_id_);
      std::set<int64_t> existing(before.begin(), before.end());
      bool missing = false;  // below partitions_upto and can still receive ids
      for (int64_t k = drawn / size; k * size + 1 < st.partitions_upto; ++k) {
        missing |= !existing.count(k);
      }
      if (drawn + ahead < st.partitions_upto && !missing) {
        check_fence(tx, session_, fence, "create partitions", FenceCheck::kRead);
        tx.commit();
        return std::vector<PartitionRange>{};
      }
      // Never queues for the lock (see retry_busy_lock): busy = 55P03, tried again.
      exec(tx, kLockLogNowait,
           fmt::format("LOCK TABLE ONLY {} IN ACCESS EXCLUSIVE MODE NOWAIT", tables_.messages));
      const auto locked_at = std::chrono::steady_clock::now();
      check_fence(tx, session_, fence, "create partitions", FenceCheck::kLockRow);
      drawn = last_drawn_id(tx, session_, stream_id_);
      // Ids past the partitions were drawn (no host ran for a while: they are in the default
      // partition, V007): re-home one range per transaction, so this lock is held for at most
      // one partition's worth of moved rows; run_once() continues with the next range.
      int64_t moved = 0;
      rehoming_ = false;
      if (drawn >= st.partitions_upto) {
        auto rows = exec1(tx, kDefaultRows,
                          fmt::format("SELECT (SELECT count(*) FROM {0} WHERE id >= $1 AND id < "
                                      "$2), EXISTS (SELECT 1 FROM {0} WHERE id >= $1)",
                                      tables_.partition_default()),
                          st.partitions_upto, st.partitions_upto + size);
        moved = rows[0].as<int64_t>();
        rehoming_ = rows[1].as<bool>();
      }
      const int64_t target = rehoming_ ? st.partitions_upto : drawn + ahead;
      const int64_t upto =
          exec1(tx, kEnsurePartitions, fmt::format("SELECT {}.ensure_partitions($1, $2)", s),
                stream_id_, target)[0]
              .as<int64_t>();
      // Heal: a partition below `upto` that can still receive ids (its last id was not drawn
      // yet) must exist. Fully drawn missing partitions are never re-created: their ids are
      // gone.
      for (int64_t k = drawn / size; k * size + 1 < upto; ++k) {
        if (existing.count(k)) continue;
        auto r = range_of(tables_, k, size);
        // Re-homes the range's rows from the default partition if a producer wrote some (V007).
        exec(tx, kHealPartition, fmt::format("SELECT {}.create_partition($1, $2, $3)", s),
             stream_id_, r.first_id, size);
        // Owned by sqlstreams_host like every partition, so any host can drop it (V004).
        exec(tx, kGiveToHost, fmt::format("SELECT {}.give_to_host($1)", s), stream_id_);
      }
      std::vector<PartitionRange> created;
      for (int64_t k : partition_indexes(tx, session_, stream_id_)) {
        if (existing.count(k)) continue;
        created.push_back(range_of(tables_, k, size));
        if (rehoming_ && created.back().first_id == st.partitions_upto) {
          created.back().rehomed = moved;
        }
      }
      tx.commit();
      const auto held =
          std::chrono::duration_cast<Millis>(std::chrono::steady_clock::now() - locked_at);
      for (auto& c : created) c.held = held;
      return created;
    });
  });
}

std::optional<DroppedPartition> StreamJanitor::drop_oldest(
    const JanitorSettings& settings, const WorkerFence* fence, std::string* kept_because,
    std::optional<RetentionHolder>* held_by) {
  if (held_by) held_by->reset();
  // Decide with reads only (no xid); then lock and write in a transaction of its own.
  const auto candidate =
      guarded(session_, "drop partition", [&]() -> std::optional<PartitionRange> {
        auto keep = [&](std::string why) -> std::optional<PartitionRange> {
          if (kept_because) *kept_because = std::move(why);
          return std::nullopt;
        };
        const std::string& s = session_.schema_sql();
        pqxx::work tx(connection_of(session_));
        check_fence(tx, session_, fence, "drop partition", FenceCheck::kRead);
        const StreamRow st = read_stream(tx, session_, stream_id_);
        if (!st.retention_ms) return keep("no retention");
        auto ks = partition_indexes(tx, session_, stream_id_);
        if (ks.size() < 2) return keep("the newest partition always stays");
        const PartitionRange p = range_of(tables_, ks.front(), st.partition_size);
        const std::string part = fmt::format("{}.{}", s, p.table);
        // Every id of the partition must have been drawn: otherwise a producer could still be
        // handed one of its ids after the drop.
        if (last_drawn_id(tx, session_, stream_id_) < p.last_id) {
          return keep(fmt::format("{} can still receive ids", p.table));
        }
        const std::string retention = ms_param(Millis(*st.retention_ms));  // age, database clock
        // Cheap first: the row with the highest id is about the newest; only when it is old enough
        // is the partition scanned for its true newest message. An empty partition is dated by the
        // first message after it.
        auto last_row = exec(tx, kNewestRowAge,
                             fmt::format("SELECT created_at < {} FROM {} ORDER BY id DESC LIMIT 1",
                                         db_ago("$1"), part),
                             retention);
        if (!last_row.empty() && !last_row[0][0].as<bool>()) {
          return keep(fmt::format("{} has messages newer than the retention", p.table));
        }
        auto newest =
            exec1(tx, kNewestMessageAge,
                  fmt::format(
                      "SELECT coalesce((SELECT max(created_at) FROM {0}), (SELECT created_at FROM "
                      "{1} WHERE id > $1 ORDER BY id LIMIT 1)) < {2}",
                      part, tables_.messages, db_ago("$2")),
                  p.last_id, retention);
        if (newest[0].is_null()) return keep(fmt::format("{} has no message to date it", p.table));
        if (!newest[0].as<bool>()) {
          return keep(fmt::format("{} has messages newer than the retention", p.table));
        }
        auto lagging = lagging_groups(tx, s, part, tables_.exceptions, tables_.cursors, p.last_id);
        if (!lagging.empty() && !st.allow_drop_past_committed) {
          auto h = holder_of(lagging[0], p.last_id);
          if (held_by) *held_by = h;
          return keep(hold_text(h));
        }
        tx.commit();
        return p;
      });
  if (!candidate) return std::nullopt;
  const PartitionRange p = *candidate;
  // DROP takes ACCESS EXCLUSIVE on the parent and the partition. Both are taken first, with
  // NOWAIT, retried while busy (retry_busy_lock): this step never queues for them holding an
  // xid that would hold back every claimer's proof, nor holds up the stream's readers and
  // writers queued behind it. Parent first, as DROP does.
  return retry_busy_lock(settings.lock_timeout, [&] {
    return guarded(session_, "drop partition", [&]() -> std::optional<DroppedPartition> {
      const std::string& s = session_.schema_sql();
      const std::string part = fmt::format("{}.{}", s, p.table);
      pqxx::work tx(connection_of(session_));
      set_lock_timeout(tx, settings.lock_timeout);
      if (!exec1(tx, kPartitionExists, "SELECT to_regclass($1) IS NOT NULL", part)[0].as<bool>()) {
        return std::optional<DroppedPartition>{};  // dropped meanwhile (another janitor)
      }
      exec(tx, kLockForDrop,
           fmt::format("LOCK TABLE ONLY {}, ONLY {}, ONLY {} IN ACCESS EXCLUSIVE MODE NOWAIT",
                       tables_.messages, part, tables_.partition_default()));
      check_fence(tx, session_, fence, "drop partition", FenceCheck::kLockRow);
      const StreamRow st = read_stream(tx, session_, stream_id_);
      // Cursors may have moved (a rewind) since the decision: the cursor rule is decided again.
      // Under the default rule no producer of these ids can still be open (every group's
      // committed >= last_id proves them finished); under allow_drop_past_committed a
      // straggler's row committed meanwhile is dropped with the rest, which is what that
      // setting accepts.
      auto lagging = lagging_groups(tx, s, part, tables_.exceptions, tables_.cursors, p.last_id);
      if (!lagging.empty() && !st.allow_drop_past_committed) {
        auto h = holder_of(lagging[0], p.last_id);
        if (kept_because) *kept_because = hold_text(h);
        if (held_by) *held_by = h;
        return std::optional<DroppedPartition>{};
      }
      DroppedPartition out;
      out.partition = p;
      for (const auto& row : lagging) {
        GroupLoss loss{row[0].as<int64_t>(), row[2].as<int64_t>()};
        if (loss.lost == 0) continue;
        exec(tx, kRecordLoss,
             fmt::format("UPDATE {}.groups SET lost_messages = lost_messages + $2, "
                         "lost_through = GREATEST(coalesce(lost_through, 0), $3), "
                         "updated_at = now() WHERE id = $1",
                         s),
             loss.group_id, loss.lost, p.last_id);
        out.losses.push_back(loss);
      }
      // Dead letters outlive their message: make sure each one carries its payload.
      exec(tx, kKeepDeadPayloads,
           fmt::format("UPDATE {} e SET payload = m.payload, schema_version = m.schema_version, "
                       "message_key = m.message_key, message_created_at = m.created_at, updated_at "
                       "= now() FROM {} m WHERE e.message_id = m.id AND e.status = 'dead' AND "
                       "e.payload IS NULL",
                       tables_.exceptions, part));
      exec(tx, kDropPartition, fmt::format("DROP TABLE {}", part));
      // No id of the dropped range may ever become visible again (the cursor floor relies on
      // it): a straggler's insert of one would now land in the default partition, so its
      // floor moves up. NOT VALID: enforced for new rows, no scan (V007).
      exec(tx, kDefaultFloor,
           fmt::format("ALTER TABLE {0} DROP CONSTRAINT IF EXISTS {1}_floor, ADD CONSTRAINT "
                       "{1}_floor CHECK (id > {2}) NOT VALID",
                       tables_.partition_default(), tables_.partition_default_name(), p.last_id));
      tx.commit();
      return std::optional<DroppedPartition>(std::move(out));
    });
  });
}

}  // namespace sqlstreams::store
