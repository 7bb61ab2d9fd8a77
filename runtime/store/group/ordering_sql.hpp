// store/group/ordering_sql — INTERNAL to store/group: the SQL of per-key ordering (README
// "Per-key ordering"): the key gate (one statement; its two halves exist only for the
// split-check regression test and the chaos plant `gate-split`) and the retry claim's key
// predicate. Threading: pure functions.
#pragma once

#include <string>

#include "store/core/stream_tables.hpp"

namespace sqlstreams::store {

// Parameters: $1 group, $2 the range's distinct keys (text[]), $3 range.low, $4 own tokens
// (uuid[]), $5 dead rows hold their key (boolean). Rows: key, blocked_from (NULL = none),
// gated_by_other. kRows / kLeases: only that half (the other column NULL / false).
enum class GateParts { kBoth, kRows, kLeases };
std::string gate_keys_sql(const StreamTables& tables, GateParts parts);

// "row e may run now as far as its key goes", for claim_due_retries(): true for a row without a
// lane_key; otherwise no other unresolved row of its key with a lower id ($hold: dead counts)
// and no lease of the group with low < e.message_id holding hashtext(e.lane_key).
std::string retry_key_free_sql(const StreamTables& tables, const std::string& hold_param);

}  // namespace sqlstreams::store
