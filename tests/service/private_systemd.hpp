// tests/service/private_systemd — a PRIVATE systemd booted as PID 1 for a test
// (systemd_service_test.cpp), and `systemctl`/`journalctl`/any command run inside it.
// private_systemd_boot.sh does the boot: new mount, UTS, PID and cgroup namespaces, an overlay
// root (lower: the host's root filesystem, upper: a tmpfs), its own /tmp, /run and /dev, every
// unit but journald masked, no generators, `container=` set. This class adds what is around it:
// a cgroup of its own below the test's (so the cgroup namespace's root is not the machine's), a
// boot folder under the build tree (never /tmp), `systemctl exit` at the end (never a signal to
// a host process; SIGKILL only to the test's own unshare process if systemd did not exit), and
// removal of the cgroups and the boot folder. A machine where this cannot work makes
// cannot_boot() say why, and the test skips.
// Threading: test thread only.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "process.hpp"

namespace sqlstreams::service_test {

class PrivateSystemd {
 public:
  // Why a private systemd cannot boot here (not root, no systemd, no cgroup2, ...), or nullopt.
  static std::optional<std::string> cannot_boot();

  // Boots it; `inbox` (a host folder) is bound read-write at kInbox inside. Waits until
  // `systemctl is-system-running` says running; booted() is false (and why() says why) when it
  // did not.
  explicit PrivateSystemd(const std::string& inbox);
  ~PrivateSystemd();  // systemctl exit, then the cgroups and the boot folder go
  PrivateSystemd(const PrivateSystemd&) = delete;
  PrivateSystemd& operator=(const PrivateSystemd&) = delete;

  static constexpr const char* kInbox = "/mnt/sqlstreams-test";

  bool booted() const { return booted_; }
  const std::string& why() const { return why_; }
  // Runs argv inside (its mount, UTS, PID and cgroup namespaces): {exit code, stdout+stderr}.
  std::pair<int, std::string> run(std::vector<std::string> argv) const;
  // `sh -c script` inside.
  std::pair<int, std::string> sh(const std::string& script) const {
    return run({"sh", "-c", script});
  }
  // systemctl exit, then waits for PID 1 to end; true when it ended by itself.
  bool exit(std::chrono::milliseconds timeout);
  // The boot script's own output (stdout and stderr of unshare and PID 1).
  std::string boot_log() const { return unshare_->log(); }

 private:
  void boot(const std::string& inbox);

  std::string boot_dir_;
  std::string cgroup_;
  std::unique_ptr<testing::ChildProcess> unshare_;
  pid_t init_pid_ = -1;  // systemd, PID 1 inside; its host PID
  bool booted_ = false;
  bool exited_ = false;
  std::string why_;
};

}  // namespace sqlstreams::service_test
