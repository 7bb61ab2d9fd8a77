// StreamJanitor: raising cursors past dropped ids, the row-level sweep and the audit trim.
#include <fmt/format.h>

#include "store/core/pq.hpp"
#include "store/core/sql_array.hpp"
#include "store/core/sql_time.hpp"
#include "store/fleet/janitor.hpp"
#include "store/fleet/maintenance_pq.hpp"

namespace sqlstreams::store {
namespace {

// Statement names (store/core/statement.hpp).
constexpr StatementName kPartitionSize{"floor_partition_size"};
constexpr StatementName kLockLaggingCursors{"lock_lagging_cursors"};
constexpr StatementName kDropLeasesBelow{"drop_leases_below_floor"};
constexpr StatementName kTrimLeases{"trim_leases_to_floor"};
constexpr StatementName kRaiseCursors{"raise_cursors"};
constexpr StatementName kDropExceptionsBelow{"drop_exceptions_below_floor"};
constexpr StatementName kSweepSettings{"sweep_settings"};
constexpr StatementName kSweepBounds{"sweep_bounds"};
constexpr StatementName kSweep{"sweep"};
constexpr StatementName kTrimAudit{"trim_audit"};
constexpr StatementName kExpireKeys{"expire_idempotency_keys"};

}  // namespace

// Why moving a cursor up to `floor` is safe, fence included (docs/design.md#the-claim-fence):
//  - floor is the last id below the oldest remaining partition, capped at the last id drawn.
//    Partitions are only ever dropped when all their ids were drawn, and ensure_partitions()
//    and the heal step only create partitions for ids not drawn yet, so no id <= floor can
//    ever become visible again: a producer still holding one fails to insert it (a gap).
//  - settled_head means "no invisible id at or below it can still appear". That holds for
//    floor by the point above without any xid proof, so settled_head = GREATEST(settled_head,
//    floor) keeps the fence's promise; it also stays <= the last id drawn, so no claim can
//    ever run ahead of ids that producers have not been handed yet.
//  - claimed and committed may move up to floor: there is nothing left to claim or resolve
//    below it. Leases entirely below it go (a holder's late commit finds no lease: its
//    outcomes are discarded, as for any lost lease); a lease straddling it shrinks to start at
//    floor, so the advancer's LEAST(min lease low, ...) never points below floor again.
//  - A pending observation at or below floor proves nothing new and is cleared.
// The cursor rows are locked first, then leases, then exceptions: the same order the claimer
// (cursor, then lease) and the committer (lease, then exceptions) take them, and this
// transaction never touches the log, so none of them can deadlock with it.
std::vector<CursorRaise> StreamJanitor::raise_floor(const WorkerFence* fence,
                                                    int64_t* exceptions_removed) {
  return guarded(session_, "raise cursor floor", [&] {
    const std::string& s = session_.schema_sql();
    pqxx::work tx(connection_of(session_));
    check_fence(tx, session_, fence, "raise cursor floor");
    auto ks = partition_indexes(tx, session_, stream_id_);
    std::vector<CursorRaise> raised;
    if (ks.empty()) {
      tx.commit();
      return raised;
    }
    const int64_t size =
        exec1(tx, kPartitionSize,
              fmt::format("SELECT partition_size FROM {}.streams WHERE id = $1", s), stream_id_)[0]
            .as<int64_t>();
    const int64_t floor = std::min(ks.front() * size, last_drawn_id(tx, session_, stream_id_));
    if (floor <= 0) {
      tx.commit();
      return raised;
    }
    auto rows = exec(tx, kLockLaggingCursors,
                     fmt::format("SELECT group_id, committed FROM {} WHERE committed < "
                                 "$1 ORDER BY group_id FOR UPDATE",
                                 tables_.cursors),
                     floor);
    std::vector<int64_t> groups;
    for (const auto& row : rows) {
      groups.push_back(row[0].as<int64_t>());
      raised.push_back({row[0].as<int64_t>(), row[1].as<int64_t>(), floor});
    }
    if (!groups.empty()) {
      const std::string ids = int_array(groups);
      exec(tx, kDropLeasesBelow,
           fmt::format("DELETE FROM {} WHERE group_id = ANY($1::bigint[]) AND high <= "
                       "$2",
                       tables_.leases),
           ids, floor);
      exec(tx, kTrimLeases,
           fmt::format("UPDATE {} SET low = $2 WHERE group_id = ANY($1::bigint[]) AND "
                       "low < $2",
                       tables_.leases),
           ids, floor);
      exec(tx, kRaiseCursors,
           fmt::format("UPDATE {} SET claimed = GREATEST(claimed, $2), committed = "
                       "GREATEST(committed, $2), settled_head = GREATEST(settled_head, $2), "
                       "pending_xid = CASE WHEN pending_head <= $2 THEN NULL ELSE pending_xid END, "
                       "pending_head = CASE WHEN pending_head <= $2 THEN NULL ELSE pending_head "
                       "END WHERE group_id = ANY($1::bigint[])",
                       tables_.cursors),
           ids, floor);
    }
    // Exceptions that are not dead go with their message; a row that kept a payload (a dead
    // letter sent back for a retry) can still run without its log row, so it stays.
    auto gone = exec(tx, kDropExceptionsBelow,
                     fmt::format("DELETE FROM {} WHERE message_id <= $1 AND status <> "
                                 "'dead' AND payload IS NULL",
                                 tables_.exceptions),
                     floor);
    if (exceptions_removed) *exceptions_removed += static_cast<int64_t>(gone.affected_rows());
    tx.commit();
    return raised;
  });
}

int64_t StreamJanitor::sweep_batch(const JanitorSettings& settings, const WorkerFence* fence,
                                   std::vector<GroupLoss>* losses) {
  return guarded(session_, "sweep", [&]() -> int64_t {
    const std::string& s = session_.schema_sql();
    pqxx::work tx(connection_of(session_));
    check_fence(tx, session_, fence, "sweep");
    auto st = exec1(
        tx, kSweepSettings,
        fmt::format("SELECT partition_size, {}, allow_drop_past_committed FROM {}.streams WHERE "
                    "id = $1",
                    to_epoch_ms("retention"), s),
        stream_id_);
    auto ks = partition_indexes(tx, session_, stream_id_);
    if (st[1].is_null() || ks.empty()) return 0;
    const int64_t size = st[0].as<int64_t>();
    const bool allow = st[2].as<bool>();
    const std::string part = tables_.partition(ks.front());
    // The head row stays (it keeps max(id) meaningful); without allow_drop_past_committed
    // nothing a group has not committed goes.
    auto bounds = exec(tx, kSweepBounds,
                       fmt::format("SELECT (SELECT coalesce(max(id), 0) FROM {}), (SELECT "
                                   "min(committed) FROM {})",
                                   tables_.messages, tables_.cursors));
    int64_t limit = bounds[0][0].as<int64_t>() - 1;
    if (!allow && !bounds[0][1].is_null()) limit = std::min(limit, bounds[0][1].as<int64_t>());
    limit = std::min(limit, (ks.front() + 1) * size);
    if (limit <= ks.front() * size) return 0;
    const std::string retention = ms_param(Millis(st[1].as<int64_t>()));  // age, database clock
    // The oldest rows by id, deleted when expired: created_at follows id closely (Rule 2), and
    // scanning a bounded prefix keeps each batch cheap. Dead letters get their payload first;
    // other exceptions go with their message; a lagging group's loss is counted.
    auto r = exec(
        tx, kSweep,
        fmt::format(
            "WITH c AS (SELECT id, created_at FROM {0} WHERE id <= $1 ORDER BY id LIMIT $2), "
            "d AS (DELETE FROM {0} m USING c WHERE m.id = c.id AND c.created_at < {5} "
            "RETURNING m.id, m.payload), "
            "dead AS (UPDATE {1} e SET payload = d.payload, updated_at = now() FROM d WHERE "
            "e.message_id = d.id AND e.status = 'dead' AND e.payload IS NULL RETURNING 1), "
            "gone AS (DELETE FROM {1} e USING d WHERE e.message_id = d.id AND e.status <> 'dead' "
            "AND e.payload IS NULL RETURNING 1), "
            "loss AS (SELECT c.group_id, count(*) AS n, max(d.id) AS through FROM {2} c JOIN d ON "
            "d.id > c.committed WHERE NOT EXISTS (SELECT 1 FROM {1} e WHERE e.group_id = "
            "c.group_id AND e.message_id = d.id AND e.payload IS NOT NULL) GROUP BY c.group_id), "
            "upd AS (UPDATE {3}.groups g SET lost_messages = g.lost_messages + loss.n, "
            "lost_through = GREATEST(coalesce(g.lost_through, 0), loss.through) FROM loss WHERE "
            "g.id = loss.group_id RETURNING g.id, loss.n) "
            "SELECT (SELECT count(*) FROM d), (SELECT count(*) FROM dead) + (SELECT count(*) FROM "
            "gone), coalesce((SELECT {4} FROM upd), '{{}}')",
            part, tables_.exceptions, tables_.cursors, s, "array_agg(id || ':' || n)",
            db_ago("$3")),
        limit, settings.delete_batch, retention);
    tx.commit();
    if (losses) {
      // "{7:3,9:1}" → group 7 lost 3, group 9 lost 1.
      std::string agg = r[0][2].as<std::string>();
      for (size_t at = 1; at < agg.size();) {
        size_t colon = agg.find(':', at), end = agg.find_first_of(",}", at);
        if (colon == std::string::npos || end == std::string::npos || colon > end) break;
        losses->push_back({std::stoll(agg.substr(at, colon - at)),
                           std::stoll(agg.substr(colon + 1, end - colon - 1))});
        at = end + 1;
      }
    }
    return r[0][0].as<int64_t>();
  });
}

int64_t StreamJanitor::trim_audit_batch(const JanitorSettings& settings, const WorkerFence* fence) {
  if (!settings.audit_retention) return 0;
  return guarded(session_, "trim audit", [&] {
    pqxx::work tx(connection_of(session_));
    check_fence(tx, session_, fence, "trim audit");
    auto r = exec1(
        tx, kTrimAudit,
        fmt::format("WITH c AS (SELECT id, at FROM {0} ORDER BY id LIMIT $1), d AS (DELETE FROM "
                    "{0} a USING c WHERE a.id = c.id AND c.at < {1} RETURNING 1) SELECT count(*) "
                    "FROM d",
                    tables_.deliveries, db_ago("$2")),
        settings.delete_batch, ms_param(*settings.audit_retention));
    tx.commit();
    return r[0].as<int64_t>();
  });
}

// Keys past the window, a bounded batch: the BRIN index on created_at finds the old rows (they
// arrive in time order). The DELETE re-checks the age on the row it locks, so a key a producer
// took over meanwhile (a fresh created_at, V011) stays. A producer waiting on a row this deletes
// inserts its key once this commits.
int64_t StreamJanitor::expire_keys_batch(const JanitorSettings& settings,
                                         const WorkerFence* fence) {
  return guarded(session_, "expire idempotency keys", [&] {
    const std::string& s = session_.schema_sql();
    pqxx::work tx(connection_of(session_));
    check_fence(tx, session_, fence, "expire idempotency keys");
    auto r = exec1(
        tx, kExpireKeys,
        fmt::format("WITH w AS (SELECT statement_timestamp() - idempotency_window AS bound FROM "
                    "{0}.streams WHERE id = $1), d AS (DELETE FROM {0}.idempotency_keys k "
                    "USING w WHERE k.stream_id = $1 AND k.created_at <= w.bound AND k.ctid = "
                    "ANY (ARRAY(SELECT c.ctid FROM {0}.idempotency_keys c, w WHERE c.stream_id = "
                    "$1 AND c.created_at <= w.bound LIMIT $2)) RETURNING 1) SELECT count(*) FROM d",
                    s),
        stream_id_, settings.delete_batch);
    tx.commit();
    return r[0].as<int64_t>();
  });
}

}  // namespace sqlstreams::store
