// tests/support/host_process — one real `sqlstreams run` process as the process-level suites
// (e2e, service) start it: its config file (written before the start, rewritten atomically for
// reloads), its log, and waits on that log with a deadline.
// Threading: one owner thread.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "process.hpp"

namespace sqlstreams::testing {

// How long a test waits for a host to exit when it checks only that the host exits (and its
// code): a hang's bound, not a speed check. A sanitized host's exit ends with LeakSanitizer's
// stop-the-world scan, which took more than 20 s on a loaded 2-core CI machine.
inline constexpr std::chrono::seconds kExitBound{90};

class RunningHost {
 public:
  // Writes `config_text` to `config_file`, then starts `sqlstreams run --config <config_file>
  // --plugin-dir <build>/plugins` with `env` plus SQLSTREAMS_DATABASE_URL; stdout and stderr go
  // to `log_file`.
  RunningHost(std::string config_file, const std::string& config_text,
              const std::string& database_url, std::map<std::string, std::string> env,
              const std::string& log_file);

  ChildProcess& process() { return *process_; }
  pid_t pid() const { return process_->pid(); }
  const std::string& config_file() const { return config_file_; }
  // Replaces the config file atomically (the host never reads half a file); then SIGHUP.
  void rewrite_config_text(const std::string& toml);

  std::string log() const { return process_->log(); }
  int count_in_log(const std::string& needle) const;
  // Waits for the `n`th occurrence of `needle` in the log; false on timeout or when the process
  // ended first.
  bool wait_for_log(const std::string& needle, std::chrono::milliseconds timeout, int n = 1);
  // SIGTERM, then the exit code (nullopt when still running after `timeout`).
  std::optional<int> stop(std::chrono::milliseconds timeout);

 private:
  std::string config_file_;
  std::unique_ptr<ChildProcess> process_;
};

}  // namespace sqlstreams::testing
