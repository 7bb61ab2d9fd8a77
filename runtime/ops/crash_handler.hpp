// ops/crash_handler — the host's last words when a plugin takes it down
// (docs/operating/security.md#plugins).
//   - A fault (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT — abort() and std::terminate, e.g. a
//     non-std exception thrown across the C ABI) writes ONE line to stderr naming the group,
//     handler, plugin and message id the faulting thread was running (plugin_host/in_flight),
//     then the signal goes on: to the handler installed before ours if there was one (ASan's,
//     in the test build), else the default action — the process ends BY the signal (core, a
//     non-zero status, systemd's Restart=on-failure restarts it). The line is built with
//     write(2) from fixed buffers: async-signal-safe.
//   - exit()/quick_exit() that the host did not decide on (a plugin calling exit(0)) ends the
//     process with status 70 (EX_SOFTWARE) and a line naming the call in flight, never 0.
//     main() calls mark_deciding_to_exit() before it returns. (_exit()/_Exit() called by a
//     plugin cannot be intercepted.) exit() runs atexit hooks and static destructors newest
//     first, so the hook must be newer than every static that other threads still use: the
//     host re-arms it (rearm_exit_hook) once its plugins are created and its threads run (at
//     host-ready, after each applied reload, in a handler child after create) — otherwise a
//     plugin's statics, the logger registry or the clock die while workers still use them.
// In a handler child of an `isolation = "process"` group (mark_handler_process()), the fault
// line says that this handler process dies, not the host.
// Under journald (ops/logging.hpp stderr_is_journal, read at install time) both lines start with
// "<2>": journald files them at priority critical.
// Worker threads get an alternate signal stack (ensure_alternate_signal_stack) so a stack
// overflow in a plugin still gets its line.
// Threading: install_crash_handlers() once, early in main, before threads start;
// mark_deciding_to_exit(), mark_handler_process() and rearm_exit_hook() from any thread.
#pragma once

namespace sqlstreams::ops {

inline constexpr int kUndecidedExitStatus = 70;  // EX_SOFTWARE

void install_crash_handlers();
void mark_deciding_to_exit() noexcept;
// Registers the exit hook again, so it runs before every static destructor registered so far
// (the first registration to run ends the process with _exit; extra ones never run).
void rearm_exit_hook() noexcept;
// This process is a `__handler-child` (runtime/isolation): its fault line says so.
void mark_handler_process() noexcept;
// Gives the calling thread an alternate signal stack unless it has one (freed at thread exit).
void ensure_alternate_signal_stack() noexcept;

}  // namespace sqlstreams::ops
