// store/group/isolate — INTERNAL to store/: savepoint isolation for poison-proof commits
// (docs/design.md#poison-proof-commits). A batch write that the database refuses deterministically
// (SQLSTATE class 22/23) is retried piecewise under savepoints so one refused row cannot fail the
// rows around it.
// Threading: used inside one transaction of one thread.
#pragma once

#include <optional>
#include <pqxx/pqxx>
#include <string>

#include "common/utf8.hpp"
#include "store/core/pq.hpp"
#include "store/errors.hpp"
#include "store/group/group_store.hpp"

namespace sqlstreams::store {

// Statement names (store/core/statement.hpp).
inline constexpr StatementName kSavepoint{"savepoint"};
inline constexpr StatementName kRollbackToSavepoint{"rollback_to_savepoint"};
inline constexpr StatementName kReleaseSavepoint{"release_savepoint"};

struct Refusal {
  std::string sqlstate;
  std::string message;
};

// The error recorded for a refused outcome, and the fixed ASCII one used when even that (with
// its payload copy) is refused.
// Only the primary message is kept: its DETAIL may quote the refused row itself.
inline std::string rejection_error(const Refusal& r) {
  std::string message = r.message.substr(0, r.message.find('\n'));
  if (message.rfind("ERROR:", 0) == 0) message.erase(0, message.find_first_not_of(' ', 6));
  return sanitize_utf8("commit rejected: " + r.sqlstate + " " + message, 1024);
}
inline std::string fixed_rejection(const std::string& sqlstate) {
  std::string code;
  for (char c : sqlstate) {
    if ((c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z')) code += c;
  }
  return "commit rejected: " + code +
         " (the outcome was refused even as a dead letter with its "
         "payload; payload not copied)";
}

// Runs `write(tx)` inside a savepoint of `tx`. Returns the refusal when the database rejected
// it deterministically (rolled back to the savepoint: `tx` stays usable); rethrows anything
// else. Plain SAVEPOINT statements: libpqxx 6.4's subtransaction does not send its SAVEPOINT
// before an exec_params.
template <class Write>
std::optional<Refusal> in_savepoint(pqxx::dbtransaction& tx, Write&& write) {
  exec(tx, kSavepoint, "SAVEPOINT sqlstreams_isolate");
  try {
    write(static_cast<pqxx::transaction_base&>(tx));
  } catch (const pqxx::sql_error& e) {
    if (!StoreError::is_deterministic(condition_of(sqlstate_of(e)))) throw;
    exec(tx, kRollbackToSavepoint,
         "ROLLBACK TO SAVEPOINT sqlstreams_isolate; RELEASE SAVEPOINT sqlstreams_isolate");
    return Refusal{sqlstate_of(e), e.what()};
  }
  exec(tx, kReleaseSavepoint, "RELEASE SAVEPOINT sqlstreams_isolate");
  return std::nullopt;
}

}  // namespace sqlstreams::store
