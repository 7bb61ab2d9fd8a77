// store/group/claim_plan — the fence arithmetic of a claim (docs/design.md#the-claim-fence), as a
// pure function that GroupStore::claim() applies inside its transaction and tests check as a table.
// Inputs: the group's cursor row as locked by the claim (claimed, settled head, the pending
// slot and whether the database now proves it), this host's observation (head, the xid it
// took, proven or not) and the batch size. Output: the proven head, the new claimed
// position and the new pending slot. Rules:
//   - proven = the largest of: the settled head, a pending head the database proves, the
//     observed head when its xid is proven. Nothing past `proven` is ever claimed: a producer
//     that could still commit an id <= head might be running.
//   - the pending slot keeps the OLDEST unproven observation (a newer one waits its turn).
//   - claimed moves forward by at most `batch`, never past `proven`, never backward.
// Threading: pure.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>

namespace sqlstreams::store {

struct ClaimInputs {
  // The cursor row, locked by the claim's first statement.
  int64_t claimed = 0;
  int64_t settled = 0;
  std::optional<int64_t> pending_head;
  std::optional<std::string> pending_xid;
  bool pending_proven = false;  // xmin >= pending_xid now
  // This host's observation.
  int64_t observed_head = 0;
  std::optional<std::string> observed_xid;  // none: the head was settled when observed
  bool observed_proven = false;             // xmin >= observed_xid now
  int64_t batch = 0;
};

struct ClaimPlan {
  int64_t proven = 0;
  int64_t claimed = 0;  // the new claimed position; a lease covers (inputs.claimed, claimed]
  std::optional<int64_t> pending_head;
  std::optional<std::string> pending_xid;

  bool operator==(const ClaimPlan&) const = default;
};

inline ClaimPlan plan_claim(const ClaimInputs& in) {
  ClaimPlan plan;
  plan.proven = in.settled;
  if (in.pending_head && in.pending_proven) plan.proven = std::max(plan.proven, *in.pending_head);
  if (in.observed_xid && in.observed_proven) plan.proven = std::max(plan.proven, in.observed_head);
  if (in.pending_head && !in.pending_proven) {
    plan.pending_head = in.pending_head;
    plan.pending_xid = in.pending_xid;
  } else if (in.observed_xid && !in.observed_proven && in.observed_head > plan.proven) {
    plan.pending_head = in.observed_head;
    plan.pending_xid = in.observed_xid;
  }
  plan.claimed = std::max(in.claimed, std::min(in.claimed + in.batch, plan.proven));
  return plan;
}

}  // namespace sqlstreams::store
