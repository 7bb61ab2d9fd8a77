// store/group/claim_plan: the claim fence (docs/design.md#the-claim-fence) as a table. Each row is
// a cursor row as the claim locked it, an observation, a batch, and what the claim must decide. The
// integration side (real producer transactions interleaved on separate connections) is
// fence_test.cpp; this table pins the arithmetic those tests exercise.
#include "store/group/claim_plan.hpp"

#include <gtest/gtest.h>

#include <optional>
#include <string>

namespace sqlstreams::store {
namespace {

struct PlanRow {
  const char* why;
  ClaimInputs in;
  ClaimPlan want;
};

std::ostream& operator<<(std::ostream& os, const PlanRow& r) { return os << r.why; }

const std::optional<std::string> kNone;

class PlanClaim : public ::testing::TestWithParam<PlanRow> {};

TEST_P(PlanClaim, DecidesTheFence) {
  const PlanRow& r = GetParam();
  const ClaimPlan got = plan_claim(r.in);
  EXPECT_EQ(got.proven, r.want.proven) << r.why;
  EXPECT_EQ(got.claimed, r.want.claimed) << r.why;
  EXPECT_EQ(got.pending_head, r.want.pending_head) << r.why;
  EXPECT_EQ(got.pending_xid, r.want.pending_xid) << r.why;
}

// ClaimInputs: claimed, settled, pending_head, pending_xid, pending_proven, observed_head,
// observed_xid, observed_proven, batch. ClaimPlan: proven, claimed, pending_head, pending_xid.
INSTANTIATE_TEST_SUITE_P(
    Table, PlanClaim,
    ::testing::Values(
        PlanRow{"settled head only: a batch from claimed",
                {0, 10, {}, kNone, false, 10, kNone, false, 4},
                {10, 4, {}, kNone}},
        PlanRow{"a batch larger than what is proven stops at the proven head",
                {8, 10, {}, kNone, false, 10, kNone, false, 100},
                {10, 10, {}, kNone}},
        PlanRow{"an unproven observation is never claimed past: it waits in the pending slot",
                {10, 10, {}, kNone, false, 20, "100", false, 50},
                {10, 10, 20, "100"}},
        PlanRow{"a proven observation moves the fence to its head",
                {10, 10, {}, kNone, false, 20, "100", true, 50},
                {20, 20, {}, kNone}},
        PlanRow{"a proven observation still claims at most one batch",
                {10, 10, {}, kNone, false, 20, "100", true, 4},
                {20, 14, {}, kNone}},
        PlanRow{"the pending slot keeps the OLDEST unproven observation",
                {10, 10, 15, "90", false, 20, "100", false, 50},
                {10, 10, 15, "90"}},
        PlanRow{"a proven pending head is claimable; a newer unproven observation takes the slot",
                {10, 10, 15, "90", true, 20, "100", false, 50},
                {15, 15, 20, "100"}},
        PlanRow{"an unproven observation at or below the proven head leaves the slot empty",
                {10, 10, 15, "90", true, 15, "100", false, 50},
                {15, 15, {}, kNone}},
        PlanRow{"pending and observation both proven: the larger head",
                {10, 10, 15, "90", true, 20, "100", true, 50},
                {20, 20, {}, kNone}},
        PlanRow{"an observation without an xid proves nothing beyond the settled head",
                {10, 10, {}, kNone, false, 30, kNone, false, 50},
                {10, 10, {}, kNone}},
        PlanRow{"claimed never moves backward, even past a stale settled head",
                {12, 10, {}, kNone, false, 10, kNone, false, 50},
                {10, 12, {}, kNone}},
        PlanRow{"batch 0 claims nothing but still records the proof",
                {10, 10, {}, kNone, false, 20, "100", true, 0},
                {20, 10, {}, kNone}}),
    [](const auto& p) {
      std::string name;
      for (const char* c = p.param.why; *c != '\0' && name.size() < 60; ++c) {
        name += std::isalnum(static_cast<unsigned char>(*c)) ? *c : '_';
      }
      return name + "_" + std::to_string(p.index);
    });

}  // namespace
}  // namespace sqlstreams::store
