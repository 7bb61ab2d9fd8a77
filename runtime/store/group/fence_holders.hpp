// store/group/fence_holders — who holds a fence proof back: the transactions that drew an id of
// a stream and are still open, older than the observation's xid (migrations/V006, the SQL
// function fence_holders). For the `fence-held` log line, the declaration timeout and `status`.
// Threading: the caller's transaction.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "store/connection/session.hpp"

namespace sqlstreams::store {

struct FenceHolder {
  std::optional<int> pid;        // none: a prepared transaction
  std::string role;              // empty when this role may not see it (pg_read_all_stats)
  std::string application_name;  //
  std::string client_addr;       // empty over a Unix socket
  std::string xact_start;        // ISO 8601 UTC, or the prepared time
  std::string state;             // "idle in transaction", "active", "prepared", ...
  std::string prepared_gid;      // a prepared transaction's gid
};

// "backend pid 123 (role app, application 'batch', client 10.0.0.5, transaction started
// 2026-12-03T06:00:00Z, idle in transaction)" or "prepared transaction 'gid' (...)".
std::string describe(const FenceHolder& holder);

// The holders of the proof of (xid, the stream's id sequence), oldest first. On `session`'s
// connection, which must have no transaction open.
std::vector<FenceHolder> fence_holders(Session& session, const std::string& id_seq,
                                       const std::string& xid);

}  // namespace sqlstreams::store
