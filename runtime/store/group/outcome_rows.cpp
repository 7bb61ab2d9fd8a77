// The rows an outcome writes (docs/design.md#retries-exception-rows-and-dead-letters): exception
// rows and audit rows, plainly (one statement each) and isolated (store/group/isolate.hpp: each
// refused row recorded dead instead).
#include "store/group/outcome_rows.hpp"

#include <fmt/format.h>

#include "store/core/pq.hpp"
#include "store/core/sql_array.hpp"
#include "store/core/sql_time.hpp"
#include "store/group/isolate.hpp"

namespace sqlstreams::store {
namespace {

// Statement names (store/core/statement.hpp).
constexpr StatementName kInsertAudit{"insert_audit"};
constexpr StatementName kInsertExceptions{"insert_exceptions"};
constexpr StatementName kUpdateFailures{"update_failures"};

// A row's can_run_after: a parked row is never due (it waits at the due index's end for
// release_parked), any other one `u.after` ms after the database's now.
std::string run_after_sql() {
  return "CASE WHEN u.st = 'parked' THEN 'infinity'::timestamptz ELSE " + db_in("u.after") + " END";
}

// FailedMessages as the array parameters the statements unnest (libpqxx 6.4 binds no
// containers: core/sql_array.hpp).
struct FailureArrays {
  std::vector<int64_t> ids, attempts, delays, after;
  std::vector<std::string> status;
  std::vector<std::optional<std::string>> error, payload, lane_key;
  void add(const FailedMessage& f) {
    ids.push_back(f.message_id);
    status.push_back(f.status == ExceptionStatus::kDead       ? "dead"
                     : f.status == ExceptionStatus::kDeferred ? "deferred"
                     : f.status == ExceptionStatus::kParked   ? "parked"
                                                              : "ready");
    lane_key.push_back(f.lane_key);
    attempts.push_back(f.attempts);
    delays.push_back(f.delays);
    after.push_back(f.run_after.count());
    error.push_back(f.error);
    payload.push_back(f.payload);
  }
};

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

// `messages`: the stream's log, from which a row copies the message's metadata
// (docs/design.md#payload-schema-versions).
void insert_exceptions(pqxx::transaction_base& tx, const std::string& table,
                       const std::string& messages, int64_t group_id,
                       const std::vector<FailedMessage>& rows) {
  if (rows.empty()) return;
  FailureArrays a;
  for (const auto& f : rows) a.add(f);
  // A conflict can only be a row `inflight` under a retry lease (the old rows of the span were
  // deleted by the lease statement): its holder writes that message's outcome.
  exec(tx, kInsertExceptions,
       fmt::format("INSERT INTO {0} (group_id, message_id, status, attempts, delays, "
                   "can_run_after, last_error, payload, schema_version, message_key, "
                   "message_created_at, lane_key) SELECT $1, u.id, u.st, u.att, u.del, "
                   "{2}, u.err, u.p::jsonb, m.schema_version, "
                   "m.message_key, m.created_at, u.lk FROM unnest($2::bigint[], "
                   "$3::text[], $4::integer[], $5::integer[], $6::bigint[], $7::text[], "
                   "$8::text[], $9::text[]) AS u(id, st, att, del, after, err, p, lk) "
                   "LEFT JOIN {1} m ON m.id = u.id "
                   "ON CONFLICT (group_id, message_id) DO NOTHING",
                   table, messages, run_after_sql()),
       group_id, int_array(a.ids), text_array(a.status), int_array(a.attempts), int_array(a.delays),
       int_array(a.after), text_array(a.error), text_array(a.payload), text_array(a.lane_key));
}

// The exception rows of one range, each refused row replaced by a dead one
// (docs/design.md#poison-proof-commits).
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

// Writes failed attempts under their row lease tokens; adds the tokens that matched.
// A row that becomes dead copies the message's metadata from `messages`
// (docs/design.md#payload-schema-versions).
void update_failures(pqxx::transaction_base& tx, const std::string& table,
                     const std::string& messages, int64_t group_id,
                     const std::vector<TokenFailure>& rows, std::set<std::string>& ours) {
  FailureArrays a;
  std::vector<std::string> tok;
  for (const auto& [token, d] : rows) {
    a.add(d);
    tok.push_back(token);
  }
  auto r =
      exec(tx, kUpdateFailures,
           fmt::format("UPDATE {0} e SET status = u.st, attempts = u.att, delays = u.del, "
                       "can_run_after = {2}, last_error = u.err, "
                       "payload = coalesce(u.p::jsonb, e.payload), lease_token = NULL, "
                       "lease_expires_at = NULL, updated_at = now(), "
                       "schema_version = coalesce(e.schema_version, m.schema_version), "
                       "message_key = coalesce(e.message_key, m.message_key), "
                       "message_created_at = coalesce(e.message_created_at, m.created_at), "
                       "lane_key = coalesce(e.lane_key, u.lk) "
                       "FROM unnest($2::bigint[], "
                       "$3::uuid[], $4::text[], $5::integer[], $6::integer[], $7::bigint[], "
                       "$8::text[], $9::text[], $10::text[]) AS u(id, tok, st, att, del, after, "
                       "err, p, lk) "
                       "LEFT JOIN {1} m ON m.id = u.id AND u.p IS NOT NULL "
                       "WHERE e.group_id = $1 AND e.message_id = u.id AND e.lease_token = u.tok "
                       "RETURNING u.tok::text",
                       table, messages, run_after_sql()),
           group_id, int_array(a.ids), text_array(tok), text_array(a.status), int_array(a.attempts),
           int_array(a.delays), int_array(a.after), text_array(a.error), text_array(a.payload),
           text_array(a.lane_key));
  for (const auto& row : r) ours.insert(row[0].as<std::string>());
}

// As update_failures, each refused row written again as dead with the rejection
// (docs/design.md#poison-proof-commits).
void update_failures_isolated(pqxx::dbtransaction& tx, const std::string& table,
                              const std::string& messages, int64_t group_id,
                              const std::vector<TokenFailure>& rows, std::set<std::string>& ours,
                              std::vector<RejectedWrite>& rejected) {
  std::set<std::string> got;
  if (!in_savepoint(tx,
                    [&](auto& t) { update_failures(t, table, messages, group_id, rows, got); })) {
    ours.insert(got.begin(), got.end());
    return;
  }
  for (const auto& row : rows) {
    got.clear();
    auto refused = in_savepoint(
        tx, [&](auto& t) { update_failures(t, table, messages, group_id, {row}, got); });
    if (!refused) {
      ours.insert(got.begin(), got.end());
      continue;
    }
    TokenFailure dead = row;
    dead.failure.status = ExceptionStatus::kDead;
    dead.failure.error = rejection_error(*refused);
    got.clear();
    if (in_savepoint(
            tx, [&](auto& t) { update_failures(t, table, messages, group_id, {dead}, got); })) {
      dead.failure.error = fixed_rejection(refused->sqlstate);
      dead.failure.payload.reset();  // the row keeps the payload it had
      dead.failure.run_after = Millis(0);
      got.clear();
      update_failures(tx, table, messages, group_id, {dead}, got);  // refused too: the commit fails
    }
    ours.insert(got.begin(), got.end());
    if (!got.empty()) {
      rejected.push_back(
          RejectedWrite{row.failure.message_id, refused->sqlstate, dead.failure.error, false});
    }
  }
}

void commit_keeping_doubt(pqxx::dbtransaction& tx, std::optional<InDoubtCommit>& in_doubt) {
  try {
    tx.commit();
  } catch (const pqxx::in_doubt_error&) {
    throw;  // in_doubt tells the caller which transaction to ask about
  } catch (...) {
    in_doubt.reset();
    throw;
  }
  in_doubt.reset();
}

std::vector<std::string> tokens_not_returned(const std::vector<std::string>& sent,
                                             const pqxx::result& returned) {
  std::set<std::string> kept;
  for (const auto& row : returned) kept.insert(row[0].as<std::string>());
  std::vector<std::string> lost;
  for (const auto& t : sent) {
    if (!kept.count(t)) lost.push_back(t);
  }
  return lost;
}

}  // namespace sqlstreams::store
