// `sqlstreams plugin check FILE [--plugin-dir D] [--json]`. The child loads the plugin and
// writes one JSON document to a pipe — the manifest, or the refusal's parts — then _exit()s;
// the parent reads it, reaps the child and prints. A child that ends any other way (a signal,
// an exit() from the plugin, no document) is a plugin that crashed while loading; one that
// has not answered after --timeout seconds is killed and reported as hung. The child runs in a
// process group of its own: a process its plugin forks (which inherits the pipe) neither makes
// it look hung (the child's own end ends the wait) nor outlives the check (the group is killed
// before the child is reaped). The answer is read up to 1 MiB. Reading and judging the answer is
// shared with the host's probe of a new image (plugin_host/load_probe.hpp).
#include "cli/plugin_check.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>

#include "ops/crash_handler.hpp"
#include "plugin_host/load_probe.hpp"
#include "plugin_host/plugin_host.hpp"

namespace sqlstreams::cli {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr int kChildRefused = plugin_host::kLoaderRefused;

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
  const auto timeout = std::chrono::seconds(o.timeout_s);
  const plugin_host::LoaderAnswer answer = plugin_host::read_loader_answer(fds[0], pid, timeout);
  ::close(fds[0]);
  const int status = plugin_host::reap_loader_child(pid, answer.hung || answer.too_big);
  const json result =
      json::parse(plugin_host::judge_loader_answer(o.file, answer, status, timeout, kChildRefused));
  if (o.json) {
    std::printf("%s\n", result.dump(2).c_str());
  } else {
    print_text(result);
  }
  return 0;
}

}  // namespace sqlstreams::cli
