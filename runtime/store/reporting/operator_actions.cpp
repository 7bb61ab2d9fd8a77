#include "store/reporting/operator_actions.hpp"

#include <fmt/format.h>

#include "store/core/pq.hpp"
#include "store/core/sql_array.hpp"
#include "store/core/sql_time.hpp"
#include "store/core/stream_tables.hpp"

namespace sqlstreams::store {
namespace {

// Statement names (store/core/statement.hpp).
constexpr StatementName kDeadAudit{"dead_letter_audit"};
constexpr StatementName kListDead{"list_dead"};
constexpr StatementName kFindDead{"find_dead"};
constexpr StatementName kDeliveryHistory{"delivery_history"};
constexpr StatementName kRetryDead{"retry_dead"};
constexpr StatementName kDiscardDead{"discard_dead"};
constexpr StatementName kRewindLockCursor{"rewind_lock_cursor"};
constexpr StatementName kRewindPosition{"rewind_position"};
constexpr StatementName kRewindCursor{"rewind_cursor"};
constexpr StatementName kRewindAudit{"rewind_audit"};

// Refuses filters that could only mean a mistake: a negative id used to read as "no filter".
void check_filter(const DeadFilter& f) {
  auto bad = [](const std::string& what) { throw StoreError(StoreError::Kind::kRejected, what); };
  if (f.from_id && *f.from_id < 0) {
    bad(fmt::format("dead letter filter: from id must be >= 0 (got {})", *f.from_id));
  }
  if (f.to_id && *f.to_id < 0) {
    bad(fmt::format("dead letter filter: to id must be >= 0 (got {})", *f.to_id));
  }
  if (f.error_contains && f.error_contains->empty()) {
    bad("dead letter filter: the error text is empty (it would match every dead letter); "
        "leave the error filter out to mean all");
  }
  if (f.older_than && f.older_than->count() < 0) {
    bad(fmt::format("dead letter filter: older-than must be >= 0 (got {} ms)",
                    f.older_than->count()));
  }
  if (f.limit < 1) bad(fmt::format("dead letter filter: limit must be >= 1 (got {})", f.limit));
}

// The WHERE clause for a filter; parameters $1 group, $2 error, $3 from, $4 to, $5
// older_than(ms, against the database's clock); the statement's LIMIT is $6. The error text is
// a literal, case-insensitive substring (strpos, not LIKE: `_`, `%` and `\` match only
// themselves).
std::string filter_sql() {
  return fmt::format(
      "group_id = $1 AND status = 'dead' AND ($2::text IS NULL OR strpos(lower(last_error), "
      "lower($2::text)) > 0) AND ($3::bigint IS NULL OR message_id >= $3) AND ($4::bigint IS "
      "NULL OR message_id <= $4) AND ($5::bigint IS NULL OR updated_at <= {})",
      db_ago("$5"));
}

std::optional<std::string> opt_num(const std::optional<int64_t>& v) {
  return v ? std::optional<std::string>(std::to_string(*v)) : std::nullopt;
}

// Runs a statement whose WHERE is filter_sql() (its parameters $1 to $6).
pqxx::result exec_filtered(pqxx::transaction_base& tx, StatementName name, const std::string& sql,
                           const GroupRef& g, const DeadFilter& f) {
  return exec(tx, name, sql, g.id, nullable(f.error_contains), nullable(opt_num(f.from_id)),
              nullable(opt_num(f.to_id)), nullable(ms_param(f.older_than)), f.limit);
}

// The first column of every row: the message ids a statement returned.
std::vector<int64_t> ids_of(const pqxx::result& rows) {
  std::vector<int64_t> ids;
  for (const auto& r : rows) ids.push_back(r[0].as<int64_t>());
  return ids;
}

StreamTables tables_of(const Session& s, const GroupRef& g) {
  return StreamTables(s.schema_sql(), g.stream_id);
}

void audit(pqxx::transaction_base& tx, const Session& s, const GroupRef& g,
           const std::vector<int64_t>& ids, const std::string& outcome, const std::string& note,
           const std::string& actor) {
  if (ids.empty()) return;
  exec(tx, kDeadAudit,
       fmt::format("INSERT INTO {} (group_id, message_id, attempt, "
                   "outcome, error, host) SELECT $1, id, 0, $3, $4, $5 FROM "
                   "unnest($2::bigint[]) AS id",
                   tables_of(s, g).deliveries),
       g.id, int_array(ids), outcome, note, actor);
}

DeadLetter dead_from_row(const pqxx::row& row) {
  DeadLetter d;
  d.message_id = row[0].as<int64_t>();
  d.attempts = row[1].as<int32_t>();
  d.last_error = row[2].is_null() ? "" : row[2].as<std::string>();
  d.died_at_unix_ms = row[3].as<int64_t>();
  if (!row[4].is_null()) d.payload = row[4].as<std::string>();
  d.message_retained = row[5].as<bool>();
  d.payload_bytes = row[6].is_null() ? 0 : row[6].as<int64_t>();
  return d;
}

// `expr`, or its first `chars` characters (0: whole).
std::string first_chars(const std::string& expr, int32_t chars) {
  return chars > 0 ? fmt::format("left({}, {})", expr, chars) : expr;
}

std::string dead_select(const Session& s, const GroupRef& g, const Preview& p = {}) {
  return fmt::format(
      "SELECT e.message_id, e.attempts, {}, {}, {}, EXISTS (SELECT 1 "
      "FROM {} m WHERE m.id = e.message_id), octet_length(e.payload::text) FROM {} e",
      first_chars("e.last_error", p.error_chars), to_epoch_ms("e.updated_at"),
      first_chars("e.payload::text", p.payload_chars), tables_of(s, g).messages,
      tables_of(s, g).exceptions);
}

}  // namespace

std::vector<DeadLetter> list_dead(Session& session, const GroupRef& group, const DeadFilter& f,
                                  const Preview& preview) {
  return guarded(session, "list dead letters", [&] {
    check_filter(f);
    pqxx::read_transaction tx(connection_of(session));
    auto rows = exec_filtered(tx, kListDead,
                              fmt::format("{} WHERE {} ORDER BY e.message_id LIMIT $6",
                                          dead_select(session, group, preview), filter_sql()),
                              group, f);
    std::vector<DeadLetter> out;
    for (const auto& row : rows) out.push_back(dead_from_row(row));
    return out;
  });
}

std::optional<DeadLetter> find_dead(Session& session, const GroupRef& group, int64_t message_id) {
  return guarded(session, "show dead letter", [&]() -> std::optional<DeadLetter> {
    pqxx::read_transaction tx(connection_of(session));
    auto rows = exec(tx, kFindDead,
                     fmt::format("{} WHERE e.group_id = $1 AND e.message_id = $2 AND "
                                 "e.status = 'dead'",
                                 dead_select(session, group)),
                     group.id, message_id);
    if (rows.empty()) return std::nullopt;
    return dead_from_row(rows[0]);
  });
}

std::vector<DeliveryRecord> delivery_history(Session& session, const GroupRef& group,
                                             int64_t message_id, const Preview& preview) {
  return guarded(session, "delivery history", [&] {
    pqxx::read_transaction tx(connection_of(session));
    // The newest `history_rows` (all without), returned oldest first.
    auto rows =
        exec(tx, kDeliveryHistory,
             fmt::format("SELECT * FROM (SELECT id, attempt, outcome, coalesce({}, ''), "
                         "coalesce(host, ''), {} FROM {} WHERE group_id = $1 AND message_id = $2 "
                         "ORDER BY id DESC LIMIT $3::bigint) h ORDER BY id",
                         first_chars("error", preview.error_chars), to_epoch_ms("at"),
                         tables_of(session, group).deliveries),
             group.id, message_id,
             nullable(preview.history_rows > 0
                          ? std::optional<std::string>(std::to_string(preview.history_rows))
                          : std::nullopt));
    std::vector<DeliveryRecord> out;
    for (const auto& r : rows) {
      out.push_back({r[1].as<int32_t>(), r[2].as<std::string>(), r[3].as<std::string>(),
                     r[4].as<std::string>(), r[5].as<int64_t>()});
    }
    return out;
  });
}

std::vector<int64_t> retry_dead(Session& session, const GroupRef& group, const DeadFilter& f,
                                const std::string& actor) {
  return guarded(session, "retry dead letters", [&] {
    check_filter(f);
    pqxx::work tx(connection_of(session));
    // `status = 'dead'` again on the row being changed: the subquery's snapshot may be older
    // than a concurrent change (a claim made it `inflight`), and only the outer WHERE is
    // re-checked against the row's newest version.
    auto rows = exec_filtered(
        tx, kRetryDead,
        fmt::format("UPDATE {0} SET status = 'ready', attempts = 0, delays = 0, "
                    "can_run_after = {1}, lease_token = NULL, "
                    "lease_expires_at = NULL, updated_at = now() WHERE message_id IN (SELECT "
                    "message_id FROM {0} WHERE {2} ORDER BY message_id LIMIT $6) AND "
                    "group_id = $1 AND status = 'dead' RETURNING message_id",
                    tables_of(session, group).exceptions, kDbNow, filter_sql()),
        group, f);
    const std::vector<int64_t> ids = ids_of(rows);
    audit(tx, session, group, ids, "operator-retry", "sent back to ready with a fresh budget",
          actor);
    tx.commit();
    return ids;
  });
}

std::vector<int64_t> discard_dead(Session& session, const GroupRef& group, const DeadFilter& f,
                                  const std::string& actor) {
  return guarded(session, "discard dead letters", [&] {
    check_filter(f);
    pqxx::work tx(connection_of(session));
    auto rows = exec_filtered(
        tx, kDiscardDead,
        fmt::format("DELETE FROM {0} WHERE message_id IN (SELECT message_id FROM "
                    "{0} WHERE {1} ORDER BY message_id LIMIT $6) AND group_id = $1 AND "
                    "status = 'dead' RETURNING message_id",
                    tables_of(session, group).exceptions, filter_sql()),
        group, f);
    const std::vector<int64_t> ids = ids_of(rows);
    audit(tx, session, group, ids, "operator-discard", "dead letter discarded", actor);
    tx.commit();
    return ids;
  });
}

RewindResult rewind_group(Session& session, const GroupRef& group, std::optional<int64_t> to_id,
                          std::optional<SysTime> to_time, const std::string& actor) {
  return guarded(session, "rewind group", [&] {
    const StreamTables t = tables_of(session, group);
    pqxx::work tx(connection_of(session));
    auto cur = exec1(tx, kRewindLockCursor,
                     fmt::format("SELECT claimed, committed FROM {} WHERE "
                                 "group_id = $1 FOR UPDATE",
                                 t.cursors),
                     group.id);
    if (to_id && *to_id < 0) {
      throw StoreError(StoreError::Kind::kRejected,
                       fmt::format("cannot rewind group '{}' to {}: positions are >= 0 (0 "
                                   "re-delivers the whole retained log)",
                                   group.name, *to_id));
    }
    RewindResult r;
    r.claimed_before = cur[0].as<int64_t>();
    r.committed_before = cur[1].as<int64_t>();
    if (to_id) {
      r.position = *to_id;
    } else {
      r.position =
          exec1(tx, kRewindPosition,
                fmt::format("SELECT coalesce((SELECT min(id) - 1 FROM {0} WHERE created_at "
                            ">= {1}), (SELECT coalesce(max(id), 0) FROM {0}))",
                            t.messages, from_epoch_ms("$1")),
                epoch_ms_param(*to_time))[0]
              .as<int64_t>();
    }
    if (r.position > r.claimed_before) {
      throw StoreError(StoreError::Kind::kRejected,
                       fmt::format("cannot rewind group '{}' forward to {}: it has only claimed "
                                   "up to {} (rewind re-delivers history; it never skips)",
                                   group.name, r.position, r.claimed_before));
    }
    // settled_head stays: it is a proven bound and still true. The generation bump makes an
    // advancer that read its target before this rewind write nothing (DESIGN §6.5).
    exec(tx, kRewindCursor,
         fmt::format("UPDATE {} SET claimed = $2, committed = LEAST(committed, "
                     "$2), generation = generation + 1 WHERE group_id = $1",
                     t.cursors),
         group.id, r.position);
    exec(tx, kRewindAudit,
         fmt::format("INSERT INTO {} (group_id, message_id, attempt, "
                     "outcome, error, host) VALUES ($1, $2, 0, 'operator-rewind', $3, $4)",
                     t.deliveries),
         group.id, r.position,
         fmt::format("rewound from claimed {} / committed {} to {}", r.claimed_before,
                     r.committed_before, r.position),
         actor);
    tx.commit();
    return r;
  });
}

}  // namespace sqlstreams::store
