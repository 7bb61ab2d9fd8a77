// GroupStore's statements: the text of every hot statement of the group data plane, built once
// per GroupStore and prepared once per connection (store/core/statement.hpp), in protocol
// order: the fence and claim (claim.cpp), reclaim, range commits and lease renewal
// (commit.cpp), the cursor advancer (advance.cpp). Also the group's state (paused, gone).
#include "store/group/group_store.hpp"

#include <fmt/format.h>

#include "store/core/pq.hpp"
#include "store/core/sql_time.hpp"
#include "store/group/fence_sql.hpp"
#include "store/group/ordering_sql.hpp"
#include "store/reporting/group_lifecycle.hpp"

namespace sqlstreams::store {
namespace {

// Statement names (store/core/statement.hpp); the prepared ones are sqlstreams_<name>_<stream>.
constexpr StatementName kObserve{"observe"};
constexpr StatementName kClaimLock{"claim_lock"};
constexpr StatementName kClaimUpdate{"claim_update"};
constexpr StatementName kClaimUpdateLease{"claim_update_lease"};
constexpr StatementName kClaimUpdateLeaseKeys{"claim_update_lease_keys"};
constexpr StatementName kGateKeys{"gate_keys"};
constexpr StatementName kGateAnything{"gate_anything"};
constexpr StatementName kReadRange{"read_range"};
constexpr StatementName kReadBudget{"read_budget"};
constexpr StatementName kReadChecked{"read_checked"};
constexpr StatementName kCountRange{"count_range"};
constexpr StatementName kReclaim{"reclaim"};
constexpr StatementName kCommitComplete{"commit_complete"};
constexpr StatementName kCommitPartial{"commit_partial"};
constexpr StatementName kRenewLeases{"renew_leases"};
constexpr StatementName kAdvanceRead{"advance_read"};
constexpr StatementName kAdvanceApply{"advance_apply"};

// "e's message is still stored" (retention has not removed it), as a scalar subquery: a
// SubPlan run for each exception row of the committed range, an index probe of the one
// partition that holds the id (run-time pruning on the parameter). Written as EXISTS, the
// planner may turn it into a semi-join and, once the exceptions table is large, hash the
// whole stream's ids for every commit: seen in a chaos run, range commits of 5-10 s each on a
// 300-partition stream with 75,000 exception rows.
std::string message_still_stored(const std::string& messages) {
  return fmt::format("(SELECT true FROM {} m WHERE m.id = e.message_id) IS NOT NULL", messages);
}

}  // namespace

GroupStore::GroupStore(Session& session, int64_t stream_id, int64_t group_id, std::string holder)
    : session_(session),
      stream_id_(stream_id),
      group_id_(group_id),
      holder_(std::move(holder)),
      tables_(session_.schema_sql(), stream_id) {
  auto statement = [&](StatementName name, std::string sql) {
    return Statement{prepared_name(name, stream_id), std::move(sql)};
  };
  observe_ = statement(
      kObserve,
      fmt::format("SELECT h.head, c.claimed, c.settled_head, c.pending_xid IS NOT NULL, p.proven, "
                  "CASE WHEN h.head > c.settled_head AND (c.pending_xid IS NULL OR p.proven) THEN "
                  "pg_current_xact_id()::text END "
                  "FROM (SELECT coalesce(max(id), 0) AS head FROM {0}) h, {1} c, "
                  "LATERAL (SELECT {2} AS proven) p WHERE c.group_id = $1",
                  tables_.messages, tables_.cursors,
                  fence_proven_sql(session_.schema_sql(), "c.pending_xid", tables_.id_seq)));
  claim_lock_ =
      statement(kClaimLock,
                fmt::format("SELECT claimed, settled_head, pending_head, pending_xid::text, "
                            "{1}, {2} FROM {0} WHERE group_id = $1 FOR UPDATE",
                            tables_.cursors,
                            fence_proven_sql(session_.schema_sql(), "pending_xid", tables_.id_seq),
                            fence_proven_sql(session_.schema_sql(), "$2::xid8", tables_.id_seq)));
  const std::string move_cursor = fmt::format(
      "UPDATE {} SET claimed = $2, settled_head = $3, pending_head = $4::bigint, "
      "pending_xid = $5::xid8 WHERE group_id = $1",
      tables_.cursors);
  claim_update_ = statement(kClaimUpdate, move_cursor);
  // A claim that takes a range moves the cursor and writes the range's lease in one statement
  // (README "The claim in round trips"): claim_update_'s parameters, then $6 the range's low end,
  // $7 the lease's ttl, $8 the holder. The lease is inserted from the updated cursor row, so one
  // never goes without the other.
  // Ordered groups (_keys_): the same lease with the hashtext() of the range's distinct keys ($9,
  // as read, deduplicated by the caller), computed here so one function hashes keys everywhere
  // (runtime/store/group/README.md#per-key-ordering). Neither DISTINCT nor ORDER BY: two keys
  // whose hashes collide leave the hash twice, which every reader tolerates (each is an EXISTS
  // or a DISTINCT), and sorting 5,000 hashes was two thirds of this statement (~2 ms a range
  // inside the claim's lock on the cursor row; bench/results "Per-key ordering").
  const std::string update_cursor = "WITH moved AS (" + move_cursor + " RETURNING group_id) ";
  claim_update_lease_ = statement(
      kClaimUpdateLease,
      update_cursor + fmt::format("INSERT INTO {} (group_id, token, low, high, expires_at, holder) "
                                  "SELECT group_id, gen_random_uuid(), $6, $2, {}, $8 FROM moved "
                                  "RETURNING token::text",
                                  tables_.leases, db_in("$7")));
  claim_update_lease_keys_ = statement(
      kClaimUpdateLeaseKeys,
      update_cursor +
          fmt::format("INSERT INTO {} (group_id, token, low, high, expires_at, holder, key_hashes) "
                      "SELECT group_id, gen_random_uuid(), $6, $2, {}, $8, ARRAY(SELECT "
                      "hashtext(u.k) FROM unnest($9::text[]) AS u(k)) FROM moved "
                      "RETURNING token::text",
                      tables_.leases, db_in("$7")));
  gate_ = statement(kGateKeys, gate_keys_sql(tables_, GateParts::kBoth));
  gate_anything_ = statement(kGateAnything, gate_anything_sql(tables_));
  read_range_ =
      statement(kReadRange, fmt::format("SELECT {} FROM {} WHERE id > $1 AND id <= $2 ORDER BY id",
                                        message_columns(), tables_.messages));
  // A claim's read under its byte budget (ClaimBudget): the range's messages in id order with
  // the running sum of their payload bytes; only those whose sum fits come back ($3 bytes; $4:
  // the first message comes back whatever its size), each with the id and the text bytes of the
  // next message of the range (lead: on the last row sent, a non-NULL id means the budget cut
  // the range there). When not even the first message fits, it alone comes back without its
  // payload (NULL), its own size in the last column: the claimer waits for that much room
  // instead of reading the range again at every freed byte (ClaimResult::next_bytes).
  // The inner subquery converts each payload to text once; the window copies rows into a
  // tuplestore it trims as it goes (no temp file for a range of 1 MiB payloads).
  read_budget_ = statement(
      kReadBudget,
      fmt::format("SELECT s.id, s.created_ms, s.schema_version, s.message_key, CASE WHEN s.fits "
                  "THEN s.payload END, s.next_id, CASE WHEN s.fits THEN s.next_bytes ELSE "
                  "octet_length(s.payload) END FROM (SELECT t.*, t.run <= $3 OR (t.first AND "
                  "$4) AS fits FROM (SELECT r.*, sum(octet_length(r.payload)) OVER w AS run, "
                  "row_number() OVER w = 1 AS first, lead(r.id) OVER w AS next_id, "
                  "lead(octet_length(r.payload)) OVER w AS next_bytes FROM (SELECT id, {} AS "
                  "created_ms, schema_version, message_key, payload::text AS payload FROM {} "
                  "WHERE id > $1 AND id <= $2 ORDER BY id OFFSET 0) r WINDOW w AS (ORDER BY r.id "
                  "ROWS UNBOUNDED PRECEDING)) t) s WHERE s.fits OR s.first ORDER BY s.id",
                  to_epoch_ms("created_at"), tables_.messages));
  // The common case first (a range far below its budget): the range whole, as read_range_, but
  // only when the payloads' stored sizes show it cannot reach $3 bytes — none compressed, and
  // each counted at its text_bytes (V012: written by every produce path when the text is more
  // than 4 times the binary form, e.g. numbers with huge exponents) or else at 8 times its
  // stored size (without text_bytes, jsonb's text is at most ~6x its stored form), the sum at
  // most $3. Otherwise nothing comes back and the claim runs read_budget_. The check reads
  // sizes from the tuple headers: no payload is detoasted or printed, no window (the running
  // sum cost ~45% of a 5,000-row read; this check ~10%).
  read_checked_ = statement(
      kReadChecked,
      fmt::format(
          "SELECT {0}, NULL::bigint, NULL::bigint FROM {1} WHERE id > $1 AND id <= $2 AND (SELECT "
          "coalesce(bool_and(pg_column_compression(payload) IS NULL), true) AND "
          "coalesce(sum(coalesce(text_bytes::bigint, 8 * "
          "pg_column_size(payload)::bigint)), 0) <= $3::bigint FROM {1} "
          "WHERE id > $1 AND id <= $2) ORDER BY id",
          message_columns(), tables_.messages));
  count_range_ = statement(
      kCountRange,
      fmt::format("SELECT count(*) FROM {} WHERE id > $1 AND id <= $2", tables_.messages));
  reclaim_ = statement(
      kReclaim,
      fmt::format("WITH victim AS (SELECT token FROM {0} WHERE group_id = $1 AND expires_at < {1} "
                  "ORDER BY low LIMIT 1 FOR UPDATE SKIP LOCKED) "
                  "UPDATE {0} l SET token = gen_random_uuid(), reclaims = l.reclaims + CASE WHEN "
                  "l.expires_at = '-infinity' THEN 0 ELSE 1 END, expires_at = {2}, holder = $3 "
                  "FROM victim v WHERE l.group_id = $1 AND l.token = v.token "
                  "RETURNING l.token::text, l.low, l.high, l.reclaims",
                  tables_.leases, kDbNow, db_in("$2")));
  commit_complete_ = statement(
      kCommitComplete,
      fmt::format("WITH l AS (DELETE FROM {0} WHERE group_id = $1 AND token = "
                  "ANY($2::uuid[]) RETURNING token, low, high), old AS (DELETE FROM {1} e "
                  "USING l WHERE e.group_id = $1 AND e.message_id > l.low AND e.message_id "
                  "<= l.high AND e.status <> 'inflight' AND {3}) SELECT token::text, "
                  "pg_current_xact_id()::text FROM l",
                  tables_.leases, tables_.exceptions, tables_.messages,
                  message_still_stored(tables_.messages)));
  commit_partial_ = statement(
      kCommitPartial,
      // The token is consumed (a new one for the rest, which nobody holds): a partial commit
      // replayed after an in-doubt COMMIT finds no lease and writes its outputs no second time.
      fmt::format("WITH l AS (UPDATE {0} l SET low = GREATEST(l.low, p.low), expires_at = "
                  "'-infinity', token = gen_random_uuid() FROM "
                  "unnest($2::uuid[], $3::bigint[]) AS p(token, low), {0} was WHERE "
                  "l.group_id = $1 AND l.token = p.token AND was.group_id = l.group_id AND "
                  "was.token = p.token RETURNING was.token, was.low AS old_low, p.low AS "
                  "upto), old AS (DELETE FROM {1} e USING l WHERE e.group_id = $1 AND "
                  "e.message_id > l.old_low AND e.message_id <= l.upto AND e.status <> "
                  "'inflight' AND {3}) "
                  "SELECT token::text, pg_current_xact_id()::text FROM l",
                  tables_.leases, tables_.exceptions, tables_.messages,
                  message_still_stored(tables_.messages)));
  renew_ =
      statement(kRenewLeases,
                fmt::format("UPDATE {} SET expires_at = {} WHERE group_id = $1 AND token = "
                            "ANY($2::uuid[]) AND expires_at <> '-infinity' RETURNING token::text",
                            tables_.leases, db_in("$3")));
  advance_read_ = statement(
      kAdvanceRead,
      fmt::format("SELECT c.committed, LEAST((SELECT min(low) FROM {} WHERE group_id = $1), "
                  "(SELECT min(message_id) - 1 FROM {} WHERE group_id = $1 AND status NOT IN "
                  "('dead', 'parked')), c.claimed), c.generation, c.claimed FROM {} c WHERE "
                  "c.group_id = $1",
                  tables_.leases, tables_.exceptions, tables_.cursors));
  advance_apply_ =
      statement(kAdvanceApply, fmt::format("UPDATE {} SET committed = $2 WHERE group_id = $1 AND "
                                           "committed < $2 AND claimed >= $2 AND generation = $3",
                                           tables_.cursors));
}

GroupState GroupStore::state() { return read_group_state(session_, group_id_); }

}  // namespace sqlstreams::store
