// store/fleet/maintenance_pq — INTERNAL to store/: SQL helpers shared by the janitor, the worker
// leases and status. Never include outside store/.
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <pqxx/pqxx>
#include <string>
#include <thread>
#include <vector>

#include "store/connection/session.hpp"
#include "store/core/sql_time.hpp"
#include "store/errors.hpp"
#include "store/fleet/worker_leases.hpp"

namespace sqlstreams::store {

enum class FenceCheck {
  kLockRow,  // FOR SHARE: a steal waits for this transaction (assigns the transaction an xid)
  kRead,     // a plain read: no xid, for a step that turns out to have nothing to write
};

// Throws FencedOut unless the lease row still carries the fence's token and has not expired by
// the database's clock. No-op without fence. A DDL step takes its table locks (retry_busy_lock)
// BEFORE kLockRow.
void check_fence(pqxx::transaction_base& tx, const Session& session, const WorkerFence* fence,
                 const char* what, FenceCheck mode = FenceCheck::kLockRow);

// PostgreSQL gives a transaction an xid as soon as it REQUESTS an ACCESS EXCLUSIVE table lock
// (to WAL-log it for standbys, wal_level >= replica), before it waits in the queue. Queued
// DDL would hold back every claimer's proof (docs/design.md#the-claim-fence) — and every reader
// queued behind it — for as long as it waits. So a DDL step never queues: `attempt` runs one whole
// transaction that takes its table locks with NOWAIT; while they are busy (55P03) that
// transaction is gone at once (its xid with it) and `attempt` runs again after a short pause,
// holding nothing, until `budget` is spent; then the 55P03 StoreError propagates (the step
// runs again on a later pass).
template <class Fn>
auto retry_busy_lock(Millis budget, Fn&& attempt) -> decltype(attempt()) {
  const auto deadline = std::chrono::steady_clock::now() + budget;
  Millis pause{2};
  for (;;) {
    try {
      return attempt();
    } catch (const StoreError& e) {
      if (e.condition() != Condition::kLockNotAvailable ||
          std::chrono::steady_clock::now() + pause >= deadline)
        throw;
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, Millis(50));
  }
}

// The partition numbers k of messages_N that exist (messages_N_p<k> holds ids
// [k*size+1, (k+1)*size+1)), ascending.
std::vector<int64_t> partition_indexes(pqxx::transaction_base& tx, const Session& session,
                                       int64_t stream_id);

// The highest id the stream's sequence has handed out (0 = none yet).
int64_t last_drawn_id(pqxx::transaction_base& tx, const Session& session, int64_t stream_id);

}  // namespace sqlstreams::store
