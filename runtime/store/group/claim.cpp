// The claim side of GroupStore: observe, claim, reclaim/quarantine, NOTIFY wake-ups.
#include <fmt/format.h>

#include <algorithm>
#include <iterator>

#include "common/chaos_plant.hpp"
#include "store/core/one_trip_transaction.hpp"
#include "store/core/pq.hpp"
#include "store/core/sql_array.hpp"
#include "store/core/sql_time.hpp"
#include "store/group/claim_plan.hpp"
#include "store/group/fence_holders_tx.hpp"
#include "store/group/group_store.hpp"
#include "store/group/ordering_sql.hpp"

namespace sqlstreams::store {
namespace {

// Statement names (store/core/statement.hpp); the prepared ones are in group_store.cpp.
constexpr StatementName kQuarantineRows{"quarantine_rows"};
constexpr StatementName kQuarantineLease{"quarantine_lease"};
constexpr StatementName kPendingXid{"pending_xid"};

std::vector<StoredMessage> read_range(pqxx::transaction_base& tx, pqxx::connection_base& conn,
                                      const Statement& statement, int64_t low, int64_t high) {
  std::vector<StoredMessage> out;
  auto rows = exec_prepared(tx, conn, statement, low, high);
  out.reserve(rows.size());
  for (const auto& row : rows) out.push_back(message_from_row(row));
  return out;
}

// Retention may have removed ids of a cached span since it was read (a lagging group under
// allow_drop_past_committed, a rewind or reclaim into swept history). Ids in a final span are
// never added, only removed, and the span's messages are all the ids it had: the same count
// now means the same rows. Runs only when the cache answered, in the claim's transaction (the
// same snapshot a read of the span would use). On a mismatch the cache forgets the span and
// everything below it, and the claim reads.
bool still_stored(pqxx::transaction_base& tx, pqxx::connection_base& conn,
                  const Statement& count_range, RangeCache& cache, int64_t low,
                  const CachedSpan& hit) {
  const auto rows = exec_prepared(tx, conn, count_range, low, hit.high);
  if (rows.at(0)[0].as<int64_t>() == static_cast<int64_t>(hit.messages.size())) return true;
  cache.forget_below(hit.high);
  return false;
}

class WakeReceiver final : public pqxx::notification_receiver {
 public:
  WakeReceiver(pqxx::connection_base& c, const std::string& channel, int& counter)
      : pqxx::notification_receiver(c, channel), counter_(counter) {}
  void operator()(const std::string&, int) override { ++counter_; }

 private:
  int& counter_;
};

}  // namespace

Observation GroupStore::observe() {
  return guarded(session_, "observe", [&] {
    // Alone, on a connection with no open transaction: the statement's snapshot precedes the
    // xid it takes, so every producer that could own an id <= head has a smaller xid.
    auto& conn = connection_of(session_);
    pqxx::nontransaction tx(conn);
    auto rows = exec_prepared(tx, conn, observe_, group_id_);
    if (rows.size() != 1) {
      throw StoreError(StoreError::Kind::kOther,
                       fmt::format("observe: no cursor row for group {}", group_id_));
    }
    const auto& row = rows[0];
    Observation obs;
    obs.head = row[0].as<int64_t>();
    obs.claimed = row[1].as<int64_t>();
    obs.settled_head = row[2].as<int64_t>();
    obs.pending = row[3].as<bool>();
    obs.pending_proven = row[4].as<bool>();
    if (!row[5].is_null()) obs.xid = row[5].as<std::string>();
    return obs;
  });
}

std::vector<FenceHolder> GroupStore::fence_holders() {
  return guarded(session_, "fence holders", [&] {
    pqxx::nontransaction tx(connection_of(session_));
    auto rows =
        exec(tx, kPendingXid,
             fmt::format("SELECT pending_xid::text FROM {} WHERE group_id = $1", tables_.cursors),
             group_id_);
    if (rows.empty() || rows[0][0].is_null()) return std::vector<FenceHolder>{};
    return store::fence_holders(tx, session_.schema_sql(), tables_.id_seq,
                                rows[0][0].as<std::string>());
  });
}

ClaimResult GroupStore::claim(const Observation& obs, int32_t batch, Millis lease_ttl,
                              RangeCache* cache, ClaimBudget budget) {
  // Outside the transaction: a wait for another group's read of these ids holds nothing.
  if (cache && obs.head > obs.claimed) cache->await_read(obs.claimed);
  return guarded(session_, "claim", [&] {
    // Taken before the lease's statement is sent: this host's deadline is never later than
    // the expiry the database computes from its own clock.
    const SteadyTime deadline = std::chrono::steady_clock::now() + lease_ttl;
    auto& conn = connection_of(session_);
    // BEGIN travels with the cursor's lock (store/core/one_trip_transaction.hpp): four round
    // trips for a claim that reads, six before (README "The claim in round trips").
    OneTripTransaction block(conn);
    auto& tx = block.tx();
    // Prove in a later statement: xmin >= xid means every older transaction has ended.
    auto locked = block.begin_with(claim_lock_, {std::to_string(group_id_), obs.xid});
    if (locked.size() != 1) {
      throw StoreError(StoreError::Kind::kOther,
                       fmt::format("claim: no cursor row for group {}", group_id_));
    }
    const auto& cur = locked[0];
    const int64_t claimed = cur[0].as<int64_t>();
    const int64_t settled = cur[1].as<int64_t>();
    std::optional<int64_t> pending_head;
    std::optional<std::string> pending_xid;
    if (!cur[2].is_null()) pending_head = cur[2].as<int64_t>();
    if (!cur[3].is_null()) pending_xid = cur[3].as<std::string>();
    const bool pending_proven = cur[4].as<bool>();
    const bool obs_proven = cur[5].as<bool>();

    ClaimInputs in{claimed,  settled, pending_head, pending_xid, pending_proven,
                   obs.head, obs.xid, obs_proven,   batch};
    bool unproven = false;                     // a planted defect: nothing read here may be shared
    if (chaos_plant("claim-without-proof")) {  // test builds: the observation counts as proven
      if (!in.observed_xid) in.observed_xid = "0";
      in.observed_proven = true;
      unproven = true;
    }
    const ClaimPlan plan = plan_claim(in);  // the fence arithmetic (claim_plan.hpp)
    const int64_t proven = plan.proven;
    const std::optional<int64_t>& new_pending_head = plan.pending_head;
    const std::optional<std::string>& new_pending_xid = plan.pending_xid;
    int64_t new_claimed = plan.claimed;
    ClaimResult result;
    result.proven = proven;
    // The range's messages are read (or taken from the cache) before the cursor moves and the
    // lease is written: the byte budget may end the range before plan.claimed, and the cursor
    // and the lease must end exactly where the read stopped (no id skipped, none read twice).
    ClaimedRange range;
    range.low = claimed;
    range.cached_high = claimed;
    if (new_claimed > claimed) {
      int64_t bytes = 0;  // payload bytes taken so far
      // Another group's read of a prefix of (claimed, new_claimed] is final
      // (docs/design.md#sharing-a-range-read): take that prefix from it and read only the rest.
      std::optional<CachedSpan> hit;
      if (cache) {
        hit = cache->lookup(claimed, new_claimed);
        // Never past what the fence allows, whatever the cache answers.
        if (hit && (hit->high <= claimed || hit->high > new_claimed)) hit.reset();
        // Nor rows that retention has removed since they were read.
        if (hit && !still_stored(tx, conn, count_range_, *cache, claimed, *hit)) hit.reset();
      }
      if (hit) {
        // The cached prefix under the budget: a cut inside it ends the range at its last
        // message that fits (nothing is read then).
        size_t fit = 0;
        for (; fit < hit->messages.size(); ++fit) {
          const auto size = static_cast<int64_t>(hit->messages[fit].payload.size());
          if (bytes + size > budget.bytes && !(fit == 0 && budget.first_always)) break;
          bytes += size;
        }
        if (fit < hit->messages.size()) {
          result.next_bytes = static_cast<int64_t>(hit->messages[fit].payload.size());
          hit->high = fit == 0 ? claimed : hit->messages[fit - 1].id;
          hit->messages.resize(fit);
          new_claimed = hit->high;
          result.budget_cut = true;
        }
        if (hit->high > claimed) {
          range.messages = std::move(hit->messages);
          range.from_cache = true;
          range.cached_high = hit->high;
        }
      }
      if (!result.budget_cut && range.cached_high < new_claimed) {
        // A later statement than the proof: its snapshot is no older than the proof. The
        // statement stops at the budget (the rows past it are not sent).
        const bool first_always = budget.first_always && range.messages.empty();
        // Most ranges are far below the budget: read_checked_ sends them whole after a cheap
        // look at the stored sizes, and sends nothing when the range might reach the budget.
        const int64_t left = budget.bytes - bytes;
        auto rows = exec_prepared(tx, conn, read_checked_, range.cached_high, new_claimed, left);
        if (rows.empty()) {
          rows = exec_prepared(tx, conn, read_budget_, range.cached_high, new_claimed, left,
                               first_always);
        }
        // A last row without its payload is the range's first message, which did not fit:
        // only its size came back.
        size_t sent = rows.size();
        if (sent > 0 && rows[sent - 1][4].is_null()) --sent;
        std::vector<StoredMessage> read;
        read.reserve(sent);
        for (size_t i = 0; i < sent; ++i) read.push_back(message_from_row(rows[i]));
        if (sent == 0 ? !first_always : !rows[sent - 1][5].is_null()) {
          // Cut: the range ends at the last message sent (a later message of the range exists),
          // or, when nothing fit (or nothing is there: unknown without a first message), where
          // the cached prefix ended. The next claim starts right there.
          new_claimed = read.empty() ? range.cached_high : read.back().id;
          result.budget_cut = true;
          if (!rows.empty() && !rows[rows.size() - 1][6].is_null()) {
            result.next_bytes = rows[rows.size() - 1][6].as<int64_t>();
          }
        }
        // new_claimed <= proven and every message of (cached_high, new_claimed] was read: the
        // read is final and may serve the other groups.
        if (cache && !unproven && new_claimed > range.cached_high) {
          cache->fill(range.cached_high, new_claimed, read);
        }
        if (range.messages.empty()) {
          range.messages = std::move(read);
        } else {
          range.messages.insert(range.messages.end(), std::make_move_iterator(read.begin()),
                                std::make_move_iterator(read.end()));
        }
      }
      result.budget_full = new_claimed == claimed;
    }

    const std::optional<std::string> pending_head_param =
        new_pending_head ? std::optional<std::string>(std::to_string(*new_pending_head))
                         : std::nullopt;
    if (new_claimed > claimed) {
      // The cursor moves and the range's lease is written in one statement.
      range.high = new_claimed;
      range.deadline = deadline;
      pqxx::result lease;
      if (ordering_ == OrderingMode::kNone) {
        lease = exec_prepared(tx, conn, claim_update_lease_, group_id_, new_claimed, proven,
                              nullable(pending_head_param), nullable(new_pending_xid), claimed,
                              ms_param(lease_ttl), holder_);
      } else {
        // An ordered group's lease carries the range's key hashes.
        range.key_array = distinct_key_array(range.messages);
        lease = exec_prepared(tx, conn, claim_update_lease_keys_, group_id_, new_claimed, proven,
                              nullable(pending_head_param), nullable(new_pending_xid), claimed,
                              ms_param(lease_ttl), holder_, range.key_array);
      }
      range.token = lease.at(0)[0].as<std::string>();
      result.range = std::move(range);
      result.wrote = true;
    } else if (proven != settled || new_pending_head != pending_head ||
               new_pending_xid != pending_xid) {
      exec_prepared(tx, conn, claim_update_, group_id_, new_claimed, proven,
                    nullable(pending_head_param), nullable(new_pending_xid));
      result.wrote = true;
    }
    block.commit();  // even when empty: the pending observation must persist
    if (cache) cache->note_claimed(new_claimed);
    return result;
  });
}

ReclaimResult GroupStore::reclaim_expired(Millis lease_ttl, int32_t max_reclaims,
                                          RangeCache* cache) {
  return guarded(session_, "reclaim", [&] {
    const SteadyTime deadline = std::chrono::steady_clock::now() + lease_ttl;
    auto& conn = connection_of(session_);
    pqxx::work tx(conn);
    auto rows = exec_prepared(tx, conn, reclaim_, group_id_, ms_param(lease_ttl), holder_);
    ReclaimResult result;
    if (rows.empty()) {
      tx.commit();
      return result;
    }
    result.found = true;
    ClaimedRange range;
    range.token = rows[0][0].as<std::string>();
    range.low = rows[0][1].as<int64_t>();
    range.high = rows[0][2].as<int64_t>();
    range.reclaims = rows[0][3].as<int32_t>();
    range.deadline = deadline;
    if (range.reclaims >= max_reclaims) {
      // Poison range: every message becomes an independent ready exception.
      exec(tx, kQuarantineRows,
           fmt::format("INSERT INTO {0} (group_id, message_id, status, attempts, can_run_after, "
                       "last_error, schema_version, message_key, message_created_at, lane_key) "
                       "SELECT $1, id, 'ready', 0, {2}, $2, schema_version, message_key, "
                       "created_at, CASE WHEN $5::boolean THEN message_key END FROM {1} "
                       "WHERE id > $3 AND id <= $4 ON CONFLICT (group_id, message_id) DO NOTHING",
                       tables_.exceptions, tables_.messages, kDbNow),
           group_id_,
           fmt::format("range ({}, {}] quarantined after {} reclaims", range.low, range.high,
                       range.reclaims),
           range.low, range.high, ordering_ != OrderingMode::kNone);  // ordered: keep the key
      exec(tx, kQuarantineLease,
           fmt::format("DELETE FROM {} WHERE group_id = $1 AND token = $2::uuid", tables_.leases),
           group_id_, range.token);
      tx.commit();
      result.quarantined = std::move(range);
      return result;
    }
    std::optional<CachedSpan> hit;
    if (cache && range.high > range.low) hit = cache->lookup(range.low, range.high);
    range.cached_high = range.low;
    if (hit && hit->high == range.high &&
        still_stored(tx, conn, count_range_, *cache, range.low, *hit)) {
      range.messages = std::move(hit->messages);
      range.from_cache = true;
      range.cached_high = range.high;
    } else {
      range.messages = read_range(tx, conn, read_range_, range.low, range.high);
    }
    tx.commit();
    result.range = std::move(range);
    return result;
  });
}

bool GroupStore::wait_for_notify(Millis timeout) {
  return guarded(session_, "wait for notify", [&] {
    auto& conn = connection_of(session_);
    auto& impl = session_.impl();
    if (impl.receivers.empty()) {
      impl.receivers.push_back(
          std::make_unique<WakeReceiver>(conn, tables_.channel(), impl.notifications));
    }
    int before = impl.notifications;
    if (conn.get_notifs() > 0 || impl.notifications != before) return true;
    long us = static_cast<long>(timeout.count()) * 1000;
    conn.await_notification(us / 1'000'000, us % 1'000'000);
    return impl.notifications != before;
  });
}

}  // namespace sqlstreams::store
