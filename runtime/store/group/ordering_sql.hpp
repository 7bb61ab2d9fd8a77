// store/group/ordering_sql — INTERNAL to store/group: the SQL of per-key ordering (README
// "Per-key ordering"): the key gate (one statement; its two halves exist only for the
// split-check regression test and the chaos plant `ordering-split-gate`) and the retry claim's key
// predicate. Threading: pure functions.
#pragma once

#include <string>
#include <vector>

#include "store/core/stream_tables.hpp"

namespace sqlstreams::store {

// Parameters: $1 group, $2 the range's distinct keys (text[]), $3 range.low, $4 own tokens
// (uuid[]), $5 dead rows hold their key (boolean). Rows: key, blocked_from (NULL = none),
// gated_by_other. kRows / kLeases: only that half (the other column NULL / false).
enum class GateParts { kBoth, kRows, kLeases };
std::string gate_keys_sql(const StreamTables& tables, GateParts parts);
// Whether the gate can find anything at all, without the keys: $1 group, $2 range.low, $3 own
// tokens (uuid[]), $4 dead rows hold their key. One row: true when another holder has a keyed
// lease below the range or the group has an open keyed row at or below it.
std::string gate_anything_sql(const StreamTables& tables);

struct StoredMessage;
// The text[] literal of the distinct keys of `messages` (first-seen order), "{}" when none.
std::string distinct_key_array(const std::vector<StoredMessage>& messages);

// The retry claim's key predicate (claim_due_retries, ordered groups), as CTEs to put before
// its `due` CTE: `cand` = the message ids that head their key — the lowest unresolved row of a
// lane_key ($hold_param: dead counts) — and that no lease of the group with a lower `low`
// holds, for the keys of the rows that are due (`due`: the claim's condition on unqualified
// columns); `held` = the leases' (low, key hash) pairs. One index probe per key with a due row:
// a per-row NOT EXISTS probed every deferred row of a hot key at every poll (113 ms for 10,000
// of them), a skip scan over every key of the group walked the keys of all dead letters too
// (400 ms with 50,000); README.
std::string retry_key_ctes(const StreamTables& tables, const std::string& due,
                           const std::string& hold_param);
// The claim's CTEs for an ordered group, after retry_key_ctes: `due` locks (SKIP LOCKED) due
// unkeyed rows and heads, at most $3; then the retry chains of the heads locked here — each
// head's next rows in id order (at most $chain_param) while each is `deferred` and no lease with
// a lower `low` holds the key (runtime/store/group/README.md#per-key-ordering, "Retry chains") —
// are locked in the room left, and `taken` keeps of each chain the prefix that was locked.
// Columns of `taken`: message_id, was, chained.
std::string retry_chain_claim_ctes(const StreamTables& tables, const std::string& due,
                                   const std::string& chain_param);

}  // namespace sqlstreams::store
