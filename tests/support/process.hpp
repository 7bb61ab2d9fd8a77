// tests/support/process — start real `sqlstreams` processes from tests (posix_spawn), capture
// their output to a file, signal them, wait with a timeout.
// Threading: one ChildProcess per owner thread.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace sqlstreams::testing {

class ChildProcess {
 public:
  // Starts `argv` with extra environment variables; stdout+stderr go to `log_file`.
  ChildProcess(std::vector<std::string> argv, std::map<std::string, std::string> env,
               std::string log_file);
  ~ChildProcess();  // SIGKILLs a still-running child
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }
  void signal(int sig);
  // Exit code (128 + signal when killed), or nullopt on timeout.
  std::optional<int> wait(std::chrono::milliseconds timeout);
  bool running();
  std::string log() const;

 private:
  pid_t pid_ = -1;
  std::optional<int> status_;
  std::string log_file_;
};

// Runs a command to completion; returns {exit code, combined output}.
std::pair<int, std::string> run_command(std::vector<std::string> argv,
                                        std::map<std::string, std::string> env = {},
                                        const std::string& stdin_text = "");

// Writes `text` to a fresh temp file /tmp/sqlstreams-test-XXXXXX-<name_hint> and returns its
// path. The file is removed when the process exits, unless a test failed or SQLSTREAMS_E2E_KEEP=1
// (as ScratchDir): before 2026-12-06 every call left its file behind, 1,750 of them in /tmp.
std::string write_temp_file(const std::string& name_hint, const std::string& text);

// ASAN_OPTIONS and TSAN_OPTIONS for a child that must die by its own fatal signal (a plugin that
// segfaults or aborts on purpose): the inherited options plus handle_segv=0 and friends, so the
// fault reaches the runtime's crash handler and supervisor instead of the sanitizer's
// report-and-exit (ASan and TSan both turn a SIGSEGV into exit status 1 or 66 otherwise).
std::map<std::string, std::string> sanitizer_options_letting_faults_through();
// The same, set in this process's environment for the children it starts (call before any
// thread starts).
void let_faults_through_sanitizers_in_children();

// LSAN_OPTIONS for a child: the inherited options plus suppressions=`suppressions_file`.
std::string lsan_options_with(const std::string& suppressions_file);

// The whole of a /proc file, or nullopt when it cannot be read — the process (or thread) it
// belongs to may end between listing /proc and reading the file: open then fails with ENOENT, or
// read fails with ESRCH. (std::ifstream + istreambuf_iterator throws std::ios_base::failure on
// the ESRCH: a test that counts processes must not die because one of them ended.)
std::optional<std::string> read_proc_file(const std::string& path);

// What a process that does not exit is doing, for a failure message: each thread's name, state
// and kernel wait channel from /proc, then its stacks from `gdb -batch` when gdb is installed
// (at most 30 s). Evaluate it in the failure branch only (gtest's `<<` after an EXPECT is).
std::string thread_report(pid_t pid);

// One line for a failure message about a child that did not do what was awaited: "exited with
// N", or its main thread's state and kernel wait channel and its own children (pid and command
// line: a host's load-probe or handler child), short enough to stay in the CI digest beside a
// log's tail.
std::string process_summary(ChildProcess& child);

}  // namespace sqlstreams::testing
