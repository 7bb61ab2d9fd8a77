// common/thread — how the runtime starts its own threads, and the one policy for an exception
// that escapes one (docs/design.md#the-host). Every long-lived runtime thread (claimer, committer,
// retrier, workers, maintenance lanes, the status poller) is started with start_thread():
//   - the thread gets a name (`top -H`, `ps -L`, gdb and core files show it; Linux keeps 15
//     bytes, the rest is cut);
//   - an exception escaping the thread's function is a bug in the runtime (every loop catches
//     what it expects: store outages, plugin faults). It is logged as one line,
//     `thread-exception thread=NAME what=...`, then the process aborts: SIGABRT, the crash
//     handler's line (ops/crash_handler), a core and a restart by systemd — never an
//     unexplained std::terminate and never a thread that silently stops while the rest runs.
// Threading: start_thread() from any thread.
#pragma once

#include <functional>
#include <string>
#include <thread>

namespace sqlstreams {

// Runs `body` on a new thread named `name`, under the policy above.
std::thread start_thread(std::string name, std::function<void()> body);

// The policy itself (tests): logs the escaped exception of thread `name`, then std::abort().
[[noreturn]] void abort_on_thread_exception(const std::string& name) noexcept;

}  // namespace sqlstreams
