// isolation/stderr_pump — one handler child's stderr (runtime/isolation/README.md#stderr). The
// child's fd 2 is the write end of a pipe; the pump owns the read end and a thread of its own that
// reads it and logs every line through the host's logger as one escaped event, at level warning
// (what a child writes to stderr is what a failing plugin prints: it must survive log_level =
// "warn"):
//   child-stderr stream=s group=g child_pid=7 bytes=12 cut_bytes=0 line="the line, log_quoted"
// The line is cut to max_line_bytes (cut_bytes = what was cut off), invalid UTF-8 becomes
// U+FFFD (common/utf8 sanitize_utf8) and it is written as log_quoted(), so whatever a plugin
// prints can neither forge a log line nor add or change fields. A token bucket (bytes AND lines
// per second, with a burst) bounds what one child can put in the log; lines over it are dropped
// and counted, and the count is logged (`child-stderr-dropped ... lines=N bytes=M`) before the
// next line that passes and when the pump ends.
// Threading: the reader thread is the only one touching the fd and the budget; it ends on EOF
// (the child and everything it forked closed stderr) or when the destructor asks it to, after
// reading what is already buffered (at most kDrainLimit bytes). Construct and destroy from any
// one thread; the destructor joins (and closes the fd: nothing leaks across child restarts). The
// pump never blocks the handler path: the host's handler threads never touch the pipe.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "common/unique_fd.hpp"

namespace sqlstreams::isolation {

struct StderrBudget {
  size_t max_line_bytes = 4096;         // longer lines are cut (cut_bytes= says by how much)
  size_t bytes_per_second = 64 * 1024;  // logged line bytes per second, per child
  size_t lines_per_second = 200;        // logged lines per second, per child
  size_t burst_bytes = 256 * 1024;      // what a quiet child may log at once
  size_t burst_lines = 1000;
  // Lines over the budget and their bytes (cut bytes included), summed over every child of a
  // handler (the group's metrics sqlstreams_group_child_stderr_dropped_lines_total and
  // ..._dropped_bytes_total); null: not counted beyond the log.
  std::shared_ptr<std::atomic<uint64_t>> dropped_lines_total;
  std::shared_ptr<std::atomic<uint64_t>> dropped_bytes_total;
};

// Bytes a stopping pump still reads from the pipe (a process the plugin forked out of the
// child's process group may hold it open and keep writing).
inline constexpr size_t kDrainLimit = 1024 * 1024;

class StderrPump {
 public:
  StderrPump(UniqueFd read_end, std::string stream, std::string group, pid_t pid,
             StderrBudget budget = {});
  ~StderrPump();
  StderrPump(const StderrPump&) = delete;
  StderrPump& operator=(const StderrPump&) = delete;

 private:
  void loop();
  void on_bytes(const char* data, size_t n);
  void end_line();
  void emit(const std::string& raw, size_t total_bytes);
  void report_dropped();
  bool take(size_t bytes);  // the token bucket: true when the line may be logged

  UniqueFd fd_;
  UniqueFd wake_;  // eventfd: the destructor asks the thread to drain and stop
  const std::string stream_, group_;
  const pid_t pid_;
  const StderrBudget budget_;
  // Reader thread only:
  std::string line_;       // the current line, at most max_line_bytes
  size_t line_bytes_ = 0;  // its whole length so far (cut bytes included)
  double byte_tokens_ = 0, line_tokens_ = 0;
  int64_t refilled_ns_ = 0;
  uint64_t dropped_lines_ = 0, dropped_bytes_ = 0;
  std::thread thread_;  // started by the constructor once every member above is set
};

}  // namespace sqlstreams::isolation
