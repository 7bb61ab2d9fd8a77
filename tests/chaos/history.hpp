// tests/chaos — what the workload knows at the end of a run: every produced tag and its fate,
// the faults and operator actions it injected, and what the cursor monitor saw while it ran.
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

struct Produced {
  std::string stream;
  int64_t id = 0;  // 0 = not known to the producer (sqlstreams produce)
  Fate fate = Fate::kInDoubt;
  std::string path;  // which produce path wrote it
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
  int64_t monitor_samples = 0;

  void produced_tags(const std::vector<std::string>& tags, const std::vector<int64_t>& ids,
                     const std::string& stream, Fate fate, const std::string& path) {
    std::lock_guard lk(mu);
    for (size_t i = 0; i < tags.size(); ++i) {
      produced[tags[i]] = Produced{stream, i < ids.size() ? ids[i] : 0, fate, path};
    }
  }
  void event(int64_t t_ms, const std::string& what) {
    std::lock_guard lk(mu);
    events.push_back(std::to_string(t_ms) + " " + what);
  }
};

}  // namespace sqlstreams::chaos
