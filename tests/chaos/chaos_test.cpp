// tests/chaos — the short seeded chaos run (label chaos, part of scripts/test.sh and CI) and the
// planted-defect runs that show the checker is not blind: each plants one known bug in the
// hosts (SQLSTREAMS_CHAOS_PLANT, compiled only into test builds) and expects its violation.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "chaos_session.hpp"

namespace sqlstreams::chaos {
namespace {

using namespace std::chrono_literals;

TEST(ChaosTest, ShortSeededRunKeepsEveryGuarantee) {
  ChaosOptions o;
  o.seed = 20261130;
  o.duration = 45s;
  // Every host down first, until producers have written past the partitions made ahead (issue
  // 26: those ids commit into the default partitions and are re-homed when the hosts return).
  o.first_faults = {"all-down"};
  const auto result = run_chaos_session(o);
  std::printf("chaos seed %llu: %s\n", static_cast<unsigned long long>(o.seed),
              result.verdict.line().c_str());
  EXPECT_TRUE(result.quiescent) << result.summary();
  EXPECT_TRUE(result.verdict.ok()) << result.summary();
  EXPECT_GT(result.verdict.info.at("committed"), 1000) << result.summary();
  int64_t landed_in_default = 0;
  for (const auto& e : result.events) {
    // "<t ms> all-down: N rows in the default partitions"
    const auto at = e.find("all-down: ");
    if (at != std::string::npos && e.find(" rows in the default", at) != std::string::npos) {
      landed_in_default += std::max(0LL, std::strtoll(e.c_str() + at + 10, nullptr, 10));
    }
  }
  EXPECT_GT(landed_in_default, 0) << "no id landed in a default partition\n" << result.summary();
}

#ifdef SQLSTREAMS_CHAOS_PLANTS
// Claiming up to max(id) without the proof skips ids held open by slow producers.
TEST(ChaosPlantTest, ClaimWithoutProofIsReportedAsSkipped) {
  ChaosOptions o;
  o.seed = 7;
  o.duration = 20s;
  o.faults = {};
  o.plant = "claim-without-proof";
  const auto result = run_chaos_session(o);
  EXPECT_GT(result.verdict.count("skipped"), 0) << result.summary();
}

// Applying a range commit without the token check lets a host paused past its lease commit
// outcomes that the reclaiming host committed too.
TEST(ChaosPlantTest, CommitWithoutTokenIsReportedAsDoubleCommit) {
  ChaosOptions o;
  o.seed = 11;
  o.duration = 25s;
  o.faults = {"stop"};
  o.fault_every_min = 500ms;
  o.fault_every_max = 1000ms;
  o.plant = "commit-without-token";
  const auto result = run_chaos_session(o);
  EXPECT_GT(result.verdict.count("double-commits"), 0) << result.summary();
}

// Advancing `committed` to `claimed` without looking at open leases passes them.
TEST(ChaosPlantTest, AdvanceWithoutGuardIsReportedAsPassedLease) {
  ChaosOptions o;
  o.seed = 13;
  o.duration = 15s;
  o.faults = {};
  o.plant = "advance-without-guard";
  const auto result = run_chaos_session(o);
  EXPECT_GT(result.verdict.count("passed-lease"), 0) << result.summary();
}
#endif

}  // namespace
}  // namespace sqlstreams::chaos
