// The resolve side of GroupStore: token-guarded range commits, lease renewal and hand-back.
#include <fmt/format.h>

#include <set>

#include "store/group_store.hpp"
#include "store/pq.hpp"
#include "store/sql_array.hpp"

namespace sqlstreams::store {
namespace {

std::set<std::string> token_set(const pqxx::result& r) {
  std::set<std::string> out;
  for (const auto& row : r) out.insert(row[0].as<std::string>());
  return out;
}

}  // namespace

std::vector<bool> GroupStore::commit_ranges(const std::vector<RangeCommit>& ranges) {
  if (ranges.empty()) return {};
  return guarded(session_, "commit ranges", [&] {
    pqxx::work tx(connection_of(session_));
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
    std::set<std::string> ours;
    if (!complete.empty()) {
      ours = token_set(tx.exec_params(
          fmt::format("DELETE FROM {} WHERE group_id = $1 AND token = ANY($2::uuid[]) RETURNING "
                      "token::text",
                      leases_),
          group_id_, text_array(complete)));
    }
    if (!partial.empty()) {
      // Shrink to the unresolved rest and make it immediately reclaimable (not a crash).
      auto kept = token_set(tx.exec_params(
          fmt::format(
              "UPDATE {} l SET low = p.low, expires_at = '-infinity' FROM unnest($2::uuid[], "
              "$3::bigint[]) AS p(token, low) WHERE l.group_id = $1 AND l.token = p.token "
              "RETURNING l.token::text",
              leases_),
          group_id_, text_array(partial), int_array(partial_low)));
      ours.insert(kept.begin(), kept.end());
    }
    std::vector<int64_t> ids, ex_attempts, ex_delays, ex_after;
    std::vector<std::string> ex_status;
    std::vector<std::optional<std::string>> ex_error, ex_payload;
    std::vector<int64_t> au_ids, au_attempt, au_at;
    std::vector<std::string> au_outcome;
    std::vector<std::optional<std::string>> au_error;
    std::vector<bool> committed;
    for (const auto& r : ranges) {
      bool ok = ours.count(r.token) > 0;
      committed.push_back(ok);
      if (!ok) continue;  // lease lost to a reclaim: discard these outcomes
      for (const auto& f : r.failures) {
        ids.push_back(f.message_id);
        ex_status.push_back(f.status == ExceptionStatus::kDead ? "dead" : "ready");
        ex_attempts.push_back(f.attempts);
        ex_delays.push_back(f.delays);
        ex_after.push_back(f.run_after.time_since_epoch().count());
        ex_error.push_back(f.error);
        ex_payload.push_back(f.payload);
      }
      for (const auto& a : r.audit) {
        au_ids.push_back(a.message_id);
        au_attempt.push_back(a.attempt);
        au_at.push_back(a.at.time_since_epoch().count());
        au_outcome.push_back(a.outcome);
        au_error.push_back(a.error.empty() ? std::nullopt : std::optional<std::string>(a.error));
      }
    }
    if (!ids.empty()) {
      tx.exec_params(
          fmt::format("INSERT INTO {0} (group_id, message_id, status, attempts, delays, "
                      "can_run_after, last_error, payload, schema_version, message_key, "
                      "message_created_at) SELECT $1, u.id, u.st, u.att, u.del, "
                      "to_timestamp(u.after / 1000.0), u.err, u.p::jsonb, m.schema_version, "
                      "m.message_key, m.created_at FROM unnest($2::bigint[], "
                      "$3::text[], $4::integer[], $5::integer[], $6::bigint[], $7::text[], "
                      "$8::text[]) AS u(id, st, att, del, after, err, p) "
                      "LEFT JOIN {1} m ON m.id = u.id "
                      "ON CONFLICT (group_id, message_id) DO NOTHING",
                      exceptions_, messages_),
          group_id_, int_array(ids), text_array(ex_status), int_array(ex_attempts),
          int_array(ex_delays), int_array(ex_after), text_array(ex_error), text_array(ex_payload));
    }
    if (!au_ids.empty()) {
      tx.exec_params(
          fmt::format("INSERT INTO {} (group_id, message_id, attempt, outcome, error, host, at) "
                      "SELECT $1, u.id, u.att, u.o, u.err, $6, CASE WHEN u.at = 0 THEN now() ELSE "
                      "to_timestamp(u.at / 1000.0) END FROM "
                      "unnest($2::bigint[], $3::integer[], $4::text[], $5::text[], $7::bigint[]) "
                      "AS u(id, att, o, err, at)",
                      deliveries_),
          group_id_, int_array(au_ids), int_array(au_attempt), text_array(au_outcome),
          text_array(au_error), holder_, int_array(au_at));
    }
    tx.commit();
    return committed;
  });
}

std::vector<std::string> GroupStore::renew_leases(const std::vector<std::string>& tokens,
                                                  SysTime now, Millis lease_ttl) {
  if (tokens.empty()) return {};
  return guarded(session_, "renew leases", [&] {
    pqxx::nontransaction tx(connection_of(session_));
    auto kept = token_set(tx.exec_params(
        fmt::format("UPDATE {} SET expires_at = to_timestamp(($3)::bigint / 1000.0) WHERE "
                    "group_id = $1 AND token = ANY($2::uuid[]) AND expires_at <> '-infinity' "
                    "RETURNING token::text",
                    leases_),
        group_id_, text_array(tokens), ms_param(now + lease_ttl)));
    std::vector<std::string> lost;
    for (const auto& t : tokens) {
      if (!kept.count(t)) lost.push_back(t);
    }
    return lost;
  });
}

void GroupStore::hand_back(const std::vector<std::string>& tokens) {
  if (tokens.empty()) return;
  guarded(session_, "hand back", [&] {
    pqxx::nontransaction tx(connection_of(session_));
    tx.exec_params(fmt::format("UPDATE {} SET expires_at = '-infinity' WHERE group_id = $1 AND "
                               "token = ANY($2::uuid[])",
                               leases_),
                   group_id_, text_array(tokens));
  });
}

}  // namespace sqlstreams::store
