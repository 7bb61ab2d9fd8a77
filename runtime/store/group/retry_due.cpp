// GroupStore::next_retry_due — when the retry loop has something to do next (read-only) — and
// release_parked, which makes kept messages of a version the group now accepts due.
#include <fmt/format.h>

#include "store/core/pq.hpp"
#include "store/core/sql_array.hpp"
#include "store/core/sql_time.hpp"
#include "store/group/group_store.hpp"

namespace sqlstreams::store {
namespace {

constexpr StatementName kNextRetryDue{"next_retry_due"};  // store/core/statement.hpp
constexpr StatementName kReleaseParked{"release_parked"};

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

int64_t GroupStore::release_parked(const std::optional<std::vector<int32_t>>& versions) {
  std::optional<std::string> accepted;  // NULL: every parked row
  if (versions) accepted = int_array(std::vector<int64_t>(versions->begin(), versions->end()));
  return guarded(session_, "release parked rows", [&] {
    pqxx::nontransaction tx(connection_of(session_));
    // Guarded by status = 'parked' on the locked row (a parked row has no lease token): two
    // hosts releasing at once move each row once.
    auto row = exec1(
        tx, kReleaseParked,
        fmt::format("WITH r AS (UPDATE {0} SET status = 'ready', can_run_after = {1}, "
                    "updated_at = now() WHERE group_id = $1 AND can_run_after = 'infinity' AND "
                    "status = 'parked' AND ($2::integer[] IS NULL OR schema_version = "
                    "ANY($2::integer[])) RETURNING 1) SELECT count(*) FROM r",
                    tables_.exceptions, kDbNow),
        group_id_, nullable(accepted));
    return row[0].as<int64_t>();
  });
}

}  // namespace sqlstreams::store
