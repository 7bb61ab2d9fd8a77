#include "ops/systemd_notify.hpp"

#include <spdlog/spdlog.h>
#include <systemd/sd-daemon.h>
#include <time.h>

#include <cstdlib>

namespace sqlstreams::ops {
namespace {

// STATUS= is one line: newlines would start a new assignment.
std::string one_line(std::string_view text) {
  std::string out(text);
  for (char& c : out) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  return out;
}

}  // namespace

SystemdNotifier::SystemdNotifier() {
  const char* socket = std::getenv("NOTIFY_SOCKET");
  enabled_ = socket != nullptr && *socket != '\0';
  uint64_t usec = 0;
  if (enabled_ && sd_watchdog_enabled(0, &usec) > 0 && usec > 0) {
    watchdog_period_ = std::chrono::microseconds(usec / 2);
  }
}

void SystemdNotifier::send(std::string message) {
  if (!enabled_) return;
  int rc = sd_notify(0, message.c_str());
  if (rc < 0) spdlog::debug("sd-notify-failed errno={}", -rc);
}

void SystemdNotifier::ready(std::string_view status) {
  send("READY=1\nSTATUS=" + one_line(status));
}

void SystemdNotifier::reloading(std::string_view status) {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  uint64_t usec = static_cast<uint64_t>(ts.tv_sec) * 1'000'000 + ts.tv_nsec / 1000;
  send("RELOADING=1\nMONOTONIC_USEC=" + std::to_string(usec) + "\nSTATUS=" + one_line(status));
}

void SystemdNotifier::stopping(std::string_view status) {
  send("STOPPING=1\nSTATUS=" + one_line(status));
}

void SystemdNotifier::status(std::string_view status) { send("STATUS=" + one_line(status)); }

void SystemdNotifier::ping_watchdog_if_due() {
  if (!watchdog_period_) return;
  auto now = std::chrono::steady_clock::now();
  {
    std::lock_guard lock(mu_);
    if (now - last_ping_ < *watchdog_period_) return;
    last_ping_ = now;
  }
  send("WATCHDOG=1");
}

}  // namespace sqlstreams::ops
