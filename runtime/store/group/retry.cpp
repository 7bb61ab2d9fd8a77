// The exception loop's side of GroupStore: claim due exception rows under a row lease, write
// each attempt's result under that lease's token (isolating rows the database refuses), renew
// row leases.
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

#include "common/chaos_plant.hpp"
#include "store/core/pq.hpp"
#include "store/core/sql_array.hpp"
#include "store/core/sql_time.hpp"
#include "store/group/group_store.hpp"
#include "store/group/ordering_sql.hpp"
#include "store/group/outcome_rows.hpp"

namespace sqlstreams::store {
namespace {

// Statement names (store/core/statement.hpp).
constexpr StatementName kClaimRetries{"claim_retries"};
constexpr StatementName kRetryMessages{"retry_messages"};
constexpr StatementName kDropOrphans{"drop_orphan_retries"};
constexpr StatementName kRetrySucceeded{"retry_succeeded"};
constexpr StatementName kChainSucceeded{"retry_chain_succeeded"};
constexpr StatementName kChainRefused{"retry_chain_refused"};
constexpr StatementName kRetryHandBack{"retry_hand_back"};
constexpr StatementName kRetryXid{"retry_xid"};
constexpr StatementName kRenewRetryLeases{"renew_retry_leases"};

}  // namespace

std::vector<RetryClaim> GroupStore::claim_due_retries(Millis lease_ttl, int32_t limit,
                                                      RetryPick pick, int32_t max_retries,
                                                      int32_t chain) {
  const std::string ready_due = fmt::format("(status = 'ready' AND can_run_after <= {})", kDbNow);
  const std::string expired_inflight =
      fmt::format("(status = 'inflight' AND lease_expires_at < {})", kDbNow);
  const bool keyed = ordering_ != OrderingMode::kNone;
  // Ordered groups: a deferred row is due at once (it never ran).
  const std::string ready_or_deferred =
      keyed ? fmt::format("({} OR status = 'deferred')", ready_due) : ready_due;
  const std::string which = pick == RetryPick::kReady ? ready_or_deferred
                            : pick == RetryPick::kSuspects
                                ? expired_inflight
                                : fmt::format("({} OR {})", ready_or_deferred, expired_inflight);
  // Ordered groups: the key predicate in the same statement as the lock (one snapshot), heads
  // first, each with its retry chain (`chain` rows behind it); unordered groups run exactly the
  // old statement. (The chaos plant `ordering-retry-any-row`, test builds: no key predicate — a
  // later row of a blocked key runs.)
  const bool chains = keyed && !chaos_plant("ordering-retry-any-row");
  // Ordered groups: $6 the key walk's start, $7 its step budget, $8 the chain length.
  std::string ctes = keyed ? "WITH RECURSIVE " : "WITH ";
  if (keyed) {
    ctes +=
        retry_key_ctes(tables_, which, {"$5::boolean", "$3::integer", "$6::text", "$7::integer"}) +
        ", ";
  }
  if (chains) {
    ctes += retry_chain_claim_ctes(tables_, which, "$8::integer") + " ";
  } else {
    ctes += fmt::format(
        "due AS (SELECT message_id, status AS was, false AS chained FROM {0} e WHERE group_id = "
        "$1 AND {1} ORDER BY {2} LIMIT $3 FOR UPDATE OF e SKIP LOCKED) ",
        tables_.exceptions, which, keyed ? "can_run_after, message_id" : "can_run_after");
  }
  const char* src = chains ? "taken" : "due";
  return guarded(session_, "claim retries", [&] {
    const SteadyTime deadline = std::chrono::steady_clock::now() + lease_ttl;
    pqxx::work tx(connection_of(session_));
    // Ordered groups: the UPDATE's rows, then one row with the key walk's end (message_id NULL).
    const std::string claim_sql = fmt::format(
        "{4}{6}UPDATE {0} e SET status = 'inflight', lease_token = gen_random_uuid(), "
        "lease_expires_at = {1}, updated_at = now(), "
        "attempts = e.attempts + CASE WHEN {5}.was = 'inflight' AND e.attempts - e.delays "
        "<= $4 THEN 1 ELSE 0 END, "
        "last_error = CASE WHEN {5}.was = 'inflight' AND e.attempts - e.delays <= $4 THEN "
        "'attempt ' || (e.attempts + 1) || "
        "' did not finish: its host stopped while running it' ELSE e.last_error END "
        "FROM {5} WHERE e.group_id = $1 AND e.message_id = {5}.message_id "
        "RETURNING e.message_id, e.attempts, e.delays, e.lease_token::text, {5}.was = "
        "'inflight', coalesce(e.last_error, ''), e.payload::text, "
        "coalesce(e.schema_version, 0), coalesce({2}, 0), e.message_key, {3}, {5}.chained{7}",
        tables_.exceptions, db_in("$2"), to_epoch_ms("e.message_created_at"),
        keyed ? fmt::format("e.lane_key, {}.was = 'deferred'", src) : "NULL::text, false", ctes,
        src, keyed ? ", took AS (" : "",
        keyed ? ") SELECT t.*, NULL::text, NULL::boolean FROM took t UNION ALL SELECT NULL, "
                "NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, we.k, "
                "we.more FROM walk_end we"
              : "");
    // Suspects run alone, one at a time: no chain.
    const int32_t chain_rows = pick == RetryPick::kSuspects ? 0 : std::max(0, chain);
    const bool hold = ordering_ == OrderingMode::kKeyHold;
    auto rows = chains  ? exec(tx, kClaimRetries, claim_sql, group_id_, ms_param(lease_ttl), limit,
                               max_retries, hold, retry_walk_start_, kRetryWalkSteps, chain_rows)
                : keyed ? exec(tx, kClaimRetries, claim_sql, group_id_, ms_param(lease_ttl), limit,
                               max_retries, hold, retry_walk_start_, kRetryWalkSteps)
                        : exec(tx, kClaimRetries, claim_sql, group_id_, ms_param(lease_ttl), limit,
                               max_retries);
    retry_walk_more_ = false;
    std::vector<RetryClaim> out;
    std::map<int64_t, size_t> by_id;
    std::map<int64_t, StoredMessage> kept_payload;  // a dead letter's copy of its message
    std::vector<int64_t> ids;
    for (const auto& row : rows) {
      if (row[0].is_null()) {  // the key walk's end: the next claim goes on after it
        if (pick != RetryPick::kSuspects) retry_walk_start_ = row[13].as<std::string>();
        retry_walk_more_ = row[14].as<bool>();
        continue;
      }
      RetryClaim c;
      c.message_id = row[0].as<int64_t>();
      c.attempts = row[1].as<int32_t>();
      c.delays = row[2].as<int32_t>();
      c.token = row[3].as<std::string>();
      c.deadline = deadline;
      c.expired_inflight = row[4].as<bool>();
      c.last_error = row[5].as<std::string>();
      if (!row[6].is_null()) {
        StoredMessage& kept = kept_payload[c.message_id];
        kept.id = c.message_id;
        kept.payload = row[6].as<std::string>();
        kept.schema_version = row[7].as<int32_t>();  // 0 = unknown (kept before V003)
        kept.created_at_unix_ms = row[8].as<int64_t>();
        if (!row[9].is_null()) kept.key = row[9].as<std::string>();
      }
      if (!row[10].is_null()) c.lane_key = row[10].as<std::string>();
      c.deferred = row[11].as<bool>();
      c.chained = row[12].as<bool>();
      by_id[c.message_id] = out.size();
      ids.push_back(c.message_id);
      out.push_back(std::move(c));
    }
    if (ids.empty()) {
      tx.commit();
      return out;
    }
    auto msgs = exec(tx, kRetryMessages,
                     fmt::format("SELECT {} FROM {} WHERE id = ANY($1::bigint[])",
                                 message_columns(), tables_.messages),
                     int_array(ids));
    for (const auto& row : msgs) {
      StoredMessage m = message_from_row(row);
      out[by_id[m.id]].message = std::move(m);
    }
    // Retention removed the message: a kept payload (a dead letter sent back by an operator)
    // still runs; without one there is nothing left to run, and the row goes with its message.
    std::vector<int64_t> orphans;
    std::vector<RetryClaim> runnable;
    for (auto& c : out) {
      if (!c.message) {
        auto kept = kept_payload.find(c.message_id);
        if (kept == kept_payload.end()) {
          orphans.push_back(c.message_id);
          continue;
        }
        c.message = std::move(kept->second);  // as produced: version, key and created_at
      }
      runnable.push_back(std::move(c));
    }
    if (!orphans.empty()) {
      exec(tx, kDropOrphans,
           fmt::format("DELETE FROM {} WHERE group_id = $1 AND message_id = "
                       "ANY($2::bigint[]) AND status = 'inflight'",
                       tables_.exceptions),
           group_id_, int_array(orphans));
    }
    tx.commit();
    if (keyed) {
      std::sort(runnable.begin(), runnable.end(), [](const RetryClaim& a, const RetryClaim& b) {
        return a.message_id < b.message_id;
      });
    }
    return runnable;
  });
}

std::vector<bool> GroupStore::commit_retries(const std::vector<RetryResult>& results,
                                             std::vector<RejectedWrite>* isolate) {
  in_doubt_.reset();
  if (results.empty()) return {};
  std::vector<const EmittedMessage*> all_outputs;
  for (const auto& r : results) {
    for (const auto& o : r.outputs) all_outputs.push_back(&o);
  }
  std::map<std::string, std::pair<int64_t, size_t>> written;
  auto committed_results = guarded(session_, "commit retries", [&] {
    prepare_outputs(all_outputs);
    pqxx::work tx(connection_of(session_));
    std::vector<int64_t> ok_ids, back_ids, chain_ids;
    std::vector<std::string> ok_tok, back_tok, chain_tok;
    std::vector<TokenFailure> fail;
    for (const auto& r : results) {
      if (r.hand_back) {
        back_ids.push_back(r.message_id);
        back_tok.push_back(r.token);
      } else if (!r.decision && r.chained && ordering_ != OrderingMode::kNone) {
        chain_ids.push_back(r.message_id);
        chain_tok.push_back(r.token);
      } else if (!r.decision) {
        ok_ids.push_back(r.message_id);
        ok_tok.push_back(r.token);
      } else {
        fail.push_back(TokenFailure{r.token, *r.decision});
        fail.back().failure.message_id = r.message_id;
      }
    }
    // The tokens whose row was still ours: by token, never by message id (outcome_rows.hpp).
    std::set<std::string> ours;
    auto collect = [&](const pqxx::result& r) {
      for (const auto& row : r) ours.insert(row[0].as<std::string>());
    };
    if (!ok_ids.empty()) {
      collect(exec(
          tx, kRetrySucceeded,
          fmt::format("DELETE FROM {} e USING unnest($2::bigint[], $3::uuid[]) AS u(id, tok) "
                      "WHERE e.group_id = $1 AND e.message_id = u.id AND e.lease_token = u.tok "
                      "RETURNING u.tok::text",
                      tables_.exceptions),
          group_id_, int_array(ok_ids), text_array(ok_tok)));
    }
    if (!chain_ids.empty()) {
      // A chain's success stands only if every unresolved row of its key below it is gone or
      // is another success of this statement: if an earlier row is no longer ours (its lease
      // expired and another host took it), the successor must not become durable before it
      // (replay is a suffix). Rows below that are ours succeed here or are blocked likewise.
      const std::string chain_tokens = text_array(chain_tok);
      std::set<std::string> applied;
      for (const auto& row :
           exec(tx, kChainSucceeded,
                fmt::format(
                    "DELETE FROM {0} e USING unnest($2::bigint[], $3::uuid[]) AS u(id, tok) "
                    "WHERE e.group_id = $1 AND e.message_id = u.id AND e.lease_token = u.tok "
                    "AND NOT EXISTS (SELECT 1 FROM {0} x WHERE x.group_id = $1 AND x.lane_key = "
                    "e.lane_key AND x.message_id < e.message_id AND (x.status <> 'dead' OR $4) "
                    "AND (x.lease_token IS NULL OR x.lease_token <> ALL($3::uuid[]))) "
                    "RETURNING u.tok::text",
                    tables_.exceptions),
                group_id_, int_array(chain_ids), chain_tokens,
                ordering_ == OrderingMode::kKeyHold)) {
        applied.insert(row[0].as<std::string>());
      }
      ours.insert(applied.begin(), applied.end());
      std::vector<std::string> refused;
      for (const auto& t : chain_tok) {
        if (!applied.count(t)) refused.push_back(t);
      }
      if (!refused.empty()) {
        // Still ours but not applied: back to `deferred` at once (not left inflight to expire
        // into a suspect); the result reports not committed.
        exec(tx, kChainRefused,
             fmt::format("UPDATE {} SET status = 'deferred', lease_token = NULL, "
                         "lease_expires_at = NULL, updated_at = now() WHERE group_id = $1 AND "
                         "lease_token = ANY($2::uuid[])",
                         tables_.exceptions),
             group_id_, text_array(refused));
      }
    }
    if (!fail.empty()) {
      if (isolate == nullptr) {
        update_failures(tx, tables_.exceptions, tables_.messages, group_id_, fail, ours);
      } else {
        update_failures_isolated(tx, tables_.exceptions, tables_.messages, group_id_, fail, ours,
                                 *isolate);
      }
    }
    if (!back_ids.empty()) {
      collect(exec(
          tx, kRetryHandBack,
          // A row of an ordered group that never ran goes back to `deferred`.
          fmt::format("UPDATE {} e SET status = CASE WHEN e.lane_key IS NOT NULL AND e.attempts = "
                      "0 THEN 'deferred' ELSE 'ready' END, lease_token = NULL, lease_expires_at = "
                      "NULL, updated_at = now() FROM unnest($2::bigint[], $3::uuid[]) AS u(id, "
                      "tok) WHERE e.group_id = $1 AND e.message_id = u.id AND e.lease_token = "
                      "u.tok RETURNING u.tok::text",
                      tables_.exceptions),
          group_id_, int_array(back_ids), text_array(back_tok)));
    }
    std::vector<AuditEntry> audit;
    std::vector<bool> committed;
    std::vector<const EmittedMessage*> outputs;  // of the successes whose row was ours
    for (const auto& r : results) {
      bool ok = ours.count(r.token) > 0;
      committed.push_back(ok);
      if (ok && r.audit) {
        audit.push_back(*r.audit);
        audit.back().message_id = r.message_id;
      }
      if (ok && !r.decision && !r.hand_back) {
        for (const auto& o : r.outputs) outputs.push_back(&o);
      }
    }
    written = write_outputs(tx, outputs);
    if (isolate != nullptr && !audit.empty()) {
      insert_audit_isolated(tx, tables_.deliveries, group_id_, holder_, audit, *isolate);
    } else if (isolate == nullptr) {
      insert_audit(tx, tables_.deliveries, group_id_, holder_, audit);
    }
    if (!ours.empty()) {
      // Something was written: remember the transaction, in case its COMMIT is in doubt.
      in_doubt_ = InDoubtCommit{
          exec(tx, kRetryXid, "SELECT pg_current_xact_id()::text")[0][0].as<std::string>(),
          committed};
    }
    commit_keeping_doubt(tx, in_doubt_);
    return committed;
  });
  make_room_after(written);
  return committed_results;
}

std::vector<std::string> GroupStore::renew_retry_leases(const std::vector<std::string>& tokens,
                                                        Millis lease_ttl) {
  if (tokens.empty()) return {};
  return guarded(session_, "renew retry leases", [&] {
    pqxx::nontransaction tx(connection_of(session_));
    auto r = exec(
        tx, kRenewRetryLeases,
        fmt::format("UPDATE {} SET lease_expires_at = {} WHERE group_id = $1 AND lease_token = "
                    "ANY($2::uuid[]) RETURNING lease_token::text",
                    tables_.exceptions, db_in("$3")),
        group_id_, text_array(tokens), ms_param(lease_ttl));
    return tokens_not_returned(tokens, r);
  });
}

}  // namespace sqlstreams::store
