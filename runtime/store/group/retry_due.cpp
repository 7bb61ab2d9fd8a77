// GroupStore::next_retry_due — when the retry loop has something to do next (read-only).
#include <fmt/format.h>

#include "store/core/pq.hpp"
#include "store/core/sql_time.hpp"
#include "store/group/group_store.hpp"

namespace sqlstreams::store {
namespace {

constexpr StatementName kNextRetryDue{"next_retry_due"};  // store/core/statement.hpp

}  // namespace

std::optional<Millis> GroupStore::next_retry_due() {
  return guarded(session_, "next retry due", [&]() -> std::optional<Millis> {
    pqxx::nontransaction tx(connection_of(session_));
    // Two index-ordered probes (exceptions_N_due is on (group_id, can_run_after) for non-dead
    // rows), measured from the database clock the claim compares with.
    auto row = exec1(
        tx, kNextRetryDue,
        fmt::format("SELECT {}",
                    to_epoch_ms(fmt::format(
                        "LEAST((SELECT can_run_after FROM {0} WHERE group_id = $1 AND status = "
                        "'ready' ORDER BY can_run_after LIMIT 1), (SELECT min(lease_expires_at) "
                        "FROM {0} WHERE group_id = $1 AND status = 'inflight')) - {1}",
                        tables_.exceptions, kDbNow))),
        group_id_);
    if (row[0].is_null()) return std::nullopt;
    return Millis(row[0].as<int64_t>());
  });
}

}  // namespace sqlstreams::store
