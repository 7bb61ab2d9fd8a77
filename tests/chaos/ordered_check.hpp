// tests/chaos — the per-key invariants of the ordered groups
// (tests/chaos/README.md#the-checker-checker): order, overlap, early, and the log's own key order
// (log-order), judged on the plugin's timed call records, the workload's History (host pids, stops
// and kills) and what the database says at the end (keys, the audit trail's decisions, rewinds).
// The checker (checker.hpp) reads the database and calls check_ordered(); ordered_check_test.cpp
// calls it on histories written by hand. The rules are in README.md ("The checker").
// Threading: pure functions of their arguments.
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "checker.hpp"
#include "history.hpp"

namespace sqlstreams::chaos {

inline constexpr int64_t kNever = std::numeric_limits<int64_t>::max();

// One handler call, as chaos.so recorded it (chaos_plugin.cpp): times CLOCK_MONOTONIC ns.
struct CallRecord {
  std::string stream, group, outcome, tag;
  int64_t id = 0;
  int32_t attempt = 0;
  int pid = 0;
  std::string key;  // "" = keyless
  int64_t seq = -1, start_ns = 0, end_ns = 0;
};

// A (group, message)'s audit trail as the ordered invariants read it: when it was first decided
// OK, dead, discarded (the rows' `at`, converted to CLOCK_MONOTONIC ns; kNever), and whether an
// operator retried it.
struct Resolutions {
  int64_t first_ok = kNever, first_dead = kNever, first_discard = kNever;
  int32_t dead_attempt = 0;  // the attempt of the first dead row
  bool operator_retried = false;
};

struct Rewind {
  int64_t low = 0, high = 0;  // ids (low, high] are delivered again
  int64_t at_ns = 0;          // the rewind's transaction (CLOCK_MONOTONIC)
};

// What the per-key invariants read of one stream at the end of a run.
struct OrderedStream {
  bool allow_drop = false;
  std::set<int64_t> stored;                                        // ids still in the log
  std::map<int64_t, KeySeq> keys;                                  // the table's keyed ids
  std::map<std::pair<std::string, int64_t>, Resolutions> decided;  // (group, id) -> audit
  std::set<std::pair<std::string, int64_t>> dead_at_end;           // (group, id) dead letters
  std::map<std::string, std::vector<Rewind>> rewinds;              // group -> timed rewinds
};

struct OrderedSettings {
  uint64_t seed = 0;  // the behaviour table's (which calls hang past handler_timeout)
  // The ordered groups: "stream/group" -> their ordering_dead, "release" or "hold".
  std::map<std::string, std::string> ordered;
  int64_t stop_grace_ns = 3'000'000'000;  // see CheckInput::stop_grace_ns
};

// Adds the order / overlap / early / log-order violations to `v` (and the excused counts to its
// info), for every stream of `streams` and every ordered group of `settings`.
void check_ordered(const OrderedSettings& settings, const History& history,
                   const std::map<std::string, OrderedStream>& streams,
                   const std::vector<CallRecord>& records, Verdict& v);

}  // namespace sqlstreams::chaos
