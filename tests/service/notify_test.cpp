// A real `sqlstreams run` under a stand-in for systemd: the test's datagram socket is the
// host's NOTIFY_SOCKET (and WATCHDOG_USEC asks for pings). The host says READY=1 once its
// pipelines run, pings the watchdog, says RELOADING=1 then READY=1 around a SIGHUP reload —
// also when the new file is invalid — and STOPPING=1 when SIGTERM starts the drain.
// A plugin whose constructor hangs (crash_fixture.so with SQLSTREAMS_FIXTURE_CTOR=hang): added
// by a reload, it is refused after the load probe's 60 s while the watchdog keeps being pinged
// (no gap as long as WatchdogSec: systemd would have killed the host), and the host runs on; at
// start-up it is refused with exit 3 naming the file, before READY=1 and without a ping.
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "service_support.hpp"
#include "test_database.hpp"

namespace sqlstreams::service_test {
namespace {

namespace fs = std::filesystem;

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
  EXPECT_TRUE(host.wait_for_log("host-ready", 30s)) << "READY=1 only after the pipelines run";
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
  EXPECT_EQ(host.process().wait(testing::kExitBound), 0) << tail(host.log());
}

TEST(SystemdNotify, NoSocketNoMessagesAndTheHostRunsNormally) {
  testing::TestDatabase db;
  ScratchDir dir;
  HostSpec spec;
  HostProcess host(dir, spec, db.url(), {{"NOTIFY_SOCKET", ""}, {"WATCHDOG_USEC", "600000"}});
  ASSERT_TRUE(host.wait_for_log("host-ready", 60s)) << tail(host.log());
  EXPECT_EQ(host.count_in_log("systemd-watchdog"), 0);
  EXPECT_EQ(host.stop(testing::kExitBound), 0) << tail(host.log());
}

// A plugin folder with payments.so and crash_fixture.so, and `sqlstreams run` on `spec` with
// it, under the test's NOTIFY_SOCKET with WatchdogSec=2s (pings due every second), every
// crash_fixture constructor hanging.
class HangingConstructor : public ::testing::Test {
 protected:
  static constexpr auto kWatchdog = 2s;
  void SetUp() override {
    plugins_ = dir_.file("plugins");
    fs::create_directory(plugins_);
    fs::permissions(plugins_, fs::perms(0755));
    install(std::string(SQLSTREAMS_PLUGIN_DIR) + "/payments.so");
    install(std::string(SQLSTREAMS_FIXTURE_DIR) + "/crash_fixture.so");
  }
  void install(const std::string& from) {
    auto [code, out] = testing::run_command({"/usr/bin/install", "-m", "0755", from,
                                             plugins_ + "/" + fs::path(from).filename().string()});
    ASSERT_EQ(code, 0) << out;
  }
  void write_config(const HostSpec& spec) {
    std::ofstream(config_ + ".new") << host_toml(spec);
    fs::rename(config_ + ".new", config_);
  }
  void start(const HostSpec& spec) {
    write_config(spec);
    host_ = std::make_unique<testing::ChildProcess>(
        std::vector<std::string>{SQLSTREAMS_BINARY, "run", "--config", config_, "--plugin-dir",
                                 plugins_},
        std::map<std::string, std::string>{
            {"SQLSTREAMS_DATABASE_URL", db_.url()},
            {"NOTIFY_SOCKET", notify_.path()},
            {"WATCHDOG_USEC", std::to_string(std::chrono::microseconds(kWatchdog).count())},
            {"SQLSTREAMS_FIXTURE_CTOR", "hang"}},
        dir_.file("host.log"));
  }
  static GroupSpec hanging_group() {
    return GroupSpec{.name = "hangs",
                     .handler = "crash",
                     .plugin = "crash_fixture.so",
                     .config = "crash_on = \"never\"\nhow = \"segv\"\n"};
  }
  static bool contains(const std::string& text, const std::string& needle) {
    return text.find(needle) != std::string::npos;
  }

  testing::TestDatabase db_;
  ScratchDir dir_;
  NotifySocket notify_{dir_.file("notify.sock")};
  std::string plugins_;
  std::string config_ = dir_.file("host.toml");
  std::unique_ptr<testing::ChildProcess> host_;
};

// Before the fix the reload's thread waited the probe's 60 s without a ping: under systemd
// (WatchdogSec=30) the host was killed (SIGABRT) and restarted instead of the reload rejected.
TEST_F(HangingConstructor, AtReloadIsRejectedAndTheWatchdogIsPingedWhileTheProbeWaits) {
  HostSpec spec;
  start(spec);
  const int ready = notify_.wait_for("READY=1", 60s);
  ASSERT_GE(ready, 0) << tail(host_->log());
  spec.groups.push_back(hanging_group());
  write_config(spec);
  host_->signal(SIGHUP);
  const int reloading = notify_.wait_for("RELOADING=1", 10s, ready + 1);
  ASSERT_GE(reloading, 0) << tail(host_->log());
  const int rejected = notify_.wait_for("READY=1", 90s, reloading + 1);
  ASSERT_GE(rejected, 0) << tail(host_->log());
  const auto messages = notify_.messages();
  const auto arrivals = notify_.arrivals();
  EXPECT_TRUE(contains(messages[rejected], "reload rejected")) << messages[rejected];
  EXPECT_TRUE(contains(messages[rejected], "1 group(s) running")) << messages[rejected];
  // The probe waited its whole timeout, and systemd heard from the host all along.
  const auto reload_took = arrivals[rejected] - arrivals[reloading];
  EXPECT_GE(reload_took, 55s) << "the probe's 60 s";
  auto longest_silence = std::chrono::steady_clock::duration::zero();
  int pings = 0;
  for (int i = reloading + 1; i <= rejected; ++i) {
    longest_silence = std::max(longest_silence, arrivals[i] - arrivals[i - 1]);
    pings += messages[i] == "WATCHDOG=1" ? 1 : 0;
  }
  EXPECT_LT(longest_silence, kWatchdog)
      << "no message for " << longest_silence / 1ms
      << " ms during the reload: WatchdogSec=" << kWatchdog / 1ms
      << " ms would have killed the host; " << pings << " ping(s)";
  const std::string log = host_->log();
  EXPECT_TRUE(contains(log, "no answer within 60 s: the plugin hung while loading")) << tail(log);
  EXPECT_TRUE(contains(log, plugins_ + "/crash_fixture.so")) << tail(log);
  EXPECT_TRUE(contains(log, "\"event\":\"reload-rejected\"")) << tail(log);
  ASSERT_TRUE(host_->running()) << tail(log);
  // Still pinging after the rejected reload, then a normal stop.
  ASSERT_TRUE(
      wait_until([&] { return notify_.wait_for("WATCHDOG=1", 0s, rejected + 1) >= 0; }, 5s));
  host_->signal(SIGTERM);
  EXPECT_EQ(host_->wait(testing::kExitBound), 0) << tail(host_->log());
}

// At start-up (before READY=1, when systemd's watchdog is not armed yet and TimeoutStartSec,
// 90 s by default, bounds the start): refused after the probe's 60 s with exit 3, naming the
// file; no READY=1, and no WATCHDOG=1 that would arm the watchdog early.
TEST_F(HangingConstructor, AtStartUpIsRefusedWithExit3NamingTheFile) {
  HostSpec spec;
  spec.groups.push_back(hanging_group());
  start(spec);
  EXPECT_EQ(host_->wait(90s), 3) << tail(host_->log());
  const std::string log = host_->log();
  EXPECT_TRUE(contains(log, "no answer within 60 s: the plugin hung while loading")) << tail(log);
  EXPECT_TRUE(contains(log, plugins_ + "/crash_fixture.so")) << tail(log);
  EXPECT_TRUE(contains(log, config_ + ":")) << "located in the config: " << tail(log);
  EXPECT_EQ(notify_.wait_for("READY=1", 0s), -1);
  EXPECT_EQ(notify_.wait_for("WATCHDOG=1", 0s), -1);
}

}  // namespace
}  // namespace sqlstreams::service_test
