#include "consume/range_work.hpp"

namespace sqlstreams::consume {

RangeWork::RangeWork(store::ClaimedRange range)
    : range_(std::move(range)),
      slots_(std::make_unique<MessageSlot[]>(range_.messages.size())),
      unresolved_(range_.messages.size()) {
  deadline_ms.store(steady_ms(range_.deadline));
  for (const auto& m : range_.messages) payload_bytes_ += static_cast<int64_t>(m.payload.size());
}

bool RangeWork::resolve(size_t i, MessageState final_state) {
  slots_[i].state.store(final_state, std::memory_order_release);
  return unresolved_.fetch_sub(1, std::memory_order_acq_rel) == 1;
}

store::RangeCommit RangeWork::to_commit(config::AuditMode audit) const {
  store::RangeCommit commit;
  commit.token = range_.token;
  if (revoked.load()) {
    commit.complete = false;
    commit.resolved_upto = range_.low;
    return commit;
  }
  size_t k = 0;
  const size_t n = range_.messages.size();
  while (k < n && slots_[k].state.load(std::memory_order_acquire) == MessageState::kDone) ++k;
  commit.complete = (k == n);
  commit.resolved_upto =
      commit.complete ? range_.high : (k == 0 ? range_.low : range_.messages[k - 1].id);
  for (size_t i = 0; i < k; ++i) {
    const MessageSlot& s = slots_[i];
    if (s.decision) commit.failures.push_back(*s.decision);
    if (!s.decision)
      commit.outputs.insert(commit.outputs.end(), s.outputs.begin(), s.outputs.end());
    bool write_audit = audit == config::AuditMode::kAll ||
                       (audit == config::AuditMode::kFailures && s.decision.has_value());
    if (write_audit && !s.audit_outcome.empty()) {
      commit.audit.push_back(store::AuditEntry{range_.messages[i].id,
                                               s.decision ? s.decision->attempts : 1,
                                               s.audit_outcome, s.audit_error, s.decided_at});
    }
  }
  return commit;
}

}  // namespace sqlstreams::consume
