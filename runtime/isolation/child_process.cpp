// posix_spawn of a handler child, its reaping, and the restart backoff.
#include "isolation/child_process.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/unique_fd.hpp"

extern char** environ;

namespace sqlstreams::isolation {
namespace {

[[noreturn]] void fail(const std::string& what, int err) {
  throw std::runtime_error("cannot start a handler process: " + what + ": " + std::strerror(err));
}

struct FileActions {
  posix_spawn_file_actions_t actions;
  FileActions() { posix_spawn_file_actions_init(&actions); }
  ~FileActions() { posix_spawn_file_actions_destroy(&actions); }
};

struct SpawnAttributes {
  posix_spawnattr_t attr;
  SpawnAttributes() { posix_spawnattr_init(&attr); }
  ~SpawnAttributes() { posix_spawnattr_destroy(&attr); }
};

// Waits up to `timeout` for `pid` to end WITHOUT reaping it (a zombie keeps its pid, which is
// also its process group's id, from being reused); true when it ended.
bool wait_ended(pid_t pid, std::chrono::milliseconds timeout) {
  const UniqueFd pidfd(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
  siginfo_t info{};
  int r;
  if (pidfd.get() < 0) {  // no pidfd (old kernel): wait without a timeout
    do {
      r = ::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOWAIT);
    } while (r < 0 && errno == EINTR);
    return r == 0;
  }
  pollfd p{pidfd.get(), POLLIN, 0};
  do {
    r = ::poll(&p, 1, static_cast<int>(timeout.count()));
  } while (r < 0 && errno == EINTR);
  do {
    r = ::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOWAIT | WNOHANG);
  } while (r < 0 && errno == EINTR);
  return r == 0 && info.si_pid == pid;
}

}  // namespace

SpawnedChild spawn_child(const std::string& executable, const std::string& label,
                         const std::string& log_level, const std::string& log_format,
                         int image_fd) {
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) fail("socketpair", errno);
  auto host_end = std::make_unique<Channel>(fds[0], kMaxFrameFromChild);
  UniqueFd child_end(fds[1]);
  if (child_end.get() == 3) {  // dup2(3, 3) would keep close-on-exec: move it out of the way
    child_end.reset(::fcntl(fds[1], F_DUPFD_CLOEXEC, 4));  // then closes fd 3
    if (child_end.get() < 0) fail("fcntl F_DUPFD_CLOEXEC", errno);
  }
  int err_fds[2];
  if (::pipe2(err_fds, O_CLOEXEC) != 0) fail("pipe2", errno);
  UniqueFd stderr_read(err_fds[0]);
  UniqueFd stderr_write(err_fds[1]);
  if (stderr_write.get() <= 3) {  // fd 2 or 3 (a host without stderr): out of dup2's way
    stderr_write.reset(::fcntl(stderr_write.get(), F_DUPFD_CLOEXEC, 4));
    if (stderr_write.get() < 0) fail("fcntl F_DUPFD_CLOEXEC", errno);
  }
  // Above every number the child gets, so that no dup2 below clobbers another's source.
  UniqueFd image_src;
  if (image_fd >= 0) {
    image_src.reset(::fcntl(image_fd, F_DUPFD_CLOEXEC, 10));
    if (image_src.get() < 0) fail("fcntl F_DUPFD_CLOEXEC (plugin image)", errno);
  }
  const std::string parent = std::to_string(::getpid());
  std::vector<std::string> args{
      "sqlstreams",   "__handler-child", "--fd", "3",           "--parent-pid",
      parent,         "--label",         label,  "--log-level", log_level,
      "--log-format", log_format};
  std::vector<char*> argv;
  if (image_src.get() >= 0) {
    args.push_back("--image-fd");
    args.push_back(std::to_string(kChildImageFd));
  }
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  FileActions fa;
  // The child's stderr is a pipe to the host (isolation/stderr_pump), never the host's stderr.
  posix_spawn_file_actions_adddup2(&fa.actions, stderr_write.get(), 2);
  posix_spawn_file_actions_adddup2(&fa.actions, child_end.get(), 3);  // clears close-on-exec
  if (image_src.get() >= 0) {  // last: a source at fd 4 above was copied already
    posix_spawn_file_actions_adddup2(&fa.actions, image_src.get(), kChildImageFd);
  }
  // The host blocks its stop and reload signals in every thread (ops/signals): the child starts
  // with none blocked and their default actions, and in a process group of its own, so reap()
  // can end whatever a plugin forked in it (runtime/isolation/README.md#the-supervisor).
  SpawnAttributes sa;
  sigset_t none, defaults;
  sigemptyset(&none);
  sigemptyset(&defaults);
  for (int sig : {SIGHUP, SIGINT, SIGTERM, SIGQUIT, SIGUSR1, SIGUSR2}) sigaddset(&defaults, sig);
  posix_spawnattr_setsigmask(&sa.attr, &none);
  posix_spawnattr_setsigdefault(&sa.attr, &defaults);
  posix_spawnattr_setpgroup(&sa.attr, 0);
  posix_spawnattr_setflags(
      &sa.attr,
      static_cast<short>(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP));
  pid_t pid = -1;
  const int err =
      ::posix_spawn(&pid, executable.c_str(), &fa.actions, &sa.attr, argv.data(), environ);
  child_end.reset();  // the child has its copies
  stderr_write.reset();
  image_src.reset();
  if (err != 0) fail("posix_spawn " + executable, err);
  return {pid, std::move(host_end), std::move(stderr_read)};
}

int reap(pid_t pid, std::chrono::milliseconds grace) {
  if (!wait_ended(pid, grace)) {
    ::kill(pid, SIGKILL);
    (void)wait_ended(pid, std::chrono::hours(1));
  }
  // The child is a zombie now: its process group id cannot have been reused. Whatever is left
  // in the group (a process the plugin forked) ends with it.
  ::kill(-pid, SIGKILL);
  int status = 0;
  pid_t r;
  do {
    r = ::waitpid(pid, &status, 0);
  } while (r < 0 && errno == EINTR);
  return status;
}

std::string describe_exit(int wait_status) {
  if (WIFSIGNALED(wait_status)) {
    return "handler process crashed (signal " + std::to_string(WTERMSIG(wait_status)) + ")";
  }
  if (WIFEXITED(wait_status)) {
    return "handler process exited (status " + std::to_string(WEXITSTATUS(wait_status)) + ")";
  }
  return "handler process ended (wait status " + std::to_string(wait_status) + ")";
}

std::chrono::milliseconds restart_delay(const RestartPolicy& policy, int crashes, double random01) {
  const int n = std::clamp(crashes, 1, 62);
  const double raw = static_cast<double>(policy.initial.count()) * std::pow(2.0, n - 1);
  const double capped = std::min(raw, static_cast<double>(policy.max.count()));
  const double r = std::clamp(random01, 0.0, 1.0);
  const double factor = 1.0 - std::clamp(policy.jitter, 0.0, 1.0) * r;
  return std::chrono::milliseconds(static_cast<int64_t>(capped * factor));
}

}  // namespace sqlstreams::isolation
