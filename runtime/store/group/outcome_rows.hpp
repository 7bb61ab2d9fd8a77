// store/group/outcome_rows — INTERNAL to store/group: the rows an outcome writes
// (docs/design.md#retries-exception-rows-and-dead-letters): exception rows of a committed range
// (insert_exceptions), a retry attempt's result under its row lease token (update_failures) and
// audit rows (insert_audit), each plainly (one statement for all rows) and isolated (each row under
// its own savepoint, store/group/isolate.hpp: a row the database refuses deterministically is
// recorded dead instead, reported in `rejected`). A dead row copies the message's metadata from the
// stream's log `messages` (docs/design.md#payload-schema-versions).
// Threading: inside one transaction of one thread.
#pragma once

#include <cstdint>
#include <optional>
#include <pqxx/pqxx>
#include <set>
#include <string>
#include <vector>

#include "store/group/group_store.hpp"

namespace sqlstreams::store {

// Audit rows (deliveries_N); isolated: a refused row is written again with fixed_rejection() as
// its error (dropped if even that is refused) and reported as audit_only.
void insert_audit(pqxx::transaction_base& tx, const std::string& table, int64_t group_id,
                  const std::string& holder, const std::vector<AuditEntry>& rows);
void insert_audit_isolated(pqxx::dbtransaction& tx, const std::string& table, int64_t group_id,
                           const std::string& holder, const std::vector<AuditEntry>& rows,
                           std::vector<RejectedWrite>& rejected);

// Exception rows of a committed range (a conflict is a row in flight under a retry lease: its
// holder writes that message's outcome).
void insert_exceptions(pqxx::transaction_base& tx, const std::string& table,
                       const std::string& messages, int64_t group_id,
                       const std::vector<FailedMessage>& rows);
void insert_exceptions_isolated(pqxx::dbtransaction& tx, const std::string& table,
                                const std::string& messages, int64_t group_id,
                                const std::vector<FailedMessage>& rows,
                                std::vector<RejectedWrite>& rejected);

// A failed retry attempt, written under its row lease token.
struct TokenFailure {
  std::string token;
  FailedMessage failure;
};
// Adds to `ours` the tokens that still matched. Keyed by token, not message id: one batch may
// hold two results for one message (a claim whose lease expired before it returned, then the
// claim that took the row over); only the current token's result is the row's outcome.
void update_failures(pqxx::transaction_base& tx, const std::string& table,
                     const std::string& messages, int64_t group_id,
                     const std::vector<TokenFailure>& rows, std::set<std::string>& ours);
void update_failures_isolated(pqxx::dbtransaction& tx, const std::string& table,
                              const std::string& messages, int64_t group_id,
                              const std::vector<TokenFailure>& rows, std::set<std::string>& ours,
                              std::vector<RejectedWrite>& rejected);

// Commits a transaction that wrote outcomes. `in_doubt` (set by the caller beforehand when
// something was written: the transaction's xid and what it would report) survives only when the
// COMMIT's outcome is unknown (pqxx::in_doubt_error, rethrown): the caller then asks with
// GroupStore::resolve_in_doubt(). Any other end clears it.
void commit_keeping_doubt(pqxx::dbtransaction& tx, std::optional<InDoubtCommit>& in_doubt);

// The tokens of `sent` that a `... RETURNING token::text` statement did not return: the leases
// that are no longer ours.
std::vector<std::string> tokens_not_returned(const std::vector<std::string>& sent,
                                             const pqxx::result& returned);

}  // namespace sqlstreams::store
