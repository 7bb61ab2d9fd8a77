// The cursor advancer of GroupStore (docs/design.md#the-committed-cursor-and-the-advancer): moves
// `committed` past resolved ranges.
// Two statements: one UPDATE with the subqueries inside could combine a newer cursor row with
// older lease rows and skip a range; the write applies only under the generation it read.
#include <fmt/format.h>

#include "common/chaos_plant.hpp"
#include "store/core/pq.hpp"
#include "store/group/group_store.hpp"

namespace sqlstreams::store {

AdvanceTarget GroupStore::read_advance_target() {
  return guarded(session_, "advance cursor: read target", [&] {
    auto& conn = connection_of(session_);
    pqxx::nontransaction tx(conn);
    auto rows = exec_prepared(tx, conn, advance_read_, group_id_);
    AdvanceTarget t;
    if (rows.empty()) return t;  // a dropped group has no cursor: nothing to advance
    const auto& row = rows[0];
    t.committed = row[0].as<int64_t>();
    t.target = row[1].as<int64_t>();
    t.generation = row[2].as<int64_t>();
    if (chaos_plant("advance-without-guard")) t.target = row[3].as<int64_t>();  // test builds
    return t;
  });
}

bool GroupStore::apply_advance(const AdvanceTarget& t) {
  if (t.target <= t.committed) return false;
  return guarded(session_, "advance cursor: apply", [&] {
    auto& conn = connection_of(session_);
    pqxx::nontransaction tx(conn);
    // `generation = $3`: a target read before an operator's rewind must not move committed
    // past the rewound position, even after a fresh claim made `claimed >= target` true again.
    auto r = exec_prepared(tx, conn, advance_apply_, group_id_, t.target, t.generation);
    return r.affected_rows() == 1;
  });
}

AdvanceResult GroupStore::advance_cursor() {
  auto t = read_advance_target();
  AdvanceResult result;
  result.committed_before = t.committed;
  result.committed_after = apply_advance(t) ? t.target : t.committed;
  return result;
}

}  // namespace sqlstreams::store
