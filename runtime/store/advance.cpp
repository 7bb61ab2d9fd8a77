// The cursor advancer of GroupStore (DESIGN §6.5): moves `committed` past resolved ranges.
#include <fmt/format.h>

#include "store/group_store.hpp"
#include "store/pq.hpp"

namespace sqlstreams::store {

AdvanceResult GroupStore::advance_cursor() {
  return guarded(session_, "advance cursor", [&] {
    pqxx::nontransaction tx(connection_of(session_));
    // Statement 1 reads one consistent snapshot; statement 2 applies it. One UPDATE with the
    // subqueries inside could combine a newer cursor row with older lease rows and skip a range.
    auto row = tx.exec_params1(
        fmt::format("SELECT c.committed, LEAST((SELECT min(low) FROM {} WHERE group_id = $1), "
                    "(SELECT min(message_id) - 1 FROM {} WHERE group_id = $1 AND status <> "
                    "'dead'), c.claimed) FROM {} c WHERE c.group_id = $1",
                    leases_, exceptions_, cursors_),
        group_id_);
    AdvanceResult result;
    result.committed_before = row[0].as<int64_t>();
    int64_t target = row[1].as<int64_t>();
    result.committed_after = result.committed_before;
    if (target > result.committed_before) {
      // `claimed >= $2`: a target read before an operator's rewind must not move committed
      // past the rewound position.
      tx.exec_params(fmt::format("UPDATE {} SET committed = GREATEST(committed, $2) WHERE "
                                 "group_id = $1 AND committed < $2 AND claimed >= $2",
                                 cursors_),
                     group_id_, target);
      result.committed_after = target;
    }
    return result;
  });
}

}  // namespace sqlstreams::store
