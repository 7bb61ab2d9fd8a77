// ops/systemd_notify: with NOTIFY_SOCKET set, each call sends its sd_notify assignments to the
// socket; watchdog pings come at most once per half WatchdogSec; without NOTIFY_SOCKET nothing
// is sent.
#include "ops/systemd_notify.hpp"

#include <gtest/gtest.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <string>
#include <thread>

namespace sqlstreams::ops {
namespace {

class Socket {
 public:
  Socket() {
    path_ = "/tmp/sqlstreams-notify-" + std::to_string(getpid()) + ".sock";
    fd_ = socket(AF_UNIX, SOCK_DGRAM, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", path_.c_str());
    unlink(path_.c_str());
    EXPECT_EQ(bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  }
  ~Socket() {
    close(fd_);
    unlink(path_.c_str());
  }
  const std::string& path() const { return path_; }
  // The next datagram, or "" after `ms`.
  std::string next(int ms = 1000) {
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, ms) <= 0) return "";
    char buf[1024];
    ssize_t n = recv(fd_, buf, sizeof buf, 0);
    return n > 0 ? std::string(buf, n) : "";
  }

 private:
  std::string path_;
  int fd_ = -1;
};

class SystemdNotifyTest : public ::testing::Test {
 protected:
  void TearDown() override {
    unsetenv("NOTIFY_SOCKET");
    unsetenv("WATCHDOG_USEC");
  }
  Socket socket_;
};

TEST_F(SystemdNotifyTest, SendsReadyReloadingStoppingAndStatus) {
  setenv("NOTIFY_SOCKET", socket_.path().c_str(), 1);
  SystemdNotifier n;
  ASSERT_TRUE(n.enabled());
  EXPECT_FALSE(n.watchdog_period());
  n.ready("2 group(s)\nrunning");
  EXPECT_EQ(socket_.next(), "READY=1\nSTATUS=2 group(s) running");
  n.reloading("reloading");
  std::string reloading = socket_.next();
  EXPECT_EQ(reloading.rfind("RELOADING=1\nMONOTONIC_USEC=", 0), 0u) << reloading;
  EXPECT_NE(reloading.find("\nSTATUS=reloading"), std::string::npos);
  n.stopping("draining");
  EXPECT_EQ(socket_.next(), "STOPPING=1\nSTATUS=draining");
  n.status("x");
  EXPECT_EQ(socket_.next(), "STATUS=x");
}

TEST_F(SystemdNotifyTest, WatchdogPingsAtHalfTheInterval) {
  setenv("NOTIFY_SOCKET", socket_.path().c_str(), 1);
  setenv("WATCHDOG_USEC", "400000", 1);
  SystemdNotifier n;
  ASSERT_TRUE(n.watchdog_period());
  EXPECT_EQ(n.watchdog_period()->count(), 200000);
  n.ping_watchdog_if_due();
  EXPECT_EQ(socket_.next(), "WATCHDOG=1");
  n.ping_watchdog_if_due();  // not due yet
  EXPECT_EQ(socket_.next(50), "");
  std::this_thread::sleep_for(std::chrono::milliseconds(210));
  n.ping_watchdog_if_due();
  EXPECT_EQ(socket_.next(), "WATCHDOG=1");
}

TEST_F(SystemdNotifyTest, OutsideSystemdNothingIsSent) {
  unsetenv("NOTIFY_SOCKET");
  SystemdNotifier n;
  EXPECT_FALSE(n.enabled());
  n.ready("x");
  n.ping_watchdog_if_due();
  EXPECT_EQ(socket_.next(50), "");
}

}  // namespace
}  // namespace sqlstreams::ops
