// A real `sqlstreams run` under a stand-in for systemd: the test's datagram socket is the
// host's NOTIFY_SOCKET (and WATCHDOG_USEC asks for pings). The host says READY=1 once its
// pipelines run, pings the watchdog, says RELOADING=1 then READY=1 around a SIGHUP reload —
// also when the new file is invalid — and STOPPING=1 when SIGTERM starts the drain.
#include <gtest/gtest.h>
#include <signal.h>

#include "service_support.hpp"
#include "test_database.hpp"

namespace sqlstreams::service_test {
namespace {

int count_of(const std::vector<std::string>& messages, const std::string& needle, size_t from) {
  int n = 0;
  for (size_t i = from; i < messages.size(); ++i) n += messages[i] == needle ? 1 : 0;
  return n;
}

TEST(SystemdNotify, ReadyWatchdogReloadingReadyStopping) {
  testing::TestDatabase db;
  ScratchDir dir;
  NotifySocket notify(dir.file("notify.sock"));
  HostSpec spec;
  HostProcess host(dir, spec, db.url(),
                   {{"NOTIFY_SOCKET", notify.path()}, {"WATCHDOG_USEC", "600000"}});

  int ready = notify.wait_for("READY=1", 60s);
  ASSERT_GE(ready, 0) << tail(host.log());
  EXPECT_NE(notify.messages()[ready].find("STATUS=1 group(s) running"), std::string::npos)
      << notify.messages()[ready];
  EXPECT_TRUE(host.wait_for_log("host-ready", 5s)) << "READY=1 only after the pipelines run";
  // Pings every 300 ms (half of WATCHDOG_USEC) while the control loop is healthy.
  ASSERT_TRUE(wait_until([&] { return count_of(notify.messages(), "WATCHDOG=1", ready) >= 3; }, 5s))
      << tail(host.log());

  host.process().signal(SIGHUP);
  int reloading = notify.wait_for("RELOADING=1", 10s, ready + 1);
  ASSERT_GE(reloading, 0) << tail(host.log());
  EXPECT_NE(notify.messages()[reloading].find("MONOTONIC_USEC="), std::string::npos);
  int ready_again = notify.wait_for("READY=1", 10s, reloading + 1);
  ASSERT_GE(ready_again, 0) << tail(host.log());
  EXPECT_NE(notify.messages()[ready_again].find("reload applied"), std::string::npos);

  // An invalid file: rejected, still READY=1 (the old config keeps running).
  host.rewrite_config_text(host_toml(spec) + "\nbogus_key = 1\n");
  host.process().signal(SIGHUP);
  int rejected_reloading = notify.wait_for("RELOADING=1", 10s, ready_again + 1);
  ASSERT_GE(rejected_reloading, 0);
  int rejected_ready = notify.wait_for("READY=1", 10s, rejected_reloading + 1);
  ASSERT_GE(rejected_ready, 0);
  EXPECT_NE(notify.messages()[rejected_ready].find("reload rejected"), std::string::npos);

  host.process().signal(SIGTERM);
  int stopping = notify.wait_for("STOPPING=1", 10s, rejected_ready + 1);
  ASSERT_GE(stopping, 0) << tail(host.log());
  EXPECT_EQ(host.process().wait(30s), 0) << tail(host.log());
}

TEST(SystemdNotify, NoSocketNoMessagesAndTheHostRunsNormally) {
  testing::TestDatabase db;
  ScratchDir dir;
  HostSpec spec;
  HostProcess host(dir, spec, db.url(), {{"NOTIFY_SOCKET", ""}, {"WATCHDOG_USEC", "600000"}});
  ASSERT_TRUE(host.wait_for_log("host-ready", 60s)) << tail(host.log());
  EXPECT_EQ(host.count_in_log("systemd-watchdog"), 0);
  EXPECT_EQ(host.stop(30s), 0) << tail(host.log());
}

}  // namespace
}  // namespace sqlstreams::service_test
