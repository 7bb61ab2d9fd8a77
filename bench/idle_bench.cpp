// bench/idle_bench — phase 6: what an idle host costs. One real `sqlstreams run` process (the
// release binary beside sqlstreams_bench, plugins from ../plugins) with four groups running the
// noop plugin on a stream nobody produces to; after start-up settles, its CPU time
// (utime + stime from /proc) over a window of 30 s (--quick: 5 s). Goal: < 1% of one core.
#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "bench.hpp"

extern char** environ;

namespace bench {
namespace {

namespace fs = std::filesystem;

bool log_has(const std::string& file, const std::string& needle) {
  std::ifstream in(file);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return text.find(needle) != std::string::npos;
}

}  // namespace

std::vector<Row> run_idle(Db& db, const Options& o) {
  const fs::path bin = fs::read_symlink("/proc/self/exe").parent_path();
  const fs::path host_binary = bin / "sqlstreams";
  const fs::path plugins = bin.parent_path() / "plugins";
  if (!fs::exists(host_binary) || !fs::exists(plugins / "noop.so")) {
    throw std::runtime_error("idle phase needs " + host_binary.string() + " and " +
                             (plugins / "noop.so").string() + " (bench/run.sh builds them)");
  }
  const std::string dir = fmt::format("/tmp/sqlstreams-bench-idle-{}", db.tag());
  fs::create_directories(dir);
  const std::string config = dir + "/idle.toml", log = dir + "/host.log";
  {
    std::ofstream c(config);
    c << "[host]\nname = \"bench-idle\"\nhttp_listen = \"\"\nlog_format = \"json\"\n\n"
      << fmt::format("[[streams]]\nname = \"bench.{}.idle\"\npartition_size = 100000\n", db.tag());
    for (int i = 1; i <= 4; ++i) {
      c << fmt::format(
          "\n[[groups]]\nname = \"idle-{}\"\nstream = \"bench.{}.idle\"\nplugin = "
          "\"noop.so\"\nhandler = \"noop\"\n",
          i, db.tag());
    }
  }
  const std::string url_env = "SQLSTREAMS_DATABASE_URL=" + db.url();
  std::vector<std::string> env_strings{url_env};
  for (char** e = environ; *e; ++e) {
    if (std::string(*e).rfind("SQLSTREAMS_DATABASE_URL=", 0) != 0) env_strings.emplace_back(*e);
  }
  std::vector<char*> envp;
  for (auto& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::vector<std::string> args{host_binary.string(), "run",           "--config", config,
                                "--plugin-dir",       plugins.string()};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  pid_t pid = 0;
  int rc = posix_spawn(&pid, host_binary.c_str(), &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) throw std::runtime_error("idle phase: cannot start " + host_binary.string());
  auto t0 = Clock::now();
  while (!log_has(log, "host-ready")) {
    if (seconds_since(t0) > 60 || waitpid(pid, nullptr, WNOHANG) == pid) {
      kill(pid, SIGKILL);
      throw std::runtime_error("idle phase: the host did not become ready; see " + log);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  std::this_thread::sleep_for(std::chrono::seconds(3));  // start-up work settles
  const double window = o.quick ? 5 : 30;
  const double before = cpu_seconds(pid);
  auto w0 = Clock::now();
  std::this_thread::sleep_for(std::chrono::duration<double>(window));
  const double used = cpu_seconds(pid) - before;
  const double wall = seconds_since(w0);
  kill(pid, SIGTERM);
  int status = 0;
  waitpid(pid, &status, 0);
  const double share = used / wall;
  fmt::print(stderr, "  idle host: {:.3f} CPU-s in {:.1f} s ({:.2f}% of a core)\n", used, wall,
             share * 100);
  fs::remove_all(dir);
  return {Row{"6 idle",
              fmt::format("one `sqlstreams run` host, 4 idle noop groups, {:.0f} s", wall),
              fmt::format("{:.2f}% of a core", share * 100), "—", "—",
              fmt::format("< 1%: {}", share < 0.01 ? "MET" : "MISSED")}};
}

}  // namespace bench
