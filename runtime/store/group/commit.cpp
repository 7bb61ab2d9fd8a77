// The resolve side of GroupStore: token-guarded range commits (isolating rows the database
// refuses, resolving in-doubt commits) and lease renewal.
#include <fmt/format.h>

#include <map>
#include <set>

#include "common/chaos_plant.hpp"
#include "store/core/pq.hpp"
#include "store/core/sql_array.hpp"
#include "store/core/sql_time.hpp"
#include "store/group/group_store.hpp"
#include "store/group/outcome_rows.hpp"

namespace sqlstreams::store {
namespace {

// Statement names (store/core/statement.hpp).
constexpr StatementName kXactStatus{"xact_status"};

}  // namespace

std::vector<bool> GroupStore::commit_ranges(const std::vector<RangeCommit>& ranges,
                                            std::vector<RejectedWrite>* isolate) {
  in_doubt_.reset();
  if (ranges.empty()) return {};
  std::vector<const EmittedMessage*> all_outputs;
  for (const auto& r : ranges) {
    for (const auto& o : r.outputs) all_outputs.push_back(&o);
  }
  std::map<std::string, std::pair<int64_t, size_t>> written;
  auto committed_ranges = guarded(session_, "commit ranges", [&] {
    prepare_outputs(all_outputs);
    auto& conn = connection_of(session_);
    pqxx::work tx(conn);
    std::vector<std::string> complete, partial;
    std::vector<int64_t> partial_low;
    for (const auto& r : ranges) {
      if (r.complete) {
        complete.push_back(r.token);
      } else {
        partial.push_back(r.token);
        partial_low.push_back(r.resolved_upto);
      }
    }
    // Each statement takes its leases by token and deletes the old exception rows of the
    // resolved span (a re-delivery after a rewind) except those inflight under a retry lease
    // and those whose message is no longer in the log: retention removed it before the rewound
    // group got back to it, so this range did not deliver it again and its row (a dead letter
    // carrying its payload) is the only record left. (Found by tests/chaos.)
    std::set<std::string> ours;
    std::string xid;
    auto take = [&](const pqxx::result& r) {
      for (const auto& row : r) {
        ours.insert(row[0].as<std::string>());
        xid = row[1].as<std::string>();
      }
    };
    if (!complete.empty()) {
      take(exec_prepared(tx, conn, commit_complete_, group_id_, text_array(complete)));
    }
    if (!partial.empty()) {
      // Shrink to the unresolved rest and make it immediately reclaimable (not a crash).
      take(exec_prepared(tx, conn, commit_partial_, group_id_, text_array(partial),
                         int_array(partial_low)));
    }
    std::vector<FailedMessage> failures;
    std::vector<AuditEntry> audit;
    std::vector<bool> committed;
    std::vector<const EmittedMessage*> outputs;  // of the ranges still ours, in range order
    for (const auto& r : ranges) {
      bool ok = ours.count(r.token) > 0 || chaos_plant("commit-without-token");  // test builds
      committed.push_back(ok);
      // Test builds: the planted defect writes a lost range's outputs (tests/chaos `emits`).
      if (ok || chaos_plant("emit-without-token")) {
        for (const auto& o : r.outputs) outputs.push_back(&o);
      }
      if (!ok) continue;  // lease lost to a reclaim: discard these outcomes and outputs
      if (isolate != nullptr) {
        insert_exceptions_isolated(tx, tables_.exceptions, tables_.messages, group_id_, r.failures,
                                   *isolate);
        insert_audit_isolated(tx, tables_.deliveries, group_id_, holder_, r.audit, *isolate);
        continue;
      }
      failures.insert(failures.end(), r.failures.begin(), r.failures.end());
      audit.insert(audit.end(), r.audit.begin(), r.audit.end());
    }
    insert_exceptions(tx, tables_.exceptions, tables_.messages, group_id_, failures);
    insert_audit(tx, tables_.deliveries, group_id_, holder_, audit);
    written = write_outputs(tx, outputs);
    if (!ours.empty()) in_doubt_ = InDoubtCommit{xid, committed};
    commit_keeping_doubt(tx, in_doubt_);
    return committed;
  });
  make_room_after(written);
  return committed_ranges;
}

InDoubtResolution GroupStore::resolve_in_doubt() {
  if (!in_doubt_) return InDoubtResolution::kUnknown;
  auto status = guarded(session_, "resolve in-doubt commit", [&] {
    pqxx::nontransaction tx(connection_of(session_));
    auto row = exec1(tx, kXactStatus, "SELECT pg_xact_status($1::xid8)", in_doubt_->xid);
    return row[0].is_null() ? std::string() : row[0].as<std::string>();
  });
  if (status == "in progress") {
    throw StoreError(StoreError::Kind::kTransient,
                     "resolve in-doubt commit: transaction " + in_doubt_->xid + " still running");
  }
  in_doubt_.reset();
  if (status == "committed") return InDoubtResolution::kCommitted;
  if (status == "aborted") return InDoubtResolution::kAborted;
  return InDoubtResolution::kUnknown;
}

std::vector<std::string> GroupStore::renew_leases(const std::vector<std::string>& tokens,
                                                  Millis lease_ttl) {
  if (tokens.empty()) return {};
  return guarded(session_, "renew leases", [&] {
    auto& conn = connection_of(session_);
    pqxx::nontransaction tx(conn);
    return tokens_not_returned(tokens, exec_prepared(tx, conn, renew_, group_id_,
                                                     text_array(tokens), ms_param(lease_ttl)));
  });
}

}  // namespace sqlstreams::store
