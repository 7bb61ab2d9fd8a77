// The fleet's fair share (maintain/fair_share.hpp) as a table: which free worker keys one host
// asks for in an acquire round, given how many workers its config lists, how many hosts are
// live, how many it holds, and which free keys have waited a whole TTL.
#include "maintain/fair_share.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace sqlstreams::maintain {
namespace {

TEST(FairShare, IsTheCeilingOfWorkersOverLiveHosts) {
  struct Row {
    int64_t workers, live, share;
  };
  const Row rows[] = {
      {0, 1, 0}, {1, 1, 1}, {5, 1, 5},  {5, 2, 3},  {6, 2, 3}, {7, 3, 3},
      {2, 5, 1}, {5, 0, 5}, {5, -3, 5}, {-1, 2, 0}, {9, 4, 3}, {100, 7, 15},
  };
  for (const auto& r : rows) {
    EXPECT_EQ(fair_share(r.workers, r.live), r.share)
        << "workers " << r.workers << ", live hosts " << r.live;
  }
}

struct PickRow {
  std::string what;
  int64_t workers, live, held;
  std::vector<bool> overdue;  // per free key, in the order tried
  std::vector<size_t> picked;
};

TEST(FairShare, PicksUpToTheShareAndEveryOverdueKey) {
  const std::vector<PickRow> rows = {
      {"alone: every free key", 4, 1, 0, {false, false, false, false}, {0, 1, 2, 3}},
      {"two hosts, none held: half, rounded up",
       5,
       2,
       0,
       {false, false, false, false, false},
       {0, 1, 2}},
      {"share partly held: the rest of it", 5, 2, 2, {false, false, false}, {0}},
      {"share fully held: nothing", 6, 2, 3, {false, false, false}, {}},
      {"more held than the share (a host left): nothing, no negative count", 6, 3, 5, {false}, {}},
      {"share held, but a key free for a whole TTL is taken regardless",
       6,
       2,
       3,
       {false, true, false},
       {1}},
      {"overdue keys do not use up the share",
       6,
       2,
       1,
       {true, false, true, false, false},
       {0, 1, 2, 3}},
      {"no live host row yet (0): counts as alone", 3, 0, 0, {false, false, false}, {0, 1, 2}},
      {"nothing free: nothing", 3, 1, 0, {}, {}},
      {"more hosts than workers: one each", 2, 5, 0, {false, false}, {0}},
  };
  for (const auto& r : rows) {
    EXPECT_EQ(pick_free_workers(r.workers, r.live, r.held, r.overdue), r.picked) << r.what;
  }
}

}  // namespace
}  // namespace sqlstreams::maintain
