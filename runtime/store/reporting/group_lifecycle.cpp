#include "store/reporting/group_lifecycle.hpp"

#include <fmt/format.h>

#include "store/core/pq.hpp"
#include "store/core/sql_time.hpp"
#include "store/core/stream_tables.hpp"

namespace sqlstreams::store {
namespace {

// Statement names (store/core/statement.hpp).
constexpr StatementName kGroupAction{"group_action"};
constexpr StatementName kFootprint{"group_footprint"};
constexpr StatementName kGroupState{"group_state"};
constexpr StatementName kPauseRead{"pause_read"};
constexpr StatementName kPause{"pause"};
constexpr StatementName kResumeRead{"resume_read"};
constexpr StatementName kResume{"resume"};
constexpr StatementName kDropLockGroup{"drop_lock_group"};
constexpr StatementName kDropCursor{"drop_cursor"};
constexpr StatementName kDropLeases{"drop_leases"};
constexpr StatementName kDropExceptions{"drop_exceptions"};
constexpr StatementName kDropAdvancer{"drop_advancer"};
constexpr StatementName kDropGroup{"drop_group"};

[[noreturn]] void gone(const GroupRef& g, const char* doing) {
  throw StoreError(StoreError::Kind::kRejected,
                   fmt::format("cannot {} group '{}' of stream '{}': it no longer exists (dropped "
                               "meanwhile)",
                               doing, g.name, g.stream));
}

// The group_actions row; returns (id, database role, application, client address).
pqxx::row audit(pqxx::transaction_base& tx, const Session& s, const char* action, const GroupRef& g,
                const std::string& actor, const std::optional<std::string>& detail) {
  return exec1(
      tx, kGroupAction,
      fmt::format("INSERT INTO {}.group_actions (action, stream, group_name, group_id, actor, "
                  "detail) VALUES ($1, $2, $3, $4, $5, $6::jsonb) RETURNING id, db_user, "
                  "coalesce(application_name, ''), coalesce(client_addr, 'local')",
                  s.schema_sql()),
      action, g.stream, g.name, g.id, actor, nullable(detail));
}

GroupFootprint footprint(pqxx::transaction_base& tx, const Session& session, const GroupRef& g) {
  const StreamTables t(session.schema_sql(), g.stream_id);
  auto r = exec1(tx, kFootprint,
                 fmt::format("SELECT coalesce((SELECT claimed FROM {0} WHERE group_id = $1), 0), "
                             "coalesce((SELECT committed FROM {0} WHERE group_id = $1), 0), "
                             "(SELECT count(*) FROM {1} WHERE group_id = $1), "
                             "(SELECT count(*) FROM {2} WHERE group_id = $1 AND status <> "
                             "'dead'), "
                             "(SELECT count(*) FROM {2} WHERE group_id = $1 AND status = "
                             "'dead')",
                             t.cursors, t.leases, t.exceptions),
                 g.id);
  return GroupFootprint{r[0].as<int64_t>(), r[1].as<int64_t>(), r[2].as<int64_t>(),
                        r[3].as<int64_t>(), r[4].as<int64_t>()};
}

}  // namespace

GroupState read_group_state(Session& session, int64_t group_id) {
  return guarded(session, "read group state", [&] {
    pqxx::nontransaction tx(connection_of(session));
    auto r =
        exec(tx, kGroupState,
             fmt::format("SELECT paused_at IS NOT NULL, coalesce(paused_by, '') FROM {}.groups "
                         "WHERE id = $1",
                         session.schema_sql()),
             group_id);
    GroupState st;
    if (r.empty()) {
      st.kind = GroupState::Kind::kGone;
    } else if (r[0][0].as<bool>()) {
      st.kind = GroupState::Kind::kPaused;
      st.paused_by = r[0][1].as<std::string>();
    }
    return st;
  });
}

PauseResult pause_group(Session& session, const GroupRef& group, const std::string& actor) {
  return guarded(session, "pause group", [&] {
    const std::string& s = session.schema_sql();
    pqxx::work tx(connection_of(session));
    auto row =
        exec(tx, kPauseRead,
             fmt::format("SELECT paused_at IS NOT NULL, {}, coalesce(paused_by, '') FROM {}.groups "
                         "WHERE id = $1 FOR UPDATE",
                         to_epoch_ms("paused_at"), s),
             group.id);
    if (row.empty()) gone(group, "pause");
    PauseResult out;
    if (row[0][0].as<bool>()) {
      out.paused_at = time_from_epoch_ms(row[0][1].as<int64_t>());
      out.paused_by = row[0][2].as<std::string>();
      tx.commit();
      return out;
    }
    auto set =
        exec1(tx, kPause,
              fmt::format("UPDATE {}.groups SET paused_at = {}, paused_by = $2, updated_at = now() "
                          "WHERE id = $1 RETURNING {}",
                          s, kDbNow, to_epoch_ms("paused_at")),
              group.id, actor);
    out.changed = true;
    out.paused_at = time_from_epoch_ms(set[0].as<int64_t>());
    out.paused_by = actor;
    audit(tx, session, "pause", group, actor, std::nullopt);
    tx.commit();
    return out;
  });
}

PauseResult resume_group(Session& session, const GroupRef& group, const std::string& actor) {
  return guarded(session, "resume group", [&] {
    const std::string& s = session.schema_sql();
    pqxx::work tx(connection_of(session));
    auto row =
        exec(tx, kResumeRead,
             fmt::format("SELECT paused_at IS NOT NULL FROM {}.groups WHERE id = $1 FOR UPDATE", s),
             group.id);
    if (row.empty()) gone(group, "resume");
    PauseResult out;
    if (!row[0][0].as<bool>()) {
      tx.commit();
      return out;
    }
    exec(tx, kResume,
         fmt::format("UPDATE {}.groups SET paused_at = NULL, paused_by = NULL, "
                     "updated_at = now() WHERE id = $1",
                     s),
         group.id);
    out.changed = true;
    audit(tx, session, "resume", group, actor, std::nullopt);
    tx.commit();
    return out;
  });
}

GroupFootprint group_footprint(Session& session, const GroupRef& group) {
  return guarded(session, "read group footprint", [&] {
    pqxx::read_transaction tx(connection_of(session));
    return footprint(tx, session, group);
  });
}

DropResult drop_group(Session& session, const GroupRef& group, const std::string& actor) {
  return guarded(session, "drop group", [&] {
    const std::string& s = session.schema_sql();
    const StreamTables t(s, group.stream_id);
    pqxx::work tx(connection_of(session));
    // The group row first (by id: a group dropped and declared again has a new id), then the
    // cursor row, which every claim locks: a claim in flight commits its lease before the
    // leases are deleted below (each statement sees what committed before it).
    if (exec(tx, kDropLockGroup, fmt::format("SELECT 1 FROM {}.groups WHERE id = $1 FOR UPDATE", s),
             group.id)
            .empty()) {
      gone(group, "drop");
    }
    DropResult out;
    auto cur = exec(
        tx, kDropCursor,
        fmt::format("DELETE FROM {} WHERE group_id = $1 RETURNING claimed, committed", t.cursors),
        group.id);
    if (!cur.empty()) {
      out.removed.claimed = cur[0][0].as<int64_t>();
      out.removed.committed = cur[0][1].as<int64_t>();
    }
    out.removed.leases =
        exec(tx, kDropLeases, fmt::format("DELETE FROM {} WHERE group_id = $1", t.leases), group.id)
            .affected_rows();
    auto ex = exec1(
        tx, kDropExceptions,
        fmt::format("WITH d AS (DELETE FROM {} WHERE group_id = $1 RETURNING "
                    "status) SELECT count(*) FILTER (WHERE status <> 'dead'), count(*) FILTER "
                    "(WHERE status = 'dead') FROM d",
                    t.exceptions),
        group.id);
    out.removed.ready = ex[0].as<int64_t>();
    out.removed.dead = ex[1].as<int64_t>();
    exec(
        tx, kDropAdvancer,
        fmt::format("DELETE FROM {}.workers WHERE kind = 'advancer' AND owner = 'group:' || $1", s),
        group.id);
    const auto& r = out.removed;
    auto who = audit(tx, session, "drop", group, actor,
                     fmt::format(R"({{"claimed": {}, "committed": {}, "leases_removed": {}, )"
                                 R"("retries_removed": {}, "dead_letters_removed": {}}})",
                                 r.claimed, r.committed, r.leases, r.ready, r.dead));
    out.audit_id = who[0].as<int64_t>();
    out.db_user = who[1].as<std::string>();
    out.application_name = who[2].as<std::string>();
    out.client_addr = who[3].as<std::string>();
    exec(tx, kDropGroup, fmt::format("DELETE FROM {}.groups WHERE id = $1", s), group.id);
    tx.commit();
    return out;
  });
}

}  // namespace sqlstreams::store
