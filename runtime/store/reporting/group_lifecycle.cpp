#include "store/reporting/group_lifecycle.hpp"

#include <fmt/format.h>

#include "store/core/pq.hpp"
#include "store/core/sql_time.hpp"
#include "store/core/stream_tables.hpp"

namespace sqlstreams::store {
namespace {

// Statement names (store/core/statement.hpp).
constexpr StatementName kFootprint{"group_footprint"};
constexpr StatementName kGroupState{"group_state"};
constexpr StatementName kPause{"pause"};
constexpr StatementName kResume{"resume"};
constexpr StatementName kDropGroup{"drop_group"};

[[noreturn]] void gone(const GroupRef& g, const char* doing) {
  throw StoreError(StoreError::Kind::kRejected,
                   fmt::format("cannot {} group '{}' of stream '{}': it no longer exists (dropped "
                               "meanwhile)",
                               doing, g.name, g.stream));
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

// pause/resume/drop run the SECURITY DEFINER functions of V008, which change the group and
// write its group_actions row in one transaction (an operator has no table rights for them).
PauseResult pause_group(Session& session, const GroupRef& group, const std::string& actor) {
  return guarded(session, "pause group", [&] {
    pqxx::work tx(connection_of(session));
    auto r = exec1(tx, kPause,
                   fmt::format("SELECT present, changed, {}, coalesce(paused_by, '') FROM "
                               "{}.pause_group($1, $2)",
                               to_epoch_ms("paused_at"), session.schema_sql()),
                   group.id, actor);
    if (!r[0].as<bool>()) gone(group, "pause");
    tx.commit();
    PauseResult out;
    out.changed = r[1].as<bool>();
    out.paused_at = time_from_epoch_ms(r[2].as<int64_t>());
    out.paused_by = r[3].as<std::string>();
    return out;
  });
}

PauseResult resume_group(Session& session, const GroupRef& group, const std::string& actor) {
  return guarded(session, "resume group", [&] {
    pqxx::work tx(connection_of(session));
    auto r = exec1(
        tx, kResume,
        fmt::format("SELECT present, changed FROM {}.resume_group($1, $2)", session.schema_sql()),
        group.id, actor);
    if (!r[0].as<bool>()) gone(group, "resume");
    tx.commit();
    PauseResult out;
    out.changed = r[1].as<bool>();
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
    pqxx::work tx(connection_of(session));
    auto r = exec1(tx, kDropGroup,
                   fmt::format("SELECT present, claimed, committed, leases, ready, dead, audit_id, "
                               "db_user, application_name, client_addr FROM {}.drop_group($1, $2)",
                               session.schema_sql()),
                   group.id, actor);
    if (!r[0].as<bool>()) gone(group, "drop");
    tx.commit();
    DropResult out;
    out.removed.claimed = r[1].as<int64_t>();
    out.removed.committed = r[2].as<int64_t>();
    out.removed.leases = r[3].as<int64_t>();
    out.removed.ready = r[4].as<int64_t>();
    out.removed.dead = r[5].as<int64_t>();
    out.audit_id = r[6].as<int64_t>();
    out.db_user = r[7].as<std::string>();
    out.application_name = r[8].as<std::string>();
    out.client_addr = r[9].as<std::string>();
    return out;
  });
}

}  // namespace sqlstreams::store
