// Loader children (plugin_host/load_probe.hpp): reading and judging their answer (shared with
// `plugin check`), and the host's probe of a new image: posix_spawn of `EXE __plugin-probe` with
// the sealed image at fd 3 and the answer pipe at fd 4 (every other host fd is close-on-exec),
// stdout and stderr on /dev/null (a plugin's output never reaches the host's log raw), no signal
// blocked, in a process group of its own. posix_spawn, not fork: the host has threads by then
// (reload), and a forked copy of a threaded process may not dlopen.
#include "plugin_host/load_probe.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>
#include <vector>

#include "common/unique_fd.hpp"
#include "plugin_host/loaded_plugin.hpp"

extern char** environ;

namespace sqlstreams::plugin_host {
namespace fs = std::filesystem;
using nlohmann::json;

LoaderAnswer read_loader_answer(int fd, pid_t pid, std::chrono::seconds timeout,
                                const std::function<void()>& waiting) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  const UniqueFd pidfd(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  LoaderAnswer a;
  char buf[4096];
  bool child_ended = false;
  for (;;) {
    ssize_t n;
    while ((n = ::read(fd, buf, sizeof buf)) > 0) {
      a.text.append(buf, static_cast<size_t>(n));
      if (a.text.size() > kMaxLoaderAnswerBytes) {
        a.too_big = true;
        return a;
      }
    }
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR) || child_ended) return a;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      a.hung = true;
      return a;
    }
    if (waiting) waiting();
    const auto wait = waiting ? std::min(left, kLoaderWaitTick) : left;
    pollfd p[2] = {{fd, POLLIN, 0}, {pidfd.get(), POLLIN, 0}};
    const int ready = ::poll(p, pidfd.get() >= 0 ? 2 : 1, static_cast<int>(wait.count()));
    if (ready < 0 && errno != EINTR) return a;
    child_ended = pidfd.get() >= 0 && (p[1].revents & POLLIN) != 0;  // drain once more, then stop
  }
}

int reap_loader_child(pid_t pid, bool kill_child) {
  if (kill_child) ::kill(pid, SIGKILL);
  // Reap only after the group is gone: until then the zombie holds the group's id.
  siginfo_t info{};
  while (::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOWAIT) < 0 && errno == EINTR) {
  }
  ::kill(-pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return status;
}

namespace {

[[noreturn]] void crashed(const std::string& file, const std::string& how) {
  throw PluginLoadError(
      file, "", "a plugin that loads", fmt::format("plugin crashed while loading ({})", how),
      "its constructors (static initialisers) or a library it links failed; run the plugin's "
      "unit test, or load it under gdb");
}

}  // namespace

std::string judge_loader_answer(const std::string& file, const LoaderAnswer& answer,
                                int wait_status, std::chrono::seconds timeout, int refused_code) {
  if (answer.too_big) {
    crashed(file,
            fmt::format("its loader wrote more than {} bytes of answer", kMaxLoaderAnswerBytes));
  }
  if (answer.hung) {
    throw PluginLoadError(
        file, "", "a plugin that loads",
        fmt::format("no answer within {} s: the plugin hung while loading (killed)",
                    timeout.count()),
        "its constructors (static initialisers) block; run the plugin's unit test, or load it "
        "under gdb");
  }
  if (WIFSIGNALED(wait_status)) {
    crashed(file,
            fmt::format("signal {}, {}", WTERMSIG(wait_status), strsignal(WTERMSIG(wait_status))));
  }
  const int code = WIFEXITED(wait_status) ? WEXITSTATUS(wait_status) : -1;
  const json result = json::parse(answer.text, nullptr, false);
  if ((code != 0 && code != refused_code) || result.is_discarded() || !result.is_object()) {
    crashed(file, fmt::format("it ended the process with exit status {}", code));
  }
  if (result.contains("refused")) {
    const json& r = result["refused"];
    throw PluginLoadError(r.value("path", file), r.value("symbol", ""), r.value("expected", ""),
                          r.value("found", ""), r.value("hint", ""));
  }
  return answer.text;
}

namespace {

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

[[noreturn]] void cannot_probe(const fs::path& shown, const std::string& what, int err) {
  throw PluginLoadError(shown.string(), "", "a throwaway process that loads the plugin first",
                        what + ": " + std::strerror(err),
                        "check the host's process and file descriptor limits");
}

constexpr int kImageFd = 3;
constexpr int kAnswerFd = 4;

}  // namespace

void probe_image(const LoadProbe& probe, const PluginImage& image, const fs::path& shown) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) cannot_probe(shown, "pipe2", errno);
  UniqueFd read_end(fds[0]);
  UniqueFd write_end(fds[1]);
  // Above the numbers the child gets, so that no dup2 below clobbers another's source (and a
  // dup2 onto itself would keep close-on-exec).
  UniqueFd image_src(::fcntl(image.fd, F_DUPFD_CLOEXEC, 10));
  UniqueFd answer_src(::fcntl(write_end.get(), F_DUPFD_CLOEXEC, 10));
  if (image_src.get() < 0 || answer_src.get() < 0) cannot_probe(shown, "fcntl", errno);
  write_end.reset();
  FileActions fa;
  posix_spawn_file_actions_adddup2(&fa.actions, image_src.get(), kImageFd);
  posix_spawn_file_actions_adddup2(&fa.actions, answer_src.get(), kAnswerFd);
  posix_spawn_file_actions_addopen(&fa.actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_adddup2(&fa.actions, STDOUT_FILENO, STDERR_FILENO);
  SpawnAttributes sa;
  sigset_t none, defaults;
  sigemptyset(&none);
  sigemptyset(&defaults);
  for (int sig : {SIGHUP, SIGINT, SIGTERM, SIGPIPE, SIGCHLD, SIGQUIT}) sigaddset(&defaults, sig);
  posix_spawnattr_setsigmask(&sa.attr, &none);
  posix_spawnattr_setsigdefault(&sa.attr, &defaults);
  posix_spawnattr_setpgroup(&sa.attr, 0);
  posix_spawnattr_setflags(&sa.attr,
                           POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP);
  std::vector<std::string> args = {
      probe.executable, "__plugin-probe",          "--image-fd", std::to_string(kImageFd),
      "--answer-fd",    std::to_string(kAnswerFd), "--file",     shown.string(),
      "--parent-pid",   std::to_string(::getpid())};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = -1;
  const int err =
      ::posix_spawn(&pid, probe.executable.c_str(), &fa.actions, &sa.attr, argv.data(), environ);
  if (err != 0) cannot_probe(shown, "posix_spawn " + probe.executable, err);
  answer_src.reset();  // the child's end is the child's alone: its end is EOF here
  image_src.reset();
  const LoaderAnswer answer =
      read_loader_answer(read_end.get(), pid, probe.timeout, probe.while_waiting);
  const int status = reap_loader_child(pid, answer.hung || answer.too_big);
  judge_loader_answer(shown.string(), answer, status, probe.timeout, kLoaderRefused);
}

void run_load_probe(int image_fd, int answer_fd, const std::string& file, pid_t parent) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) ::_exit(1);  // the host is already gone
  // A fault ends the child by its signal, whatever handler (ours, ASan's) was installed.
  for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) ::signal(sig, SIG_DFL);
  json result;
  try {
    LoadedPlugin plugin;
    struct stat st {};
    if (::fstat(image_fd, &st) != 0) {
      throw PluginLoadError(file, "", "the plugin image on fd " + std::to_string(image_fd),
                            std::strerror(errno), "");
    }
    plugin.image.fd = image_fd;
    plugin.image.size = static_cast<uint64_t>(st.st_size);
    plugin.image.load_path = fmt::format("/proc/self/fd/{}", image_fd);
    check_elf_image(plugin.image, file);
    plugin.library = open_plugin_library(plugin.image, file);
    read_manifest(file, plugin);
    result = {{"path", file}, {"name", plugin.info.name}, {"version", plugin.info.version}};
  } catch (const PluginLoadError& e) {
    result = {{"refused",
               {{"path", e.path()},
                {"symbol", e.symbol()},
                {"expected", e.expected()},
                {"found", e.found()},
                {"hint", e.hint()}}}};
  } catch (const std::exception& e) {
    result = {{"refused",
               {{"path", file},
                {"symbol", ""},
                {"expected", "a plugin that loads"},
                {"found", e.what()},
                {"hint", ""}}}};
  }
  const std::string text = result.dump(-1, ' ', false, json::error_handler_t::replace);
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(answer_fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) ::_exit(1);
    done += static_cast<size_t>(n);
  }
  ::_exit(result.contains("refused") ? kLoaderRefused : 0);
}

}  // namespace sqlstreams::plugin_host
