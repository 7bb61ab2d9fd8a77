// store/core/statement — INTERNAL to store/: every statement store/ sends has a name
// (STYLE L1, userver's named queries). A name is a constexpr StatementName declared at the top of
// the file that builds the statement's text (the text needs the schema and the stream's
// tables, so it is built at run time). Statements run through exec() / exec1() /
// exec_prepared() (store/core/pq.hpp), which attach the name to a failure: guarded() then
// reports it, e.g. "claim: statement sqlstreams_claim_lock_3: ERROR:  ...".
// The hot statements (claims, range reads, commits, renewals, the advancer, produce) are
// prepared once per connection under their name (prepared_name()): the same name in errors,
// in pg_prepared_statements and in logs.
// No libpqxx here: public headers keep their prepared Statements as members.
// Threading: values and pure functions.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <string>
#include <string_view>

namespace sqlstreams::store {

struct StatementName {
  std::string_view value;
};

// A statement whose text is built once and prepared per connection (exec_prepared()).
struct Statement {
  std::string name;  // the prepared statement's name: sqlstreams_<name>[_<stream id>]
  std::string sql;
};

// "sqlstreams_<name>" and, for a statement whose text differs per stream, "..._<stream id>".
inline std::string prepared_name(StatementName name) {
  return fmt::format("sqlstreams_{}", name.value);
}
inline std::string prepared_name(StatementName name, int64_t stream_id) {
  return fmt::format("sqlstreams_{}_{}", name.value, stream_id);
}

}  // namespace sqlstreams::store
