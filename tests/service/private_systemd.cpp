// tests/service/private_systemd — see private_systemd.hpp.
#include "private_systemd.hpp"

#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "scratch.hpp"

namespace sqlstreams::service_test {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

constexpr const char* kSystemd = "/lib/systemd/systemd";

// Where cgroup2 is mounted on the host ("" when it is not).
std::string cgroup2_mount() {
  std::ifstream in("/proc/self/mounts");
  std::string device, dir, type, rest;
  while (in >> device >> dir >> type && std::getline(in, rest)) {
    if (type == "cgroup2") return dir;
  }
  return "";
}

// This process's cgroup2 path ("0::/path" in /proc/self/cgroup).
std::string own_cgroup2_path() {
  std::ifstream in("/proc/self/cgroup");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("0::", 0) == 0) return line.substr(3);
  }
  return "";
}

// Removes a cgroup folder and its children, deepest first (rmdir is how cgroups go).
void remove_cgroup_tree(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (e.is_directory(ec)) remove_cgroup_tree(e.path());
  }
  ::rmdir(dir.c_str());
}

bool has_command(const std::string& name) {
  for (const char* dir : {"/usr/bin/", "/bin/", "/usr/sbin/", "/sbin/"}) {
    if (::access((dir + name).c_str(), X_OK) == 0) return true;
  }
  return false;
}

}  // namespace

std::optional<std::string> PrivateSystemd::cannot_boot() {
  if (::geteuid() != 0) return "needs root (namespaces, mounts, pivot_root)";
  if (::access(kSystemd, X_OK) != 0) return std::string(kSystemd) + " is missing (package systemd)";
  for (const char* tool :
       {"unshare", "nsenter", "pivot_root", "setpriv", "systemctl", "journalctl"}) {
    if (!has_command(tool)) return std::string(tool) + " is missing";
  }
  if (cgroup2_mount().empty()) return "no cgroup2 hierarchy is mounted";
  std::ifstream fs_list("/proc/filesystems");
  std::string all((std::istreambuf_iterator<char>(fs_list)), std::istreambuf_iterator<char>());
  if (all.find("overlay") == std::string::npos) return "the kernel has no overlayfs";
  return std::nullopt;
}

PrivateSystemd::PrivateSystemd(const std::string& inbox) {
  // Whatever fails, the object is built: the destructor then undoes what was done.
  try {
    boot(inbox);
  } catch (const std::exception& e) {
    booted_ = false;
    why_ = std::string("booting failed: ") + e.what();
  }
}

void PrivateSystemd::boot(const std::string& inbox) {
  // The boot folder: a tmpfs is mounted on it inside the namespace only; NOT under /tmp.
  std::string parent = std::string(SQLSTREAMS_BINARY_DIR) + "/private-systemd";
  fs::create_directories(parent);
  std::string tmpl = parent + "/boot-XXXXXX";
  if (::mkdtemp(tmpl.data()) == nullptr) {
    why_ = "mkdtemp " + tmpl + " failed";
    return;
  }
  boot_dir_ = tmpl;
  // Its own cgroup below ours: the cgroup namespace's root, removed at the end.
  cgroup_ = cgroup2_mount() + own_cgroup2_path();
  if (cgroup_.back() != '/') cgroup_ += "/";
  cgroup_ += "sqlstreams-private-systemd-" + fs::path(boot_dir_).filename().string();
  std::error_code ec;
  if (!fs::create_directory(cgroup_, ec)) {
    why_ = "cannot create the cgroup " + cgroup_ + ": " + ec.message();
    cgroup_.clear();
    return;
  }
  const std::string script =
      std::string(SQLSTREAMS_SOURCE_DIR) + "/tests/service/private_systemd_boot.sh";
  unshare_ = std::make_unique<testing::ChildProcess>(
      std::vector<std::string>{
          "/bin/sh", "-c",
          "echo $$ > \"$1/cgroup.procs\" && exec setpriv --pdeathsig KILL unshare --mount --uts "
          "--pid --cgroup --fork --propagation private --kill-child \"$2\" \"$3\" \"$4\"",
          "private-systemd", cgroup_, script, boot_dir_, inbox},
      std::map<std::string, std::string>{}, inbox + "/private-systemd-boot.log");
  // A test process that dies (a ctest timeout) takes unshare with it (--pdeathsig), and
  // unshare PID 1 (--kill-child), so no private systemd outlives its test.
  // PID 1 inside is unshare's only child, systemd once the script exec'd it.
  const std::string children = "/proc/" + std::to_string(unshare_->pid()) + "/task/" +
                               std::to_string(unshare_->pid()) + "/children";
  bool found = testing::wait_until(
      [&] {
        std::ifstream in(children);
        pid_t pid = -1;
        if (!(in >> pid)) return false;
        std::ifstream comm("/proc/" + std::to_string(pid) + "/comm");
        std::string name;
        comm >> name;
        if (name != "systemd") return false;
        init_pid_ = pid;
        return true;
      },
      20s);
  if (!found) {
    why_ = "systemd did not start as PID 1: " + unshare_->log();
    return;
  }
  std::string state;
  booted_ = testing::wait_until(
      [&] {
        auto [code, out] = run({"systemctl", "is-system-running"});
        state = out;
        return out == "running\n" || out == "degraded\n";
      },
      30s, 100ms);
  if (!booted_) {
    why_ = "is-system-running says " + state + "; boot log: " + unshare_->log();
  } else if (state == "degraded\n") {
    booted_ = false;
    why_ = "booted degraded: " + run({"systemctl", "--failed", "--no-pager"}).second;
  }
}

std::pair<int, std::string> PrivateSystemd::run(std::vector<std::string> argv) const {
  std::vector<std::string> full{"/usr/bin/nsenter", "--target", std::to_string(init_pid_),
                                "--mount",          "--uts",    "--pid",
                                "--cgroup",         "--"};
  full.insert(full.end(), argv.begin(), argv.end());
  return testing::run_command(full, {{"SYSTEMD_PAGER", ""}, {"SYSTEMD_COLORS", "0"}});
}

bool PrivateSystemd::exit(std::chrono::milliseconds timeout) {
  if (!unshare_ || exited_) return exited_;
  try {
    if (init_pid_ > 0) (void)run({"systemctl", "exit"});
  } catch (const std::exception&) {
    // nothing to add: the wait below decides
  }
  exited_ = unshare_->wait(timeout).has_value();
  return exited_;
}

PrivateSystemd::~PrivateSystemd() {
  if (unshare_ && !exited_ && !exit(20s)) {
    // Only the test's own unshare process; --kill-child takes PID 1 (and so its namespace).
    unshare_->signal(SIGKILL);
    (void)unshare_->wait(10s);
  }
  unshare_.reset();
  if (!cgroup_.empty()) {
    // Processes of the namespace may take a moment to be gone from the cgroups.
    (void)testing::wait_until(
        [&] {
          remove_cgroup_tree(cgroup_);
          return !fs::exists(cgroup_);
        },
        10s, 100ms);
  }
  if (!boot_dir_.empty()) {
    std::error_code ec;
    fs::remove(boot_dir_, ec);  // empty: the tmpfs was mounted in the namespace only
  }
}

}  // namespace sqlstreams::service_test
