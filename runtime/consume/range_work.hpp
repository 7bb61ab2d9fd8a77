// consume/range_work — the range tracker: one claimed range and the outcome of each message.
// Workers resolve slots concurrently; the last resolution hands the range to the committer,
// which turns it into a store::RangeCommit (complete, or the resolved prefix when some
// messages were skipped: shutdown, a lost lease, too little lease time left).
// Threading: slots are written by one worker each and published with release/acquire; the
// commit is built only after `unresolved` reached zero or on the final flush.
#pragma once

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "store/group/group_store.hpp"

namespace sqlstreams::consume {

enum class MessageState : uint8_t { kPending, kRunning, kDone, kSkipped };

struct MessageSlot {
  std::atomic<MessageState> state{MessageState::kPending};
  std::atomic<bool> taken{false};  // first resolver wins (a worker or the timeout watchdog)
  std::optional<store::FailedMessage> decision;  // written before state becomes kDone
  std::string audit_outcome;                     // "" = nothing to audit
  std::string audit_error;
  SysTime decided_at{};
  // A success's outputs (the group emits: docs/operating/emits.md), written with the commit.
  std::vector<store::EmittedMessage> outputs;
  // A member of a key lane (ordering = "key"; guarded by the range queue's lock): its
  // resolution moves the lane on (consume/key_lanes.hpp).
  bool laned = false;
};

class RangeWork {
 public:
  explicit RangeWork(store::ClaimedRange range);

  store::ClaimedRange& range() { return range_; }
  const store::ClaimedRange& range() const { return range_; }
  size_t size() const { return range_.messages.size(); }
  // The payload bytes of its messages as claimed (what queue_bytes counts; fixed at the claim).
  int64_t payload_bytes() const { return payload_bytes_; }
  MessageSlot& slot(size_t i) { return slots_[i]; }

  // Marks slot i resolved (kDone or kSkipped); returns true for the last resolution.
  bool resolve(size_t i, MessageState final_state);
  bool finished() const { return unresolved_.load(std::memory_order_acquire) == 0; }

  std::atomic<bool> lost{false};
  // Ordered groups: an earlier range of this host lost its lease, and this one may hold
  // successes that started after that range's messages resolved in memory. It commits nothing
  // and hands its lease back (to_commit), so replay of each key stays a suffix.
  std::atomic<bool> revoked{false};
  // This host's lease deadline (steady_clock, ms since its epoch): moved by each renewal.
  std::atomic<int64_t> deadline_ms{0};

  // The commit for the resolved prefix (complete when every slot is kDone); nothing but the
  // hand-back when revoked.
  store::RangeCommit to_commit(config::AuditMode audit) const;

 private:
  store::ClaimedRange range_;
  int64_t payload_bytes_ = 0;
  std::unique_ptr<MessageSlot[]> slots_;
  std::atomic<size_t> unresolved_;
};

// One claimed exception row being retried.
struct RetryWork {
  explicit RetryWork(store::RetryClaim c)
      : claim(std::move(c)), deadline_ms(steady_ms(claim.deadline)) {}
  store::RetryClaim claim;
  std::atomic<bool> taken{false};
  std::atomic<bool> lost{false};
  // Ordered groups: an earlier range of this host lost its lease, and this one may hold
  // successes that started after that range's messages resolved in memory. It commits nothing
  // and hands its lease back (to_commit), so replay of each key stays a suffix.
  std::atomic<bool> revoked{false};
  std::atomic<int64_t> deadline_ms;  // as RangeWork::deadline_ms
};

}  // namespace sqlstreams::consume
