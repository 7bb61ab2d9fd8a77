#include "ops/signals.hpp"

#include <pthread.h>
#include <signal.h>

#include <cerrno>

namespace sqlstreams::ops {
namespace {
sigset_t handled_set() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGHUP);
  return set;
}
}  // namespace

void block_signals() {
  sigset_t set = handled_set();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

std::optional<int> wait_for_signal(std::chrono::milliseconds timeout) {
  sigset_t set = handled_set();
  timespec ts{static_cast<time_t>(timeout.count() / 1000),
              static_cast<long>((timeout.count() % 1000) * 1'000'000)};
  for (;;) {
    int sig = sigtimedwait(&set, nullptr, &ts);
    if (sig > 0) return sig;
    if (errno == EINTR) continue;
    return std::nullopt;
  }
}

}  // namespace sqlstreams::ops
