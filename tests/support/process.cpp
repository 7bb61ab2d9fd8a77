#include "process.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "scratch.hpp"

extern char** environ;

namespace sqlstreams::testing {
namespace {

std::vector<std::string> merged_env(const std::map<std::string, std::string>& extra) {
  std::map<std::string, std::string> all;
  for (char** e = environ; *e; ++e) {
    std::string kv(*e);
    auto eq = kv.find('=');
    if (eq != std::string::npos) all[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  for (const auto& [k, v] : extra) all[k] = v;
  std::vector<std::string> out;
  for (const auto& [k, v] : all) out.push_back(k + "=" + v);
  return out;
}

// The files write_temp_file made in this process, removed at exit (a static's destructor: after
// the tests ran, when gtest's verdict is known; its UnitTest instance is never destroyed).
class TempFiles {
 public:
  void add(std::string path) {
    std::lock_guard lk(mu_);
    paths_.push_back(std::move(path));
  }
  ~TempFiles() {
    if (paths_.empty() || ::testing::UnitTest::GetInstance()->Failed() || keep_requested()) {
      return;
    }
    std::error_code ec;
    for (const auto& p : paths_) std::filesystem::remove(p, ec);
  }

 private:
  std::mutex mu_;
  std::vector<std::string> paths_;
};

TempFiles& temp_files() {
  static TempFiles files;
  return files;
}

std::vector<char*> c_strings(std::vector<std::string>& v) {
  std::vector<char*> out;
  for (auto& s : v) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

}  // namespace

std::string write_temp_file(const std::string& name_hint, const std::string& text) {
  std::string tmpl = "/tmp/sqlstreams-test-XXXXXX";
  int fd = mkstemp(tmpl.data());
  if (fd < 0) throw std::runtime_error("mkstemp failed");
  close(fd);
  std::string path = tmpl + "-" + name_hint;
  rename(tmpl.c_str(), path.c_str());
  temp_files().add(path);
  std::ofstream(path) << text;
  return path;
}

ChildProcess::ChildProcess(std::vector<std::string> argv, std::map<std::string, std::string> env,
                           std::string log_file)
    : log_file_(std::move(log_file)) {
  auto envs = merged_env(env);
  auto c_argv = c_strings(argv);
  auto c_env = c_strings(envs);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, log_file_.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  int rc = posix_spawn(&pid_, c_argv[0], &fa, nullptr, c_argv.data(), c_env.data());
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) throw std::runtime_error("posix_spawn failed for " + argv[0]);
}

ChildProcess::~ChildProcess() {
  if (running()) {
    kill(pid_, SIGKILL);
    wait(std::chrono::seconds(10));
  }
}

void ChildProcess::signal(int sig) {
  if (!status_) kill(pid_, sig);
}

bool ChildProcess::running() {
  if (status_) return false;
  int st = 0;
  pid_t r = waitpid(pid_, &st, WNOHANG);
  if (r == pid_) {
    status_ = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    return false;
  }
  return true;
}

std::optional<int> ChildProcess::wait(std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (running()) {
    if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return status_;
}

std::string ChildProcess::log() const {
  std::ifstream in(log_file_);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::pair<int, std::string> run_command(std::vector<std::string> argv,
                                        std::map<std::string, std::string> env,
                                        const std::string& stdin_text) {
  std::string out = write_temp_file("out.log", "");
  std::string in = write_temp_file("in.txt", stdin_text);
  auto envs = merged_env(env);
  auto c_argv = c_strings(argv);
  auto c_env = c_strings(envs);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  posix_spawn_file_actions_addopen(&fa, 0, in.c_str(), O_RDONLY, 0);
  pid_t pid;
  int rc = posix_spawn(&pid, c_argv[0], &fa, nullptr, c_argv.data(), c_env.data());
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) throw std::runtime_error("posix_spawn failed for " + argv[0]);
  int st = 0;
  waitpid(pid, &st, 0);
  std::ifstream f(out);
  std::stringstream ss;
  ss << f.rdbuf();
  unlink(out.c_str());
  unlink(in.c_str());
  return {WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st), ss.str()};
}

std::map<std::string, std::string> sanitizer_options_letting_faults_through() {
  std::map<std::string, std::string> out;
  for (const char* name : {"ASAN_OPTIONS", "TSAN_OPTIONS"}) {
    const char* inherited = std::getenv(name);
    out[name] = (inherited && *inherited ? std::string(inherited) + ":" : "") +
                "handle_segv=0:handle_sigbus=0:handle_sigfpe=0:handle_sigill=0:handle_abort=0";
  }
  return out;
}

void let_faults_through_sanitizers_in_children() {
  for (const auto& [name, value] : sanitizer_options_letting_faults_through()) {
    ::setenv(name.c_str(), value.c_str(), 1);
  }
}

std::string lsan_options_with(const std::string& suppressions_file) {
  const char* inherited = std::getenv("LSAN_OPTIONS");
  return (inherited && *inherited ? std::string(inherited) + ":" : "") +
         "suppressions=" + suppressions_file;
}

std::optional<std::string> read_proc_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::string out;
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      ::close(fd);
      return std::nullopt;
    }
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

std::string thread_report(pid_t pid) {
  std::ostringstream out;
  const std::string task_dir = "/proc/" + std::to_string(pid) + "/task";
  std::error_code ec;
  out << "threads of pid " << pid << " (tid name state wchan):\n";
  for (const auto& task : std::filesystem::directory_iterator(task_dir, ec)) {
    const std::string dir = task.path().string();
    std::string comm = read_proc_file(dir + "/comm").value_or("?\n");
    if (!comm.empty() && comm.back() == '\n') comm.pop_back();
    // stat: "tid (comm) S ...": the state is the first field after the last ')'.
    const std::string stat = read_proc_file(dir + "/stat").value_or("");
    const auto paren = stat.rfind(')');
    const std::string state =
        paren != std::string::npos && paren + 2 < stat.size() ? stat.substr(paren + 2, 1) : "?";
    out << "  " << task.path().filename().string() << " " << comm << " " << state << " "
        << read_proc_file(dir + "/wchan").value_or("?") << "\n";
  }
  if (ec) out << "  (" << task_dir << ": " << ec.message() << ")\n";
  // run_command is posix_spawn, which does not search PATH: full paths (a bare "timeout" threw
  // "posix_spawn failed for timeout" out of a failing test's diagnosis, 2026-12-06). A report
  // never throws: it runs where a test is already failing.
  if (::access("/usr/bin/gdb", X_OK) == 0 && ::access("/usr/bin/timeout", X_OK) == 0) {
    try {
      auto [code, stacks] =
          run_command({"/usr/bin/timeout", "30", "/usr/bin/gdb", "-batch", "-nx", "-p",
                       std::to_string(pid), "-ex", "thread apply all bt 12"});
      out << "gdb (exit " << code << "):\n" << stacks;
    } catch (const std::exception& e) {
      out << "gdb: " << e.what() << "\n";
    }
  }
  return out.str();
}

std::string process_summary(ChildProcess& child) {
  if (auto code = child.wait(std::chrono::milliseconds(0))) {
    return "pid " + std::to_string(child.pid()) + " exited with " + std::to_string(*code);
  }
  const std::string dir =
      "/proc/" + std::to_string(child.pid()) + "/task/" + std::to_string(child.pid());
  const std::string stat = read_proc_file(dir + "/stat").value_or("");
  const auto paren = stat.rfind(')');
  std::string out =
      "pid " + std::to_string(child.pid()) + " running, main thread " +
      (paren != std::string::npos && paren + 2 < stat.size() ? stat.substr(paren + 2, 1) : "?") +
      " " + read_proc_file(dir + "/wchan").value_or("?") + ", children:";
  std::istringstream children(read_proc_file(dir + "/children").value_or(""));
  std::string pid;
  int n = 0;
  while (children >> pid) {
    std::string cmdline = read_proc_file("/proc/" + pid + "/cmdline").value_or("?");
    for (char& c : cmdline) c = c == '\0' ? ' ' : c;
    out += " [" + pid + " " + cmdline.substr(0, 120) + "]";
    ++n;
  }
  return n == 0 ? out + " none" : out;
}

}  // namespace sqlstreams::testing
