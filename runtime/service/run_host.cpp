#include "service/run_host.hpp"

#include <signal.h>
#include <spdlog/spdlog.h>

#include <cstdlib>

#include "common/duration.hpp"
#include "ops/signals.hpp"
#include "ops/systemd_notify.hpp"

namespace sqlstreams::service {
namespace {

constexpr std::chrono::milliseconds kTick{250};

}  // namespace

int run_host(Host& host) {
  ops::SystemdNotifier notifier;
  auto ping = [&notifier] { notifier.ping_watchdog_if_due(); };
  host.start();
  notifier.ready(host.summary());
  // Only now: systemd arms the watchdog at READY=1, and a WATCHDOG=1 sent during start-up would
  // arm it early. From here the reload's waits (a drain, a new plugin's load probe) ping too.
  host.set_tick(ping);
  if (auto period = notifier.watchdog_period()) {
    spdlog::info("systemd-watchdog ping_every={}",
                 format_duration(std::chrono::duration_cast<Millis>(*period)));
  }

  int sig = 0;
  for (;;) {
    auto s = ops::wait_for_signal(kTick);
    ping();
    host.reap_dropped();  // groups an operator dropped while we ran them
    if (!s) continue;
    if (*s == SIGHUP) {
      notifier.reloading("reloading the configuration");
      bool applied = host.reload();
      notifier.ready((applied ? "reload applied; " : "reload rejected (see the log); ") +
                     host.summary());
      continue;
    }
    sig = *s;
    break;
  }

  const auto timeout = host.config().host.shutdown_timeout;
  notifier.stopping("draining in-flight work");
  spdlog::info("host-draining signal={} shutdown_timeout={}", sig, format_duration(timeout));
  auto tick = [&ping] {
    ping();
    if (auto s = ops::wait_for_signal(std::chrono::milliseconds(0)); s && *s != SIGHUP) {
      spdlog::warn("host-exit-now: second signal {} during drain", *s);
      spdlog::default_logger()->flush();
      std::_Exit(1);
    }
  };
  bool drained = host.drain(std::chrono::steady_clock::now() + timeout, tick);
  if (!drained) {
    spdlog::warn("host-stopped with handlers still running; their messages were handed back");
    spdlog::default_logger()->flush();
    std::_Exit(0);  // stuck handler threads cannot be joined; leases are already handed back
  }
  spdlog::info("host-stopped");
  return 0;
}

}  // namespace sqlstreams::service
