// StreamJanitor: the pass, create-ahead/heal and partition drops. (Floor, sweep and audit trim
// are in janitor_cleanup.cpp.)
#include "store/janitor.hpp"

#include <fmt/format.h>

#include <set>

#include "store/maintenance_pq.hpp"
#include "store/pq.hpp"

namespace sqlstreams::store {
namespace {

struct StreamRow {
  int64_t partition_size = 0;
  int64_t partitions_upto = 1;
  std::optional<int64_t> retention_ms;
  bool allow_drop_past_committed = false;
};

StreamRow read_stream(pqxx::transaction_base& tx, const Session& session, int64_t stream_id) {
  auto r = tx.exec_params(
      fmt::format("SELECT partition_size, partitions_upto, (extract(epoch FROM retention) * "
                  "1000)::bigint, allow_drop_past_committed FROM {}.streams WHERE id = $1",
                  session.schema_sql()),
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

PartitionRange range_of(int64_t stream_id, int64_t k, int64_t size) {
  return {fmt::format("messages_{}_p{}", stream_id, k), k * size + 1, (k + 1) * size};
}

void set_lock_timeout(pqxx::transaction_base& tx, Millis timeout) {
  tx.exec(fmt::format("SET LOCAL lock_timeout = {}", std::max<int64_t>(1, timeout.count())));
}

}  // namespace

StreamJanitor::StreamJanitor(Session& session, int64_t stream_id)
    : session_(session), stream_id_(stream_id) {
  const std::string& s = session_.schema_sql();
  messages_ = fmt::format("{}.messages_{}", s, stream_id);
  cursors_ = fmt::format("{}.cursors_{}", s, stream_id);
  leases_ = fmt::format("{}.leases_{}", s, stream_id);
  exceptions_ = fmt::format("{}.exceptions_{}", s, stream_id);
  deliveries_ = fmt::format("{}.deliveries_{}", s, stream_id);
}

JanitorReport StreamJanitor::run_once(SysTime now, const JanitorSettings& settings,
                                      const WorkerFence* fence) {
  JanitorReport report;
  auto step = [&](const char* name, auto&& fn) {
    try {
      fn();
    } catch (const FencedOut&) {
      throw;
    } catch (const StoreError& e) {
      report.errors.push_back(fmt::format("{}: {}", name, e.what()));
    }
  };
  step("create ahead", [&] { report.created = create_ahead(now, settings, fence); });
  bool dropped_all = false;
  step("drop", [&] {
    for (int i = 0; i < settings.max_drops_per_pass; ++i) {
      auto d = drop_oldest(now, settings, fence, &report.kept_because);
      if (!d) return;
      report.dropped.push_back(std::move(*d));
    }
    dropped_all = true;  // more may be due: the next pass continues
  });
  step("raise floor", [&] { report.raised = raise_floor(now, fence, &report.exceptions_removed); });
  if (!dropped_all) {
    step("sweep", [&] {
      for (int i = 0; i < settings.max_batches; ++i) {
        int64_t n = sweep_batch(now, settings, fence, &report.swept_losses);
        report.swept += n;
        if (n < settings.delete_batch) return;
      }
    });
  }
  step("trim audit", [&] {
    for (int i = 0; i < settings.max_batches; ++i) {
      int64_t n = trim_audit_batch(now, settings, fence);
      report.audit_trimmed += n;
      if (n < settings.delete_batch) return;
    }
  });
  return report;
}

std::vector<PartitionRange> StreamJanitor::create_ahead(SysTime now,
                                                        const JanitorSettings& settings,
                                                        const WorkerFence* fence) {
  return guarded(session_, "create partitions", [&] {
    const std::string& s = session_.schema_sql();
    pqxx::work tx(connection_of(session_));
    check_fence(tx, session_, fence, now, "create partitions");
    set_lock_timeout(tx, settings.lock_timeout);
    // The same lock ensure_partitions() takes: producers healing concurrently wait for us.
    tx.exec_params("SELECT pg_advisory_xact_lock(hashtext('sqlstreams.partitions'), $1::integer)",
                   stream_id_);
    const StreamRow st = read_stream(tx, session_, stream_id_);
    const int64_t size = st.partition_size;
    const int64_t drawn = last_drawn_id(tx, session_, stream_id_);
    auto before = partition_indexes(tx, session_, stream_id_);
    std::set<int64_t> existing(before.begin(), before.end());
    const int64_t target = drawn + std::max<int64_t>(1, settings.partitions_ahead) * size;
    const int64_t upto = tx.exec_params1(fmt::format("SELECT {}.ensure_partitions($1, $2)", s),
                                         stream_id_, target)[0]
                             .as<int64_t>();
    // Heal: a partition below `upto` that can still receive ids (its last id was not drawn
    // yet) must exist. Fully drawn missing partitions are never re-created: their ids are gone.
    for (int64_t k = drawn / size; k * size + 1 < upto; ++k) {
      if (existing.count(k)) continue;
      auto r = range_of(stream_id_, k, size);
      tx.exec(
          fmt::format("CREATE TABLE IF NOT EXISTS {}.{} PARTITION OF {} FOR VALUES FROM ({}) "
                      "TO ({})",
                      s, r.table, messages_, r.first_id, r.last_id + 1));
    }
    std::vector<PartitionRange> created;
    for (int64_t k : partition_indexes(tx, session_, stream_id_)) {
      if (!existing.count(k)) created.push_back(range_of(stream_id_, k, size));
    }
    tx.commit();
    return created;
  });
}

std::optional<DroppedPartition> StreamJanitor::drop_oldest(SysTime now,
                                                           const JanitorSettings& settings,
                                                           const WorkerFence* fence,
                                                           std::string* kept_because) {
  return guarded(session_, "drop partition", [&]() -> std::optional<DroppedPartition> {
    auto keep = [&](std::string why) -> std::optional<DroppedPartition> {
      if (kept_because) *kept_because = std::move(why);
      return std::nullopt;
    };
    const std::string& s = session_.schema_sql();
    pqxx::work tx(connection_of(session_));
    check_fence(tx, session_, fence, now, "drop partition");
    set_lock_timeout(tx, settings.lock_timeout);
    const StreamRow st = read_stream(tx, session_, stream_id_);
    if (!st.retention_ms) return keep("no retention");
    auto ks = partition_indexes(tx, session_, stream_id_);
    if (ks.size() < 2) return keep("the newest partition always stays");
    const PartitionRange p = range_of(stream_id_, ks.front(), st.partition_size);
    const std::string part = fmt::format("{}.{}", s, p.table);
    // Every id of the partition must have been drawn: otherwise a producer could still be
    // handed one of its ids after the drop.
    if (last_drawn_id(tx, session_, stream_id_) < p.last_id) {
      return keep(fmt::format("{} can still receive ids", p.table));
    }
    const std::string cutoff = epoch_ms(now - Millis(*st.retention_ms));
    // Cheap first: the row with the highest id is about the newest; only when it is old enough
    // is the partition scanned for its true newest message. An empty partition is dated by the
    // first message after it.
    auto last_row =
        tx.exec_params(fmt::format("SELECT created_at < {} FROM {} ORDER BY id DESC LIMIT 1",
                                   ts_param("$1"), part),
                       cutoff);
    if (!last_row.empty() && !last_row[0][0].as<bool>()) {
      return keep(fmt::format("{} has messages newer than the retention", p.table));
    }
    auto newest = tx.exec_params1(
        fmt::format("SELECT coalesce((SELECT max(created_at) FROM {0}), (SELECT created_at FROM "
                    "{1} WHERE id > $1 ORDER BY id LIMIT 1)) < {2}",
                    part, messages_, ts_param("$2")),
        p.last_id, cutoff);
    if (newest[0].is_null()) return keep(fmt::format("{} has no message to date it", p.table));
    if (!newest[0].as<bool>()) {
      return keep(fmt::format("{} has messages newer than the retention", p.table));
    }
    // Groups that have not committed the partition's last id: they lose what is left of it.
    auto lagging = tx.exec_params(
        fmt::format("SELECT c.group_id, g.name, (SELECT count(*) FROM {0} m WHERE m.id > "
                    "c.committed AND NOT EXISTS (SELECT 1 FROM {1} e WHERE e.group_id = "
                    "c.group_id AND e.message_id = m.id AND e.payload IS NOT NULL)) FROM {2} c "
                    "JOIN {3}.groups g ON g.id = c.group_id WHERE c.committed < $1 ORDER BY "
                    "c.group_id",
                    part, exceptions_, cursors_, s),
        p.last_id);
    if (!lagging.empty() && !st.allow_drop_past_committed) {
      return keep(fmt::format("group '{}' has not committed through id {}",
                              lagging[0][1].as<std::string>(), p.last_id));
    }
    DroppedPartition out;
    out.partition = p;
    for (const auto& row : lagging) {
      GroupLoss loss{row[0].as<int64_t>(), row[2].as<int64_t>()};
      if (loss.lost == 0) continue;
      tx.exec_params(fmt::format("UPDATE {}.groups SET lost_messages = lost_messages + $2, "
                                 "lost_through = GREATEST(coalesce(lost_through, 0), $3), "
                                 "updated_at = now() WHERE id = $1",
                                 s),
                     loss.group_id, loss.lost, p.last_id);
      out.losses.push_back(loss);
    }
    // Dead letters outlive their message: make sure each one carries its payload.
    tx.exec(
        fmt::format("UPDATE {} e SET payload = m.payload, updated_at = now() FROM {} m WHERE "
                    "e.message_id = m.id AND e.status = 'dead' AND e.payload IS NULL",
                    exceptions_, part));
    // Last: DROP takes ACCESS EXCLUSIVE on the parent, waiting (up to lock_timeout) for every
    // open transaction that wrote to or reads the stream, and holding up new ones meanwhile.
    // Taking it last means we hold no row lock a reader of the log could be waiting on, so the
    // claimer (cursor row, then the log) and the retry loop (exception rows, then the log)
    // cannot deadlock with us. Under the default rule no producer of these ids can still be
    // open (every group's committed >= last_id proves them finished); under
    // allow_drop_past_committed a straggler's row committing between the checks above and this
    // lock is dropped with the rest, which is what that setting accepts.
    tx.exec(fmt::format("DROP TABLE {}", part));
    tx.commit();
    return out;
  });
}

}  // namespace sqlstreams::store
