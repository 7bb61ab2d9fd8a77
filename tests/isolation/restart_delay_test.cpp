// The restart backoff of a crashed handler child is a pure function of (policy, crashes,
// random01): capped exponential, jitter only ever shortens it. And the crash texts.
#include <gtest/gtest.h>
#include <signal.h>

#include "isolation/child_process.hpp"

namespace sqlstreams::isolation {
namespace {

using std::chrono::milliseconds;

TEST(RestartDelay, DoublesFromInitialUpToTheCap) {
  RestartPolicy p;
  p.initial = milliseconds(100);
  p.max = milliseconds(1000);
  p.jitter = 0.2;
  const std::vector<std::pair<int, int64_t>> table{{0, 100}, {1, 100},  {2, 200},   {3, 400},
                                                   {4, 800}, {5, 1000}, {60, 1000}, {1000, 1000}};
  for (const auto& [crashes, expected] : table) {
    EXPECT_EQ(restart_delay(p, crashes, 0.0).count(), expected) << crashes;
  }
}

TEST(RestartDelay, JitterShortensByAtMostItsFraction) {
  RestartPolicy p;
  p.initial = milliseconds(1000);
  p.jitter = 0.2;
  EXPECT_EQ(restart_delay(p, 1, 0.5).count(), 900);
  EXPECT_EQ(restart_delay(p, 1, 0.999999).count(), 800);
  EXPECT_EQ(restart_delay(p, 1, 7.0).count(), 800);  // out-of-range randomness is clamped
  p.jitter = 0;
  EXPECT_EQ(restart_delay(p, 1, 0.9).count(), 1000);
}

TEST(DescribeExit, NamesTheSignalOrTheStatus) {
  EXPECT_EQ(describe_exit(SIGSEGV), "handler process crashed (signal 11)");  // WTERMSIG form
  EXPECT_EQ(describe_exit(70 << 8), "handler process exited (status 70)");
  EXPECT_EQ(describe_exit(0), "handler process exited (status 0)");
}

}  // namespace
}  // namespace sqlstreams::isolation
