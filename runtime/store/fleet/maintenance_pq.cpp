#include "store/fleet/maintenance_pq.hpp"

#include <algorithm>

#include "store/core/pq.hpp"
#include "store/core/stream_tables.hpp"

namespace sqlstreams::store {
namespace {

// Statement names (store/core/statement.hpp).
constexpr StatementName kPartitionIndexes{"partition_indexes"};
constexpr StatementName kLastDrawnId{"last_drawn_id"};
constexpr StatementName kCheckFence{"check_fence"};

}  // namespace

std::vector<int64_t> partition_indexes(pqxx::transaction_base& tx, const Session& session,
                                       int64_t stream_id) {
  const StreamTables t(session.schema_sql(), stream_id);
  const std::string& parent = t.messages;
  const std::string prefix = t.partition_prefix();
  std::vector<int64_t> out;
  auto rows = exec(tx, kPartitionIndexes,
                   "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = "
                   "i.inhrelid WHERE i.inhparent = to_regclass($1)",
                   parent);
  for (const auto& row : rows) {
    auto name = row[0].as<std::string>();
    if (name.rfind(prefix, 0) != 0) continue;
    out.push_back(std::stoll(name.substr(prefix.size())));
  }
  std::sort(out.begin(), out.end());
  return out;
}

int64_t last_drawn_id(pqxx::transaction_base& tx, const Session& session, int64_t stream_id) {
  return exec(tx, kLastDrawnId,
              fmt::format("SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM {}",
                          StreamTables(session.schema_sql(), stream_id).id_seq))[0][0]
      .as<int64_t>();
}

void check_fence(pqxx::transaction_base& tx, const Session& session, const WorkerFence* fence,
                 const char* what, FenceCheck mode) {
  if (!fence) return;
  auto r = exec(
      tx, kCheckFence,
      fmt::format("SELECT 1 FROM {}.workers WHERE id = $1 AND token = "
                  "$2::uuid AND expires_at > {}{}",
                  session.schema_sql(), kDbNow, mode == FenceCheck::kLockRow ? " FOR SHARE" : ""),
      fence->worker_id, fence->token);
  if (r.empty()) throw FencedOut(what);
}

}  // namespace sqlstreams::store
