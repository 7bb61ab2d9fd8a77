// store/group/fence_sql — INTERNAL to store/: the SQL expression of the fence's proof
// (runtime/store/group/README.md#the-fence), for the statements that prove an observation
// (observe, claim, declare at the head). The cheap case — every transaction older than the
// observation's xid has ended — is tested inline; only when it fails does the statement call
// fence_proven() (migrations/V006), which asks the lock manager for the stream's open producers.
// Threading: pure.
#pragma once

#include <fmt/format.h>

#include <string>

namespace sqlstreams::store {

// `xid` is an SQL expression of type xid8 (a column or a bound parameter); `id_seq` the stream's
// schema-qualified sequence name. NULL proves nothing (false).
inline std::string fence_proven_sql(const std::string& schema_sql, const std::string& xid,
                                    const std::string& id_seq) {
  return fmt::format(
      "(CASE WHEN {0} IS NULL THEN false WHEN {0} <= pg_snapshot_xmin(pg_current_snapshot()) "
      "THEN true ELSE {1}.fence_proven({0}, '{2}'::regclass) END)",
      xid, schema_sql, id_seq);
}

}  // namespace sqlstreams::store
