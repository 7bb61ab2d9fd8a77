// `sqlstreams plugin check FILE [--plugin-dir D] [--json]`. The child loads the plugin and
// writes one JSON document to a pipe — the manifest, or the refusal's parts — then _exit()s;
// the parent reads it, reaps the child and prints. A child that ends any other way (a signal,
// an exit() from the plugin, no document) is a plugin that crashed while loading; one that
// has not answered after --timeout seconds is killed and reported as hung. The child runs in a
// process group of its own: a process its plugin forks (which inherits the pipe) neither makes
// it look hung (the child's own end ends the wait) nor outlives the check (the group is killed
// before the child is reaped). The answer is read up to 1 MiB.
#include "cli/plugin_check.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>

#include "common/unique_fd.hpp"
#include "ops/crash_handler.hpp"
#include "plugin_host/plugin_host.hpp"

namespace sqlstreams::cli {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr int kChildRefused = 3;

json load_in_child(const PluginCheckOptions& o) {
  const fs::path file = fs::absolute(o.file).lexically_normal();
  const fs::path dir = o.plugin_dir.empty() ? file.parent_path() : fs::path(o.plugin_dir);
  try {
    plugin_host::PluginRegistry registry(dir);
    const plugin_host::PluginInfo& info = registry.load(file.string());
    json handlers = json::array();
    for (const auto& h : info.handler_infos) {
      handlers.push_back({{"name", h.name},
                          {"schema_version", h.schema_version},
                          {"schema_versions", h.schema_versions},
                          {"concurrent", h.concurrent}});
    }
    return {{"path", info.path},
            {"plugin_dir", dir.string()},
            {"name", info.name},
            {"version", info.version},
            {"abi", fmt::format("{}.{}", info.abi_major, info.abi_minor)},
            {"sdk_build", info.sdk_build},
            {"handlers", handlers}};
  } catch (const plugin_host::PluginLoadError& e) {
    return {{"refused",
             {{"path", e.path()},
              {"symbol", e.symbol()},
              {"expected", e.expected()},
              {"found", e.found()},
              {"hint", e.hint()}}}};
  } catch (const std::exception& e) {
    return {{"refused",
             {{"path", file.string()},
              {"symbol", ""},
              {"expected", "a plugin that loads"},
              {"found", e.what()},
              {"hint", ""}}}};
  }
}

[[noreturn]] void run_child(const PluginCheckOptions& o, int fd) {
  // The plugin's own output must not mix into ours (stdout may carry --json).
  ::dup2(STDERR_FILENO, STDOUT_FILENO);
  // A fault ends the child by its signal, whatever handler (ours, ASan's) was installed.
  for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) ::signal(sig, SIG_DFL);
  const json result = load_in_child(o);
  const std::string text = result.dump(-1, ' ', false, json::error_handler_t::replace);
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) ::_exit(1);
    done += static_cast<size_t>(n);
  }
  ops::mark_deciding_to_exit();
  ::_exit(result.contains("refused") ? kChildRefused : 0);
}

constexpr size_t kMaxAnswerBytes = 1 << 20;  // a manifest or a refusal is a few kB

// What the child wrote before it ended (or closed the pipe). The child's end of the pipe may
// live on in a process its plugin forked, so the child's own end (its pidfd) ends the wait too;
// `hung` when neither came within `timeout`, `too_big` past kMaxAnswerBytes.
struct Answer {
  std::string text;
  bool hung = false;
  bool too_big = false;
};
Answer read_answer(int fd, pid_t pid, std::chrono::seconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  const UniqueFd pidfd(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  Answer a;
  char buf[4096];
  bool child_ended = false;
  for (;;) {
    ssize_t n;
    while ((n = ::read(fd, buf, sizeof buf)) > 0) {
      a.text.append(buf, static_cast<size_t>(n));
      if (a.text.size() > kMaxAnswerBytes) {
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
    pollfd p[2] = {{fd, POLLIN, 0}, {pidfd.get(), POLLIN, 0}};
    const int ready = ::poll(p, pidfd.get() >= 0 ? 2 : 1, static_cast<int>(left.count()));
    if (ready < 0 && errno != EINTR) return a;
    child_ended = pidfd.get() >= 0 && (p[1].revents & POLLIN) != 0;  // drain once more, then stop
  }
}

[[noreturn]] void crashed(const std::string& file, const std::string& how) {
  throw plugin_host::PluginLoadError(
      file, "", "a plugin that loads", fmt::format("plugin crashed while loading ({})", how),
      "its constructors (static initialisers) or a library it links failed; run the plugin's "
      "unit test, or load it under gdb");
}

void print_text(const json& m) {
  std::printf("plugin:   %s %s\n", m["name"].get<std::string>().c_str(),
              m["version"].get<std::string>().c_str());
  std::printf("file:     %s\n", m["path"].get<std::string>().c_str());
  std::printf("ABI:      %s\n", m["abi"].get<std::string>().c_str());
  std::printf("SDK:      %s\n", m["sdk_build"].get<std::string>().c_str());
  std::printf("handlers:\n");
  for (const auto& h : m["handlers"]) {
    const auto versions = h["schema_versions"].get<std::vector<int32_t>>();
    std::printf("  %-24s schema version%s %s, %s\n", h["name"].get<std::string>().c_str(),
                versions.size() == 1 ? "" : "s",
                fmt::format("{}", fmt::join(versions, ", ")).c_str(),
                h["concurrent"].get<bool>() ? "concurrent" : "one call at a time");
  }
  std::printf("OK: loads as `run` would load it (trust checks against %s)\n",
              m["plugin_dir"].get<std::string>().c_str());
}

}  // namespace

int check_plugin_file(const PluginCheckOptions& o) {
  int fds[2];
  if (::pipe(fds) != 0) throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
  if (pid == 0) {
    ::setpgid(0, 0);  // its own process group: whatever its plugin forks ends with it
    ::close(fds[0]);
    run_child(o, fds[1]);
  }
  ::setpgid(pid, pid);  // (both sides: whichever runs first)
  ::close(fds[1]);
  const Answer answer = read_answer(fds[0], pid, std::chrono::seconds(o.timeout_s));
  ::close(fds[0]);
  if (answer.hung || answer.too_big) ::kill(pid, SIGKILL);
  // Reap only after the group is gone: until then the zombie holds the group's id.
  siginfo_t info{};
  while (::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOWAIT) < 0 && errno == EINTR) {
  }
  ::kill(-pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (answer.too_big) {
    crashed(o.file, fmt::format("its loader wrote more than {} bytes of answer", kMaxAnswerBytes));
  }
  if (answer.hung) {
    throw plugin_host::PluginLoadError(
        o.file, "", "a plugin that loads",
        fmt::format("no answer within {} s: the plugin hung while loading (killed)", o.timeout_s),
        "its constructors (static initialisers) block; run the plugin's unit test, or load it "
        "under gdb");
  }
  const std::string& text = answer.text;
  if (WIFSIGNALED(status)) {
    crashed(o.file, fmt::format("signal {}, {}", WTERMSIG(status), strsignal(WTERMSIG(status))));
  }
  const int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  const json result = json::parse(text, nullptr, false);
  if ((code != 0 && code != kChildRefused) || result.is_discarded()) {
    crashed(o.file, fmt::format("it ended the process with exit status {}", code));
  }
  if (result.contains("refused")) {
    const json& r = result["refused"];
    throw plugin_host::PluginLoadError(r["path"], r["symbol"], r["expected"], r["found"],
                                       r["hint"]);
  }
  if (o.json) {
    std::printf("%s\n", result.dump(2).c_str());
  } else {
    print_text(result);
  }
  return 0;
}

}  // namespace sqlstreams::cli
