// The crash handler and the undecided-exit guard (see crash_handler.hpp). Everything reached
// from a signal handler here is async-signal-safe: write(2), sigaction(2), raise(3), and reads
// of the faulting thread's own in-flight record.
#include "ops/crash_handler.hpp"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "ops/logging.hpp"
#include "plugin_host/in_flight.hpp"

namespace sqlstreams::ops {
namespace {

constexpr int kFatalSignals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
struct sigaction g_previous[NSIG];
std::atomic<bool> g_deciding{false};
std::atomic<bool> g_reported{false};         // one line per process, even if threads fault together
std::atomic<bool> g_handler_process{false};  // a `__handler-child`, not the host
std::atomic<bool> g_journal{false};          // stderr is journald's stream: lines start with "<2>"

// A tiny async-signal-safe line builder over a fixed buffer.
class Line {
 public:
  void add(const char* s) noexcept {
    while (s != nullptr && *s != '\0' && len_ < sizeof buf_ - 1) buf_[len_++] = *s++;
  }
  void add(int64_t v) noexcept {
    char digits[24];
    size_t n = 0;
    uint64_t u = v < 0 ? 0 - static_cast<uint64_t>(v) : static_cast<uint64_t>(v);
    do {
      digits[n++] = static_cast<char>('0' + u % 10);
      u /= 10;
    } while (u != 0);
    if (v < 0) add("-");
    while (n > 0 && len_ < sizeof buf_ - 1) buf_[len_++] = digits[--n];
  }
  void write_to_stderr() noexcept {
    buf_[len_++] = '\n';
    size_t off = 0;
    while (off < len_) {
      ssize_t w = ::write(STDERR_FILENO, buf_ + off, len_ - off);
      if (w <= 0) break;
      off += static_cast<size_t>(w);
    }
  }

 private:
  char buf_[1536];
  size_t len_ = 0;
};

const char* signal_name(int sig) {
  switch (sig) {
    case SIGSEGV:
      return "SIGSEGV (invalid memory access)";
    case SIGBUS:
      return "SIGBUS (bus error)";
    case SIGFPE:
      return "SIGFPE (arithmetic fault)";
    case SIGILL:
      return "SIGILL (illegal instruction)";
    case SIGABRT:
      return "SIGABRT (abort, or std::terminate: e.g. an exception thrown across the plugin ABI)";
    default:
      return "a fatal signal";
  }
}

void add_in_flight(Line& line) {
  const plugin_host::InFlightCall& call = plugin_host::this_thread_in_flight();
  std::atomic_signal_fence(std::memory_order_seq_cst);
  if (call.label == nullptr) {
    line.add("no plugin call was in flight on this thread");
    return;
  }
  line.add("while running ");
  line.add(call.label);
  line.add(" on message_id=");
  line.add(call.message_id);
  line.add(" attempt=");
  line.add(static_cast<int64_t>(call.attempt));
}

void on_fatal_signal(int sig, siginfo_t* info, void* context) {
  if (!g_reported.exchange(true)) {
    Line line;
    if (g_journal.load()) line.add("<2>");  // critical (ops/logging.hpp)
    line.add("sqlstreams: fatal-signal ");
    line.add(signal_name(sig));
    line.add(" ");
    add_in_flight(line);
    if (g_handler_process.load()) {
      line.add(
          "; this handler process dies by this signal (isolation = \"process\": the host "
          "keeps running, records a failed attempt of the message and restarts the process)");
    } else {
      line.add(
          "; the host dies by this signal (its leases expire; the message's range is "
          "reclaimed and, if it crashes hosts again, quarantined and dead-lettered)");
    }
    line.write_to_stderr();
  }
  // Hand the signal on: the earlier handler (e.g. ASan's report) or the default action.
  const struct sigaction& prev = g_previous[sig];
  ::sigaction(sig, &prev, nullptr);
  if ((prev.sa_flags & SA_SIGINFO) != 0 && prev.sa_sigaction != nullptr) {
    prev.sa_sigaction(sig, info, context);
    return;
  }
  if (prev.sa_handler != SIG_DFL && prev.sa_handler != SIG_IGN && prev.sa_handler != nullptr) {
    prev.sa_handler(sig);
    return;
  }
  if (prev.sa_handler == SIG_IGN) {
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    ::sigaction(sig, &dfl, nullptr);
  }
  // Blocked while this handler runs: delivered, with the default action, when it returns (a
  // real fault would also repeat on return).
  ::raise(sig);
}

void on_exit_hook() {
  if (g_deciding.load()) return;
  Line line;
  if (g_journal.load()) line.add("<2>");
  line.add(
      "sqlstreams: undecided-exit: exit() was called although the host did not decide to "
      "exit (a plugin?) ");
  add_in_flight(line);
  line.add("; ending with status ");
  line.add(static_cast<int64_t>(kUndecidedExitStatus));
  line.add(" instead");
  line.write_to_stderr();
  ::_exit(kUndecidedExitStatus);
}

struct AltStack {
  std::unique_ptr<char[]> memory;
  ~AltStack() {
    if (!memory) return;
    stack_t off{};
    off.ss_flags = SS_DISABLE;
    ::sigaltstack(&off, nullptr);
  }
};
thread_local AltStack t_alt_stack;

}  // namespace

void install_crash_handlers() {
  g_journal.store(stderr_is_journal());
  for (int sig : kFatalSignals) {
    struct sigaction sa {};
    sa.sa_sigaction = &on_fatal_signal;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    ::sigaction(sig, &sa, &g_previous[sig]);
  }
  std::atexit(&on_exit_hook);
  std::at_quick_exit(&on_exit_hook);
  ensure_alternate_signal_stack();
}

void mark_deciding_to_exit() noexcept { g_deciding.store(true); }

void rearm_exit_hook() noexcept { std::atexit(&on_exit_hook); }

void mark_handler_process() noexcept { g_handler_process.store(true); }

void ensure_alternate_signal_stack() noexcept {
  stack_t current{};
  if (::sigaltstack(nullptr, &current) != 0) return;
  if ((current.ss_flags & SS_DISABLE) == 0) return;  // has one (e.g. ASan's)
  constexpr size_t kSize = 64 * 1024;
  char* memory = new (std::nothrow) char[kSize];
  if (memory == nullptr) return;
  stack_t alt{};
  alt.ss_sp = memory;
  alt.ss_size = kSize;
  if (::sigaltstack(&alt, nullptr) != 0) {
    delete[] memory;
    return;
  }
  t_alt_stack.memory.reset(memory);
}

}  // namespace sqlstreams::ops
