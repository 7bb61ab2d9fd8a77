// tests/chaos — the randomized workload: producers on every produce path, several real
// `sqlstreams run` hosts with two groups per stream on chaos.so, a seeded fault schedule
// (SIGKILL + restart, SIGSTOP past the lease + SIGCONT, PostgreSQL immediate restart,
// pg_terminate_backend, group rewind, dead retry / discard, SIGHUP reload, the plugin file
// rewritten in place without a reload (a good copy, a truncated one, a text file; one group's
// handlers run in child processes), retention with allow_drop_past_committed off on one stream
// and on on the other) and a cursor monitor.
// run() returns once every fault stopped, every host is back and the groups are quiescent
// (or the quiescence deadline passed: the checker then reports what is stuck).
// Threading: run() from one thread; it owns its producer, fault and monitor threads.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "history.hpp"

namespace sqlstreams::chaos {

inline const std::set<std::string> kAllFaults = {
    "kill",       "stop",         "pg-restart", "terminate", "rewind",
    "dead-retry", "dead-discard", "reload",     "all-down",  "replace-plugin"};

struct ChaosOptions {
  uint64_t seed = 1;
  std::chrono::seconds duration{40};  // from the moment every host is ready
  // The workload goes on past `duration` (up to 4 durations in all) until this many faults
  // were injected (skipped ones do not count): a plant run whose defect needs a fault (a SIGSTOP
  // past the lease, a plugin file replaced under restarting children) gets its chances on a
  // slow machine too, where each fault takes longer (2026-12-06: a machine with ~1 µs system
  // calls ran two 4.5-s stops in a 10-s run, the first before the stopped host held a range,
  // and the plant went uncaught).
  int min_faults = 0;
  std::chrono::seconds quiesce_timeout{90};  // stuck: no progress for this long at the end
  int hosts = 3;
  std::set<std::string> faults = kAllFaults;
  std::chrono::milliseconds fault_every_min{1500}, fault_every_max{3500};
  // Faults injected first, in this order (each after the usual pause), before the seeded
  // random schedule: the short run makes sure of the rare ones (all-down).
  std::vector<std::string> first_faults;
  std::string plant;     // "" or a planted defect (SQLSTREAMS_CHAOS_PLANT in the hosts)
  std::string work_dir;  // configs, host logs, record files
  std::string url;       // the database (a cluster of the run's own when pg-restart is on)
  std::function<bool()> restart_database;  // pg_ctl restart -m immediate; null: fault skipped
  int max_retries = 3;
  // chaos.keep's and chaos.lose's retention: chaos.lose drops what it keeps past it, committed or
  // not, so an outcome that comes later than that finds its lease lost and is discarded.
  std::string retention = "2s";
  std::string lease_ttl = "3s";
  std::chrono::milliseconds lease_ttl_ms{3000};
  bool log_progress = false;  // one line per fault on stderr
  // The ordered workload
  // (tests/chaos/README.md#the-ordered-workload-chaosoptionsordered-on-by-default):
  // keyed producers, and a third group `g-o` on each stream that the checker judges with the
  // per-key invariants (order, overlap, early).
  bool ordered = true;
  // Write `ordering = "key"` and `ordering_dead` into g-o's config. Off: g-o is an unordered
  // group given the keyed workload — the checker must then report order/overlap/early (how the
  // checker is validated without a runtime that orders, and how it stays honest).
  bool ordering_config = true;
  // The ordered workload's hot keys (tests/chaos/producers.cpp, kHotKeys per producer thread):
  // chains of deferred rows that make g-o's drain most of a short run's. Off: every keyed
  // message goes to a cold key (a plant whose defect is not about keys keeps g-o's groups
  // without that drain).
  bool hot_keys = true;
  // The chain (tests/chaos/README.md#the-chain-chaosoptionschain-on-by-default): g-b of chaos.keep
  // and g-a of chaos.lose (isolated) emit outputs_of(id) messages to chaos.chain with each OK
  // call (`emits`), and g-c consumes
  // chaos.chain; the checker's `emits` invariant holds the outputs to the committed OK outcomes,
  // one set each.
  bool chain = true;
  // Wait for quiescence after the producers stop (the liveness judgement: else `stuck`). Off for
  // the planted-defect runs: every invariant a plant must trip (skipped, double-commits, emits,
  // passed-lease, order, overlap, early, idempotency, child-start) is a safety property, judged
  // on what the run did, and a drain only adds work the plant's verdict does not read
  // (tests/chaos/README.md#it-catches-bugs). The verdict then also lists `stuck` rows.
  bool drain = true;
};

inline const std::vector<StreamSpec> kStreams = {{"chaos.keep", false}, {"chaos.lose", true}};
inline const std::vector<std::string> kGroups = {"g-a", "g-b"};
// The chain: no producer writes chaos.chain (only the emitting group's commits), and it has no
// retention, so the checker counts every output ever written.
inline const std::string kChainStream = "chaos.chain";
// The groups that emit to the chain: g-b of chaos.keep in the host's process, and g-a of
// chaos.lose in handler processes (kIsolatedGroup: its outputs come back with its replies).
inline const std::vector<std::pair<std::string, std::string>> kEmittingGroups = {
    {"chaos.keep", "g-b"}, {"chaos.lose", "g-a"}};
inline bool emits_to_chain(const std::string& stream, const std::string& group) {
  for (const auto& [s, g] : kEmittingGroups) {
    if (s == stream && g == group) return true;
  }
  return false;
}
inline const std::string kChainGroup = "g-c";
inline const std::string kOrderedGroup = "g-o";
// The group that runs its handlers in child processes (`isolation = "process"`), beside the
// in-process ones: the fault `replace-plugin` rewrites the plugin file under its children.
inline const std::pair<std::string, std::string> kIsolatedGroup = {"chaos.lose", "g-a"};
// The group whose handler is asynchronous (`chaos-async`, ABI 1.2): its calls complete from the
// plugin's timer thread, at most kAsyncMaxInFlight at once.
inline const std::pair<std::string, std::string> kAsyncGroup = {"chaos.keep", "g-a"};
inline constexpr int kAsyncMaxInFlight = 32;

// The run's own plugin folder (a copy of chaos.so under work_dir): `replace-plugin` rewrites its
// file in place, never the build's.
inline std::string plugin_dir_of(const ChaosOptions& o) { return o.work_dir + "/plugins"; }

// The groups of every stream: g-a and g-b, and g-o when ordered.
inline std::vector<std::string> groups_of(const ChaosOptions& o) {
  std::vector<std::string> g = kGroups;
  if (o.ordered) g.push_back(kOrderedGroup);
  return g;
}

// g-o's `ordering_dead`: chaos.keep holds a dead message's successors until an operator retries
// or discards it (the workload's operator does, see workload.cpp); chaos.lose releases them.
inline std::string ordering_dead_of(const std::string& stream) {
  return stream == "chaos.keep" ? "hold" : "release";
}

class ChaosRun {
 public:
  explicit ChaosRun(ChaosOptions options);
  ~ChaosRun();
  ChaosRun(const ChaosRun&) = delete;
  ChaosRun& operator=(const ChaosRun&) = delete;

  // Runs the workload; returns true when the groups reached quiescence.
  bool run();
  History& history() { return history_; }
  const ChaosOptions& options() const { return options_; }
  std::vector<std::string> record_files() const;
  std::vector<std::string> host_logs() const;

 private:
  struct Impl;
  ChaosOptions options_;
  History history_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace sqlstreams::chaos
