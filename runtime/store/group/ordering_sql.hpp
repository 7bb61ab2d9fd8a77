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
// its `due` CTE (WITH RECURSIVE): a walk of the group's keys that have an open row, in byte
// order from `start` (exclusive) and wrapping around once, one index probe for the next key and
// one for its head each step, that stops when `room` claimable heads were found or after `steps`
// keys (runtime/store/group/README.md#per-key-ordering, "The key walk"). `cand` = the ids of the
// heads found — the lowest unresolved row of a lane_key (`hold`: dead counts), due (`due`: the
// claim's condition on unqualified columns), at or below `claimed`, and held by no lease of the
// group with a lower `low`; `held` = the leases' (low, key hash) pairs; `walk_end` = one row
// (k: the last key looked at, more: the walk stopped before it had looked at every key), none
// when the group has no open keyed row. A claim costs O(room + steps), not O(open rows).
struct RetryWalkParams {
  std::string hold;   // boolean: dead rows hold their key
  std::string room;   // integer: heads to find
  std::string start;  // text: the key after which the walk starts ('' = the first key)
  std::string steps;  // integer: keys to look at, at most
};
std::string retry_key_ctes(const StreamTables& tables, const std::string& due,
                           const RetryWalkParams& params);
// The claim's CTEs for an ordered group, after retry_key_ctes: `due` locks (SKIP LOCKED) the
// walk's heads and the oldest due unkeyed rows (`loose`), the oldest $3 of them; then the retry
// chains of the heads locked here — each head's next rows in id order (at most $chain_param) while
// each is `deferred` and no lease with a lower `low` holds the key
// (runtime/store/group/README.md#per-key-ordering, "Retry chains") — are locked in the room left,
// and `taken` keeps of each chain the prefix that was locked. Columns of `taken`: message_id, was,
// chained.
std::string retry_chain_claim_ctes(const StreamTables& tables, const std::string& due,
                                   const std::string& chain_param);

}  // namespace sqlstreams::store
