// tests/chaos — what the workload knows at the end of a run: every produced tag and its fate,
// the faults and operator actions it injected (as text, and the ones the ordered invariants
// need as timed records: which host pid was stopped or killed when, which operator action ran
// when), and what the cursor monitor saw while it ran. Times are steady_clock (CLOCK_MONOTONIC)
// nanoseconds, the clock of the plugin's records.
// The checker (checker.hpp) reads this together with the database and the plugin's records.
// Threading: History is filled under its mutex by the workload's threads; read after they end.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace sqlstreams::chaos {

enum class Fate { kCommitted, kRolledBack, kInDoubt };

// A message's key and its per-key sequence number in the payload ("k", "seq"), drawn by the one
// producer thread that owns the key: "" and -1 for a keyless message.
struct KeySeq {
  std::string key;
  int64_t seq = -1;
};

struct Produced {
  std::string stream;
  int64_t id = 0;  // 0 = not known to the producer (sqlstreams produce)
  Fate fate = Fate::kInDoubt;
  std::string path;  // which produce path wrote it
  KeySeq key;
};

// A host process that could not be trusted to hold its leases for a while: SIGSTOPped
// [from_ns, to_ns] (to_ns = the SIGCONT), or SIGKILLed at from_ns = to_ns.
struct Disturbance {
  int pid = 0;
  std::string host, kind;  // "stop" | "kill"
  int64_t from_ns = 0, to_ns = 0;
};

// An operator command the workload ran (rewind, dead-retry, dead-discard), from its start to
// its exit.
struct OperatorAction {
  std::string kind, stream, group;
  int64_t begin_ns = 0, end_ns = 0;
};

struct StreamSpec {
  std::string name;
  bool allow_drop_past_committed = false;
};

struct History {
  std::mutex mu;
  std::map<std::string, Produced> produced;     // tag -> what its producer knows
  std::vector<std::string> events;              // "<t ms> <fault or action>", in order
  std::vector<std::string> monitor_violations;  // "backward: …", "passed-lease: …"
  // An idempotent batch sent twice at once (a client retrying while its first attempt is still
  // in flight, or just after it committed) whose two answers differ (checker: `idempotency`).
  std::vector<std::string> idempotency_violations;
  // Hosts found gone at the end of the faults that no fault had stopped: they exited by
  // themselves (checker: host-exit).
  std::vector<std::string> host_exits;
  int64_t monitor_samples = 0;
  std::map<int, std::string> host_of_pid;  // every host process started: pid -> host name
  std::vector<Disturbance> disturbances;
  std::vector<OperatorAction> actions;

  // keys: one per tag, or empty (every tag keyless).
  void produced_tags(const std::vector<std::string>& tags, const std::vector<int64_t>& ids,
                     const std::string& stream, Fate fate, const std::string& path,
                     const std::vector<KeySeq>& keys = {}) {
    std::lock_guard lk(mu);
    for (size_t i = 0; i < tags.size(); ++i) {
      produced[tags[i]] = Produced{stream, i < ids.size() ? ids[i] : 0, fate, path,
                                   i < keys.size() ? keys[i] : KeySeq{}};
    }
  }
  void event(int64_t t_ms, const std::string& what) {
    std::lock_guard lk(mu);
    events.push_back(std::to_string(t_ms) + " " + what);
  }
};

}  // namespace sqlstreams::chaos
