// The resolve side of GroupStore: token-guarded range commits (isolating rows the database
// refuses, resolving in-doubt commits) and lease renewal.
#include <fmt/format.h>

#include <set>

#include "store/core/chaos_plant.hpp"
#include "store/core/pq.hpp"
#include "store/core/sql_array.hpp"
#include "store/core/sql_time.hpp"
#include "store/group_store.hpp"
#include "store/isolate.hpp"

namespace sqlstreams::store {
namespace {

// Statement names (store/core/statement.hpp).
constexpr StatementName kInsertAudit{"insert_audit"};
constexpr StatementName kInsertExceptions{"insert_exceptions"};
constexpr StatementName kXactStatus{"xact_status"};

}  // namespace

void insert_audit(pqxx::transaction_base& tx, const std::string& table, int64_t group_id,
                  const std::string& holder, const std::vector<AuditEntry>& rows) {
  if (rows.empty()) return;
  std::vector<int64_t> ids, attempt, at;
  std::vector<std::string> outcome;
  std::vector<std::optional<std::string>> error;
  for (const auto& a : rows) {
    ids.push_back(a.message_id);
    attempt.push_back(a.attempt);
    at.push_back(a.at.time_since_epoch().count());
    outcome.push_back(a.outcome);
    error.push_back(a.error.empty() ? std::nullopt : std::optional<std::string>(a.error));
  }
  // `at`: when the outcome was decided (0 = unknown: the commit's time).
  exec(tx, kInsertAudit,
       fmt::format("INSERT INTO {} (group_id, message_id, attempt, outcome, error, "
                   "host, at) SELECT $1, u.id, u.att, u.o, u.err, $6, CASE WHEN u.at = "
                   "0 THEN {} ELSE {} END FROM "
                   "unnest($2::bigint[], $3::integer[], $4::text[], $5::text[], "
                   "$7::bigint[]) AS u(id, att, o, err, at)",
                   table, kDbNow, from_epoch_ms("u.at")),
       group_id, int_array(ids), int_array(attempt), text_array(outcome), text_array(error), holder,
       int_array(at));
}

void insert_audit_isolated(pqxx::dbtransaction& tx, const std::string& table, int64_t group_id,
                           const std::string& holder, const std::vector<AuditEntry>& rows,
                           std::vector<RejectedWrite>& rejected) {
  auto all = in_savepoint(tx, [&](auto& t) { insert_audit(t, table, group_id, holder, rows); });
  if (!all) return;
  for (const auto& a : rows) {
    auto refused =
        in_savepoint(tx, [&](auto& t) { insert_audit(t, table, group_id, holder, {a}); });
    if (!refused) continue;
    AuditEntry fixed = a;
    fixed.error = fixed_rejection(refused->sqlstate);
    // An audit row is a record, not an outcome: if even the fixed one is refused, drop it.
    (void)in_savepoint(tx, [&](auto& t) { insert_audit(t, table, group_id, holder, {fixed}); });
    rejected.push_back(
        RejectedWrite{a.message_id, refused->sqlstate, fixed_rejection(refused->sqlstate), true});
  }
}

namespace {

std::set<std::string> token_set(const pqxx::result& r) {
  std::set<std::string> out;
  for (const auto& row : r) out.insert(row[0].as<std::string>());
  return out;
}

// `messages`: the stream's log, from which a row copies the message's metadata (DESIGN §8).
void insert_exceptions(pqxx::transaction_base& tx, const std::string& table,
                       const std::string& messages, int64_t group_id,
                       const std::vector<FailedMessage>& rows) {
  if (rows.empty()) return;
  std::vector<int64_t> ids, attempts, delays, after;
  std::vector<std::string> status;
  std::vector<std::optional<std::string>> error, payload;
  for (const auto& f : rows) {
    ids.push_back(f.message_id);
    status.push_back(f.status == ExceptionStatus::kDead ? "dead" : "ready");
    attempts.push_back(f.attempts);
    delays.push_back(f.delays);
    after.push_back(f.run_after.count());
    error.push_back(f.error);
    payload.push_back(f.payload);
  }
  // A conflict can only be a row `inflight` under a retry lease (the old rows of the span were
  // deleted by the lease statement): its holder writes that message's outcome.
  exec(tx, kInsertExceptions,
       fmt::format("INSERT INTO {0} (group_id, message_id, status, attempts, delays, "
                   "can_run_after, last_error, payload, schema_version, message_key, "
                   "message_created_at) SELECT $1, u.id, u.st, u.att, u.del, "
                   "{2}, u.err, u.p::jsonb, m.schema_version, "
                   "m.message_key, m.created_at FROM unnest($2::bigint[], "
                   "$3::text[], $4::integer[], $5::integer[], $6::bigint[], $7::text[], "
                   "$8::text[]) AS u(id, st, att, del, after, err, p) "
                   "LEFT JOIN {1} m ON m.id = u.id "
                   "ON CONFLICT (group_id, message_id) DO NOTHING",
                   table, messages, db_in("u.after")),
       group_id, int_array(ids), text_array(status), int_array(attempts), int_array(delays),
       int_array(after), text_array(error), text_array(payload));
}

// The exception rows of one range, each refused row replaced by a dead one (DESIGN §7).
void insert_exceptions_isolated(pqxx::dbtransaction& tx, const std::string& table,
                                const std::string& messages, int64_t group_id,
                                const std::vector<FailedMessage>& rows,
                                std::vector<RejectedWrite>& rejected) {
  if (!in_savepoint(tx, [&](auto& t) { insert_exceptions(t, table, messages, group_id, rows); }))
    return;
  for (const auto& f : rows) {
    auto refused =
        in_savepoint(tx, [&](auto& t) { insert_exceptions(t, table, messages, group_id, {f}); });
    if (!refused) continue;
    FailedMessage dead = f;
    dead.status = ExceptionStatus::kDead;
    dead.error = rejection_error(*refused);
    if (in_savepoint(tx,
                     [&](auto& t) { insert_exceptions(t, table, messages, group_id, {dead}); })) {
      dead.error = fixed_rejection(refused->sqlstate);
      dead.payload.reset();
      dead.run_after = Millis(0);
      insert_exceptions(tx, table, messages, group_id,
                        {dead});  // refused too: the commit fails as a whole
    }
    rejected.push_back(RejectedWrite{f.message_id, refused->sqlstate, dead.error, false});
  }
}

}  // namespace

std::vector<bool> GroupStore::commit_ranges(const std::vector<RangeCommit>& ranges,
                                            std::vector<RejectedWrite>* isolate) {
  in_doubt_.reset();
  if (ranges.empty()) return {};
  return guarded(session_, "commit ranges", [&] {
    auto& conn = connection_of(session_);
    pqxx::work tx(conn);
    std::vector<std::string> complete, partial;
    std::vector<int64_t> partial_low;
    for (const auto& r : ranges) {
      if (r.complete) {
        complete.push_back(r.token);
      } else {
        partial.push_back(r.token);
        partial_low.push_back(r.resolved_upto);
      }
    }
    // Each statement takes its leases by token and deletes the old exception rows of the
    // resolved span (a re-delivery after a rewind) except those inflight under a retry lease
    // and those whose message is no longer in the log: retention removed it before the rewound
    // group got back to it, so this range did not deliver it again and its row (a dead letter
    // carrying its payload) is the only record left. (Found by tests/chaos.)
    std::set<std::string> ours;
    std::string xid;
    auto take = [&](const pqxx::result& r) {
      for (const auto& row : r) {
        ours.insert(row[0].as<std::string>());
        xid = row[1].as<std::string>();
      }
    };
    if (!complete.empty()) {
      take(exec_prepared(tx, conn, commit_complete_, group_id_, text_array(complete)));
    }
    if (!partial.empty()) {
      // Shrink to the unresolved rest and make it immediately reclaimable (not a crash).
      take(exec_prepared(tx, conn, commit_partial_, group_id_, text_array(partial),
                         int_array(partial_low)));
    }
    std::vector<FailedMessage> failures;
    std::vector<AuditEntry> audit;
    std::vector<bool> committed;
    for (const auto& r : ranges) {
      bool ok = ours.count(r.token) > 0 || chaos_plant("commit-without-token");  // test builds
      committed.push_back(ok);
      if (!ok) continue;  // lease lost to a reclaim: discard these outcomes
      if (isolate != nullptr) {
        insert_exceptions_isolated(tx, tables_.exceptions, tables_.messages, group_id_, r.failures,
                                   *isolate);
        insert_audit_isolated(tx, tables_.deliveries, group_id_, holder_, r.audit, *isolate);
        continue;
      }
      failures.insert(failures.end(), r.failures.begin(), r.failures.end());
      audit.insert(audit.end(), r.audit.begin(), r.audit.end());
    }
    insert_exceptions(tx, tables_.exceptions, tables_.messages, group_id_, failures);
    insert_audit(tx, tables_.deliveries, group_id_, holder_, audit);
    if (!ours.empty()) in_doubt_ = InDoubtCommit{xid, committed};
    try {
      tx.commit();
    } catch (const pqxx::in_doubt_error&) {
      throw;  // in_doubt_ tells the caller which transaction to ask about
    } catch (...) {
      in_doubt_.reset();
      throw;
    }
    in_doubt_.reset();
    return committed;
  });
}

InDoubtResolution GroupStore::resolve_in_doubt() {
  if (!in_doubt_) return InDoubtResolution::kUnknown;
  auto status = guarded(session_, "resolve in-doubt commit", [&] {
    pqxx::nontransaction tx(connection_of(session_));
    auto row = exec1(tx, kXactStatus, "SELECT pg_xact_status($1::xid8)", in_doubt_->xid);
    return row[0].is_null() ? std::string() : row[0].as<std::string>();
  });
  if (status == "in progress") {
    throw StoreError(StoreError::Kind::kTransient,
                     "resolve in-doubt commit: transaction " + in_doubt_->xid + " still running");
  }
  in_doubt_.reset();
  if (status == "committed") return InDoubtResolution::kCommitted;
  if (status == "aborted") return InDoubtResolution::kAborted;
  return InDoubtResolution::kUnknown;
}

std::vector<std::string> GroupStore::renew_leases(const std::vector<std::string>& tokens,
                                                  Millis lease_ttl) {
  if (tokens.empty()) return {};
  return guarded(session_, "renew leases", [&] {
    auto& conn = connection_of(session_);
    pqxx::nontransaction tx(conn);
    auto kept = token_set(
        exec_prepared(tx, conn, renew_, group_id_, text_array(tokens), ms_param(lease_ttl)));
    std::vector<std::string> lost;
    for (const auto& t : tokens) {
      if (!kept.count(t)) lost.push_back(t);
    }
    return lost;
  });
}

}  // namespace sqlstreams::store
