// tests/chaos — one `sqlstreams run` host of the chaos workload: its config (two streams, two
// groups each on chaos.so — three with the ordered g-o —, audit "all"), its record file, and the
// faults a host can suffer (SIGKILL + restart, SIGSTOP/SIGCONT, a SIGHUP reload that changes a
// group). Threading: owned by the workload's fault thread (and the run thread before/after it).
#pragma once

#include <sys/types.h>

#include <map>
#include <memory>
#include <string>

#include "process.hpp"

namespace sqlstreams::chaos {

struct ChaosOptions;

class ChaosHost {
 public:
  ChaosHost(const ChaosOptions& options, int index);
  const std::string& name() const { return name_; }
  const std::string& record_file() const { return record_file_; }
  const std::string& log_file() const { return log_file_; }
  pid_t pid() const;
  bool running() const;
  bool stopped() const { return stopped_; }
  // This process has logged host-ready: its plugins are loaded (from the sealed images).
  bool ready() const;

  void start();
  void kill();    // SIGKILL and reap
  void pause();   // SIGSTOP
  void resume();  // SIGCONT
  // Rewrites the config with group g-b's concurrency toggled, then SIGHUP.
  void reload_with_changed_group();
  // SIGTERM (once: a stop already asked for is not asked again), without waiting: the run asks
  // every host at once, so their graceful stops overlap.
  void ask_to_stop();
  // ask_to_stop(), then the exit code, or -1 after `timeout_ms` (then SIGKILLed).
  int terminate(int timeout_ms);

 private:
  void write_config();

  const ChaosOptions& options_;
  std::string name_, config_file_, record_file_, log_file_;
  int generation_ = 0;  // restarts so far (each start gets its own log file)
  int concurrency_b_ = 4;
  bool stopped_ = false;
  bool asked_to_stop_ = false;  // SIGTERM sent to this process
  std::unique_ptr<testing::ChildProcess> process_;
};

}  // namespace sqlstreams::chaos
