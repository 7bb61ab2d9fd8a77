// Per-key ordering's side of GroupStore (runtime/store/group/README.md#per-key-ordering): the key
// gate a host asks about each claimed range, and the SQL the claim and retry paths share with it.
#include <fmt/format.h>

#include <map>
#include <string_view>
#include <thread>
#include <unordered_set>

#include "common/chaos_plant.hpp"
#include "store/core/pq.hpp"
#include "store/core/sql_array.hpp"
#include "store/group/group_store.hpp"
#include "store/group/ordering_sql.hpp"

namespace sqlstreams::store {
namespace {

constexpr StatementName kGateRows{"gate_keys_rows"};      // store/core/statement.hpp
constexpr StatementName kGateLeases{"gate_keys_leases"};  // (the split form, test only)

void read_gates(const pqxx::result& rows, std::map<std::string, KeyGate>& out) {
  for (const auto& row : rows) {
    KeyGate& g = out[row[0].as<std::string>()];
    g.key = row[0].as<std::string>();
    if (!row[1].is_null()) g.blocked_from = row[1].as<int64_t>();
    g.gated_by_other = g.gated_by_other || row[2].as<bool>();
  }
}

}  // namespace

std::string gate_keys_sql(const StreamTables& tables, GateParts parts) {
  // The leases below the range that another holder has, as one set of hashes (hash-joined with
  // the range's keys: a `= ANY(key_hashes)` per key was 10x slower, research E6); the rows of
  // a key by the (group_id, lane_key, message_id) index, one probe per key.
  const std::string held = fmt::format(
      "held AS (SELECT DISTINCT unnest(l.key_hashes) AS h FROM {} l WHERE l.group_id = $1 AND "
      "l.low < $3 AND l.key_hashes IS NOT NULL AND NOT (l.token = ANY($4::uuid[])))",
      tables.leases);
  const std::string first_row = fmt::format(
      "LEFT JOIN LATERAL (SELECT e.message_id AS first FROM {} e WHERE e.group_id = $1 AND "
      "e.lane_key = m.k AND e.message_id <= $3 AND (e.status <> 'dead' OR $5::boolean) ORDER BY "
      "e.message_id LIMIT 1) r ON true",
      tables.exceptions);
  const std::string mine =
      "mine AS (SELECT u.k, hashtext(u.k) AS h FROM unnest($2::text[]) AS u(k))";
  switch (parts) {
    case GateParts::kRows:
      return fmt::format(
          "WITH {} SELECT m.k, r.first, false FROM mine m {} WHERE r.first IS NOT NULL "
          "AND $4::uuid[] IS NOT NULL",
          mine, first_row);
    case GateParts::kLeases:
      return fmt::format(
          "WITH {}, {} SELECT m.k, NULL::bigint, true FROM mine m JOIN held ON held.h = m.h "
          "WHERE $5::boolean IS NOT NULL",
          mine, held);
    case GateParts::kBoth:
      break;
  }
  // The rows half, adaptively: when the group has at most as many open keyed rows as the range
  // has keys (a healthy group has none), read those rows once and group them by key; only
  // otherwise probe the index once per key. A range of 5,000 keys probed 5,000 times even with
  // no row at all (30-60 ms a range, the ordered drain's largest extra cost; bench/results).
  // `open` stops at one row more than the keys: `few` is then decided, and `firsts` complete.
  const std::string open = fmt::format(
      "open AS (SELECT e.lane_key, e.message_id FROM {} e WHERE e.group_id = $1 AND e.lane_key "
      "IS NOT NULL AND e.message_id <= $3 AND (e.status <> 'dead' OR $5::boolean) LIMIT "
      "cardinality($2::text[]) + 1), "
      "few AS (SELECT count(*) <= cardinality($2::text[]) AS yes FROM open), "
      "firsts AS (SELECT o.lane_key AS k, min(o.message_id) AS first FROM open o WHERE (SELECT "
      "yes FROM few) GROUP BY o.lane_key)",
      tables.exceptions);
  const std::string probe = fmt::format(
      "LEFT JOIN LATERAL (SELECT e.message_id AS first FROM {} e WHERE NOT (SELECT yes FROM few) "
      "AND e.group_id = $1 AND e.lane_key = m.k AND e.message_id <= $3 AND (e.status <> 'dead' "
      "OR $5::boolean) ORDER BY e.message_id LIMIT 1) r ON true",
      tables.exceptions);
  // In the same snapshot, a row without a key when the range's own lease ($6) is gone
  // (GroupStore::gate_range).
  return fmt::format(
      "WITH {}, {}, {} SELECT m.k, coalesce(f.first, r.first), held.h IS NOT NULL FROM mine m "
      "LEFT JOIN held ON held.h = m.h LEFT JOIN firsts f ON f.k = m.k {} WHERE held.h IS NOT "
      "NULL OR f.first IS NOT NULL OR r.first IS NOT NULL UNION ALL SELECT NULL::text, "
      "NULL::bigint, false WHERE NOT EXISTS (SELECT 1 FROM {} o WHERE o.group_id = $1 AND "
      "o.token = $6::uuid)",
      mine, held, open, probe, tables.leases);
}

std::string gate_anything_sql(const StreamTables& tables) {
  // Second column: the range's own lease ($5) still exists (GroupStore::gate_range).
  return fmt::format(
      "SELECT EXISTS (SELECT 1 FROM {0} l WHERE l.group_id = $1 AND l.low < $2 AND l.key_hashes "
      "IS NOT NULL AND NOT (l.token = ANY($3::uuid[]))) OR EXISTS (SELECT 1 FROM {1} e WHERE "
      "e.group_id = $1 AND e.lane_key IS NOT NULL AND e.message_id <= $2 AND (e.status <> 'dead' "
      "OR $4::boolean)), EXISTS (SELECT 1 FROM {0} o WHERE o.group_id = $1 AND o.token = "
      "$5::uuid)",
      tables.leases, tables.exceptions);
}

std::string distinct_key_array(const std::vector<StoredMessage>& messages) {
  std::unordered_set<std::string_view> seen;
  seen.reserve(messages.size());
  std::string out = "{";
  for (const auto& m : messages) {
    if (!m.key || !seen.insert(*m.key).second) continue;
    if (out.size() > 1) out += ',';
    out += '"';
    for (char c : *m.key) {
      if (c == '"' || c == '\\') out += '\\';
      out += c;
    }
    out += '"';
  }
  return out + "}";
}

std::string retry_key_ctes(const StreamTables& tables, const std::string& due,
                           const RetryWalkParams& params) {
  // The next key with an open row after `cond`, over exceptions_N_open_keys (V014) in byte
  // order: one index probe. Dead-only keys are not in that index, so they cost nothing.
  const auto key_after = [&](const std::string& cond, int pass) {
    return fmt::format(
        "(SELECT o.lane_key AS k, {2} AS pass FROM {0} o WHERE o.group_id = $1 AND o.lane_key "
        "IS NOT NULL AND o.status <> 'dead' AND {1} ORDER BY o.lane_key COLLATE \"C\" LIMIT 1)",
        tables.exceptions, cond, pass);
  };
  const std::string start = fmt::format("{}::text", params.start);
  const std::string gt = "o.lane_key COLLATE \"C\" > ";
  const std::string le = "o.lane_key COLLATE \"C\" <= ";
  // Pass 0: the keys after the start; pass 1: from the first key up to the start (the wrap).
  const std::string first_key = fmt::format("SELECT * FROM ({} UNION ALL {}) f LIMIT 1",
                                            key_after(gt + start, 0), key_after(le + start, 1));
  const std::string next_key = fmt::format(
      "SELECT * FROM ({} UNION ALL {} UNION ALL {}) f LIMIT 1",
      key_after("w.pass = 0 AND " + gt + "w.k", 0), key_after("w.pass = 0 AND " + le + start, 1),
      key_after("w.pass = 1 AND " + gt + "w.k AND " + le + start, 1));
  // The key's head: its lowest unresolved row ({hold}: dead counts), claimable when due, at or
  // below `claimed` (README "Rewind").
  const std::string head = fmt::format(
      "LEFT JOIN LATERAL (SELECT h.message_id, ({1}) AND h.message_id <= (SELECT claimed FROM "
      "cur) AS ok FROM {0} h WHERE h.group_id = $1 AND h.lane_key = f.k AND (h.status <> 'dead' "
      "OR {2}) ORDER BY h.message_id LIMIT 1) hd ON true",
      tables.exceptions, due, params.hold);
  return fmt::format(
      // Only rows the cursor has claimed: after a rewind, a row above `claimed` (written by the
      // history the rewind restarted) may have earlier messages of its key that are now under no
      // lease and in no row — unclaimed, unresolved (README "Rewind").
      "cur AS (SELECT c.claimed FROM {0} c WHERE c.group_id = $1), "
      // The walk: one key a step, until `found` claimable heads fill the room or `steps` keys
      // were looked at (the next claim goes on from where this one stopped).
      "walk(k, pass, head, ok, found, steps) AS (SELECT f.k, f.pass, hd.message_id, "
      "coalesce(hd.ok, false), coalesce(hd.ok, false)::integer, 1 FROM ({1}) f {3} "
      "UNION ALL SELECT f.k, f.pass, hd.message_id, coalesce(hd.ok, false), w.found + "
      "coalesce(hd.ok, false)::integer, w.steps + 1 FROM walk w CROSS JOIN LATERAL ({2}) f {3} "
      "WHERE w.found < {4} AND w.steps < {5}), "
      "walk_end AS (SELECT w.k, w.found >= {4} OR w.steps >= {5} AS more FROM walk w ORDER BY "
      "w.steps DESC LIMIT 1), "
      "held AS (SELECT l.low, unnest(l.key_hashes) AS kh FROM {6} l WHERE l.group_id = $1), "
      // A head that a lease with a lower `low` holds waits (hash anti-join, once per claim).
      "cand AS (SELECT w.head AS message_id FROM walk w WHERE w.ok AND NOT EXISTS (SELECT 1 FROM "
      "held WHERE held.kh = hashtext(w.k) AND held.low < w.head))",
      tables.cursors, first_key, next_key, head, params.room, params.steps, tables.leases);
}

std::string retry_chain_claim_ctes(const StreamTables& tables, const std::string& due,
                                   const std::string& chain_param) {
  // Heads first, as the claim without chains locks them; then, for the heads locked here only,
  // the chains behind them. (A first form computed the chain of every head of the group before
  // locking: 770 ms a claim for 126,000 rows of 4,740 keys on a quiet machine, 5 s under a
  // 30-minute chaos run's load — longer than the 3-s lease, so every row claimed was handed back
  // unrun, and the hold group's retries stalled.)
  return fmt::format(
      // The oldest due keyless rows, by exceptions_N_due (which holds no deferred row: V014).
      "loose AS (SELECT x.message_id FROM {0} x WHERE x.group_id = $1 AND x.lane_key IS NULL AND "
      "x.status NOT IN ('dead', 'deferred') AND {1} ORDER BY x.can_run_after LIMIT $3), "
      // The walk's heads and those, by primary key; the condition again under the lock.
      "due AS (SELECT e.message_id, e.status AS was, e.lane_key FROM {0} e WHERE e.group_id = $1 "
      "AND e.status <> 'dead' AND {1} AND e.message_id IN (SELECT message_id FROM cand UNION ALL "
      "SELECT message_id FROM loose) ORDER BY e.can_run_after, e.message_id LIMIT $3 FOR UPDATE "
      "OF e SKIP LOCKED), "
      // Each locked head's next rows: the prefix that is deferred and not held by an earlier
      // lease, numbered from 1. Only behind a head that never ran (`deferred`): a head being
      // retried fails again often (a key failing for minutes), and each of its attempts would
      // lock its chain and hand it back (the bench's hot-key row: p99 pickup of the healthy
      // keys 3x). Once such a head succeeds, the key's next row is a deferred head.
      "next AS (SELECT d.message_id AS head, n.message_id, n.pos FROM due d CROSS JOIN LATERAL "
      "(SELECT r.message_id, r.pos FROM (SELECT x.message_id, row_number() OVER (ORDER BY "
      "x.message_id) AS pos, count(*) FILTER (WHERE NOT x.good) OVER (ORDER BY x.message_id) "
      "AS bad FROM (SELECT s.message_id, s.status = 'deferred' AND NOT EXISTS (SELECT 1 FROM held "
      "WHERE held.kh = hashtext(d.lane_key) AND held.low < s.message_id) AS good FROM {0} s WHERE "
      "s.group_id = $1 AND s.lane_key = d.lane_key AND s.message_id > d.message_id AND "
      "s.message_id <= (SELECT claimed FROM cur) ORDER BY "
      "s.message_id LIMIT {2}) x) r WHERE r.bad = 0) n WHERE d.lane_key IS NOT NULL AND d.was = "
      // No room left after the heads (a backlog of many keys): no chain is looked for. Walking
      // them anyway was ~12 of a claim's ~60 ms with 85,000 deferred rows of 1,638 keys.
      "'deferred' AND (SELECT count(*) FROM due) < $3), "
      "more AS (SELECT e.message_id FROM {0} e WHERE e.group_id = $1 AND e.status = 'deferred' "
      "AND e.message_id IN (SELECT message_id FROM next) ORDER BY e.message_id LIMIT "
      "greatest($3 - (SELECT count(*) FROM due), 0) FOR UPDATE OF e SKIP LOCKED), "
      // A chain keeps the rows before its first one that was not locked.
      "kept AS (SELECT t.message_id FROM (SELECT n.pos, n.message_id, count(*) OVER (PARTITION "
      "BY n.head ORDER BY n.pos) AS c FROM next n WHERE n.message_id IN (SELECT message_id FROM "
      "more)) t WHERE t.c = t.pos), "
      "taken AS (SELECT message_id, was, false AS chained FROM due UNION ALL SELECT message_id, "
      "'deferred'::text, true FROM kept)",
      tables.exceptions, due, chain_param);
}

std::vector<KeyGate> GroupStore::gate_keys(const ClaimedRange& range,
                                           const std::vector<std::string>& own_tokens) {
  return gate_range(range, own_tokens).keys;
}

GateVerdict GroupStore::gate_range(const ClaimedRange& range,
                                   const std::vector<std::string>& own_tokens) {
  if (chaos_plant("ordering-split-gate")) {  // test builds: the split form, its window widened
    return GateVerdict{
        gate_keys_split(range, own_tokens,
                        [] { std::this_thread::sleep_for(std::chrono::milliseconds(200)); }),
        false};
  }
  const std::string keys =
      range.key_array.empty() ? distinct_key_array(range.messages) : range.key_array;
  if (keys == "{}") return {};
  return guarded(session_, "gate keys", [&] {
    auto& conn = connection_of(session_);
    pqxx::nontransaction tx(conn);
    const bool hold = ordering_ == OrderingMode::kKeyHold;
    const std::string tokens = text_array(own_tokens);
    // First without the keys: when no other holder has a keyed lease below the range and the
    // group has no open keyed row (one healthy host), the answer is empty — in that statement's
    // snapshot, which is as good as the full statement's (README: "The gate"). Sending, hashing
    // and joining 5,000 keys cost ~2.5 ms of the claim loop a range.
    // Each statement also asks whether the range's own lease still exists: a rewind (or a
    // reclaim) that took it may also have deleted the earlier leases that held its keys, and
    // their messages are then under no lease and in no row — unresolved, yet invisible to the
    // gate (found by tests/chaos: README "What it found"). A range whose lease is gone runs none
    // of its keyed messages.
    const auto first =
        exec_prepared(tx, conn, gate_anything_, group_id_, range.low, tokens, hold, range.token);
    if (!first.at(0)[1].as<bool>()) return GateVerdict{{}, true};
    if (!first.at(0)[0].as<bool>()) return GateVerdict{};
    // One statement: one snapshot, so a range of another holder that commits meanwhile is seen
    // either as its lease or as the rows it wrote, never as neither.
    std::map<std::string, KeyGate> gates;
    GateVerdict out;
    for (const auto& row :
         exec_prepared(tx, conn, gate_, group_id_, keys, range.low, tokens, hold, range.token)) {
      if (row[0].is_null()) {
        out.lease_gone = true;
        continue;
      }
      auto& g = gates[row[0].as<std::string>()];
      g.key = row[0].as<std::string>();
      if (!row[1].is_null()) g.blocked_from = row[1].as<int64_t>();
      g.gated_by_other = g.gated_by_other || row[2].as<bool>();
    }
    if (out.lease_gone) return GateVerdict{{}, true};
    for (auto& [k, g] : gates) out.keys.push_back(std::move(g));
    return out;
  });
}

std::vector<KeyGate> GroupStore::gate_keys_split(const ClaimedRange& range,
                                                 const std::vector<std::string>& own_tokens,
                                                 const std::function<void()>& between) {
  const std::string keys = distinct_key_array(range.messages);
  if (keys == "{}") return {};
  std::map<std::string, KeyGate> gates;
  const bool hold = ordering_ == OrderingMode::kKeyHold;
  guarded(session_, "gate keys (rows)", [&] {
    pqxx::nontransaction tx(connection_of(session_));
    read_gates(exec(tx, kGateRows, gate_keys_sql(tables_, GateParts::kRows), group_id_, keys,
                    range.low, text_array(own_tokens), hold),
               gates);
  });
  between();
  guarded(session_, "gate keys (leases)", [&] {
    pqxx::nontransaction tx(connection_of(session_));
    read_gates(exec(tx, kGateLeases, gate_keys_sql(tables_, GateParts::kLeases), group_id_, keys,
                    range.low, text_array(own_tokens), hold),
               gates);
  });
  std::vector<KeyGate> out;
  for (auto& [k, g] : gates) out.push_back(std::move(g));
  return out;
}

}  // namespace sqlstreams::store
