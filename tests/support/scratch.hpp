// tests/support/scratch — what every process-level suite (e2e, service, isolation) needs around
// its real hosts: a scratch folder that survives a failed test, a free loopback TCP port, and a
// polling wait with a deadline (no fixed long sleeps).
// Threading: test thread only.
#pragma once

#include <chrono>
#include <functional>
#include <string>

namespace sqlstreams::testing {

// A folder /tmp/<prefix>-XXXXXX (mode 0755: hosts running as other users read it). Removed
// afterwards unless the test failed or SQLSTREAMS_E2E_KEEP=1; then it is kept and its path
// printed, so the host configs, logs and record files can be read.
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& prefix = "sqlstreams-test");
  ~ScratchDir();
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// SQLSTREAMS_E2E_KEEP is set to something other than "0": a test's scratch (folders, files, a chaos
// run's work folder) is kept whatever the verdict.
bool keep_requested();

// A free TCP port on 127.0.0.1 (bound to port 0, then released). Throws when none is free.
int free_tcp_port();

// Polls `pred` every `every` until it holds (true) or `timeout` passed (false).
bool wait_until(const std::function<bool()>& pred, std::chrono::milliseconds timeout,
                std::chrono::milliseconds every = std::chrono::milliseconds(50));

}  // namespace sqlstreams::testing
