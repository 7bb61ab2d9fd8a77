// tests/chaos — one whole chaos session: a PostgreSQL cluster of its own (so the workload may
// restart it), the workload, then the checker. Shared by the test and scripts/chaos.sh.
// Threading: one session at a time per caller thread.
#pragma once

#include <string>

#include "checker.hpp"
#include "workload.hpp"

namespace sqlstreams::chaos {

struct SessionResult {
  Verdict verdict;
  bool quiescent = false;
  std::string work_dir;             // kept when the verdict failed
  std::vector<std::string> events;  // the fault log
  std::string summary() const;      // verdict report + the fault log + where the logs are
};

// Fills options.url/work_dir/restart_database itself.
SessionResult run_chaos_session(ChaosOptions options);

}  // namespace sqlstreams::chaos
