// ops/systemd_notify — tells systemd how the host is doing, through libsystemd's sd_notify(3)
// (a Type=notify unit, config/sqlstreams.service):
//   READY=1       once every pipeline runs (and again after a reload)
//   RELOADING=1   when a SIGHUP reload starts (with MONOTONIC_USEC, as systemd 253+ wants)
//   STOPPING=1    when the drain starts
//   WATCHDOG=1    at half of WatchdogSec (WATCHDOG_USEC), while the control loop is healthy —
//                 also while it waits, bounded, in a reload's drain or a new plugin's load
//                 probe (service/run_host.cpp); never before READY=1 (systemd arms it there)
//   STATUS=...    a one-line summary shown by `systemctl status`
// Outside systemd (no NOTIFY_SOCKET) every call is a cheap no-op.
// Threading: thread-safe; sd_notify opens a fresh datagram socket per call.
#pragma once

#include <chrono>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

namespace sqlstreams::ops {

class SystemdNotifier {
 public:
  SystemdNotifier();  // reads NOTIFY_SOCKET and WATCHDOG_USEC/WATCHDOG_PID once

  bool enabled() const { return enabled_; }
  // How often to ping (half of WatchdogSec), or nullopt when systemd set no watchdog.
  std::optional<std::chrono::microseconds> watchdog_period() const { return watchdog_period_; }

  void ready(std::string_view status);
  void reloading(std::string_view status);
  void stopping(std::string_view status);
  void status(std::string_view status);
  // Sends WATCHDOG=1 when a ping is due (call it often from the healthy control loop).
  void ping_watchdog_if_due();

 private:
  void send(std::string message);

  bool enabled_ = false;
  std::optional<std::chrono::microseconds> watchdog_period_;
  std::mutex mu_;
  std::chrono::steady_clock::time_point last_ping_{};
};

}  // namespace sqlstreams::ops
