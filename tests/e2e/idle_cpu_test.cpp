// An idle host costs (almost) nothing: with nothing to consume, every loop of every group sleeps
// until its next deadline. Regression: the committer's wake-up included the cursor advancer's
// deadline even when the fleet's advancer runs it instead, so the deadline stayed in the past and
// each group spun a core. The bound is generous (sanitizer build, shared CI machine); the benchmark
// measures the real figure (bench/README.md, idle CPU row).
#include <gtest/gtest.h>

#include <thread>

#include "e2e_support.hpp"
#include "proc_stat.hpp"

namespace sqlstreams::e2e {
namespace {

// utime + stime of a process, in seconds.
double cpu_seconds(pid_t pid) {
  return static_cast<double>(testing::cpu_ticks("/proc/" + std::to_string(pid) + "/stat")) /
         static_cast<double>(sysconf(_SC_CLK_TCK));
}

TEST(IdleHost, FourIdleGroupsUseALittleCpuNotACorePerGroup) {
  testing::TestDatabase db;
  ScratchDir dir;
  HostOptions o;
  o.name = "idle";
  o.noop_groups = 2;  // with charge-cards and audit-payments: four groups
  Host host(dir, o, db.url());
  ASSERT_TRUE(host.wait_for_log("host-ready", 60s)) << host.log();
  std::this_thread::sleep_for(2s);  // start-up work (declare, first polls) is over
  const double before = cpu_seconds(host.pid());
  const auto start = std::chrono::steady_clock::now();
  std::this_thread::sleep_for(6s);
  const double used = cpu_seconds(host.pid()) - before;
  const double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  // Before the fix: ~1.3 cores (four spinning committers on two cores). Now ~1% of a core.
  EXPECT_LT(used / wall, 0.25) << "an idle host used " << used << " CPU-s in " << wall << " s\n"
                               << tail(host.log());
  EXPECT_EQ(host.stop(testing::kExitBound), std::optional<int>(0)) << tail(host.log());
}

}  // namespace
}  // namespace sqlstreams::e2e
