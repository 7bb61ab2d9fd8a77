// Replacing a plugin under a running host
// (docs/operating/service.md#upgrade-a-plugin-without-a-restart), with real processes and a plugin
// built in two versions (tests/plugin_host/fixtures/upgrade_probe.cpp: each call appends
// "v<version> <id>" to a record file):
//   - the file is replaced by `cp` (rewritten in place: the same inode the old host mapped),
//     `mv` or `install`; the host keeps running version 1 until SIGHUP;
//   - on SIGHUP the log says plugin-upgraded from 1.0.0 to 2.0.0 for the group using it, that
//     group restarts on version 2, a group on another plugin file is not restarted;
//   - a SIGHUP with nothing changed upgrades nothing; a refused new file rejects the reload and
//     version 1 keeps running;
//   - a truncated new file or one whose constructor crashes is refused at SIGHUP
//     (no SIGBUS, no crash: the host keeps running version 1), and a reload rejected for another
//     reason after the new file was loaded switches nothing and logs no plugin-upgraded; the next
//     accepted reload upgrades.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "e2e_support.hpp"

namespace sqlstreams::e2e {
namespace {

namespace fs = std::filesystem;
const std::string kProbeFixtures = SQLSTREAMS_FIXTURE_DIR;
// The host logs JSON lines when its output is not a terminal.
const std::string kUpgraded = "\"event\":\"plugin-upgraded\"";
const std::string kApplied = "\"event\":\"reload-applied\"";
const std::string kRejected = "\"event\":\"reload-rejected\"";

using testing::read_file;

// "v1 3" lines → version → ids handled.
std::map<std::string, std::set<int64_t>> by_version(const std::string& records) {
  std::map<std::string, std::set<int64_t>> out;
  std::istringstream in(records);
  std::string version;
  int64_t id = 0;
  while (in >> version >> id) out[version].insert(id);
  return out;
}

size_t handled(const std::string& records) {
  std::set<int64_t> ids;
  for (const auto& [v, s] : by_version(records)) ids.insert(s.begin(), s.end());
  return ids.size();
}

class UpgradeFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    plugins_ = dir_.file("plugins");
    fs::create_directory(plugins_);
    fs::permissions(plugins_, fs::perms(0755));
    install(kProbeFixtures + "/upgrade_probe_v1.so", "probe.so");
    install(kProbeFixtures + "/upgrade_probe_v1.so", "other.so");
    config_ = dir_.file("upgrade.toml");
    std::ofstream(config_) << "[host]\nname = \"upgrade-host\"\nshutdown_timeout = \"5s\"\n"
                           << "http_listen = \"\"\n\n[[streams]]\nname = \"" << kStream << "\"\n\n"
                           << group("probe", "probe.so") << group("other", "other.so");
  }
  std::string group(const std::string& name, const std::string& file) {
    return "[[groups]]\nname = \"" + name + "\"\nstream = \"" + kStream + "\"\nplugin = \"" + file +
           "\"\nhandler = \"probe\"\npoll_interval = \"20ms\"\n" +
           "max_poll_interval = \"100ms\"\n[groups.config]\nrecord_file = \"" +
           dir_.file(name + ".txt") + "\"\n\n";
  }
  void install(const std::string& from, const std::string& name) {
    auto [code, out] =
        testing::run_command({"/usr/bin/install", "-m", "0755", from, plugins_ + "/" + name});
    ASSERT_EQ(code, 0) << out;
  }
  void start() {
    host_ = std::make_unique<testing::ChildProcess>(
        std::vector<std::string>{SQLSTREAMS_BINARY, "run", "--config", config_, "--plugin-dir",
                                 plugins_},
        std::map<std::string, std::string>{{"SQLSTREAMS_DATABASE_URL", db_.url()}},
        dir_.file("host.log"));
    ASSERT_TRUE(wait_until([&] { return contains(host_->log(), "host-ready"); }, 60s))
        << tail(host_->log());
  }
  static bool contains(const std::string& text, const std::string& needle) {
    return text.find(needle) != std::string::npos;
  }
  // Produces ids up to `to` and waits until both groups handled every id so far.
  void produce_and_wait(int64_t from, int64_t to) {
    produce_payments(db_.url(), to - from + 1, from);
    for (const char* g : {"probe", "other"}) {
      const std::string file = dir_.file(std::string(g) + ".txt");
      ASSERT_TRUE(
          wait_until([&] { return handled(read_file(file)) >= static_cast<size_t>(to); }, 60s))
          << g << " handled " << handled(read_file(file)) << " of " << to << "\n"
          << tail(host_->log());
    }
  }
  void replace_probe_with(const std::string& how, const std::string& from) {
    const std::string target = plugins_ + "/probe.so";
    std::pair<int, std::string> r;
    if (how == "cp") {
      r = testing::run_command({"/bin/cp", from, target});  // O_TRUNC: the same inode, rewritten
    } else if (how == "mv") {
      r = testing::run_command(
          {"/usr/bin/install", "-m", "0755", from, plugins_ + "/.probe.so.new"});
      ASSERT_EQ(r.first, 0) << r.second;
      r = testing::run_command({"/bin/mv", plugins_ + "/.probe.so.new", target});
    } else {
      r = testing::run_command({"/usr/bin/install", "-m", "0755", from, target});
    }
    ASSERT_EQ(r.first, 0) << how << ": " << r.second;
  }
  std::string probe_records() { return read_file(dir_.file("probe.txt")); }
  std::string other_records() { return read_file(dir_.file("other.txt")); }

  testing::TestDatabase db_;
  ScratchDir dir_;
  std::string plugins_, config_;
  std::unique_ptr<testing::ChildProcess> host_;
};

class PluginUpgrade : public UpgradeFixture, public ::testing::WithParamInterface<std::string> {};

TEST_P(PluginUpgrade, ReplacedFileKeepsRunningUntilSighupThenOnlyItsGroupsRestart) {
  start();
  produce_and_wait(1, 20);
  replace_probe_with(GetParam(), kProbeFixtures + "/upgrade_probe_v2.so");
  produce_and_wait(21, 40);
  ASSERT_TRUE(host_->running()) << tail(host_->log());
  EXPECT_EQ(by_version(probe_records()).count("v2"), 0u) << "upgraded before SIGHUP";

  host_->signal(SIGHUP);
  // Applied or rejected: a rejection fails at once, with its reason in the log's tail.
  wait_until([&] { return contains(host_->log(), kApplied) || contains(host_->log(), kRejected); },
             60s);
  ASSERT_TRUE(contains(host_->log(), kApplied)) << testing::process_summary(*host_) << "\n"
                                                << tail(host_->log(), 12);
  const std::string log = host_->log();
  ASSERT_EQ(count_of(log, kUpgraded), 1) << tail(log);
  const size_t at = log.rfind('\n', log.find(kUpgraded)) + 1;
  const auto line = nlohmann::json::parse(log.substr(at, log.find('\n', at) - at));
  EXPECT_EQ(line["file"], plugins_ + "/probe.so");
  EXPECT_EQ(line["from"], "upgrade-probe 1.0.0");
  EXPECT_EQ(line["to"], "upgrade-probe 2.0.0");
  EXPECT_EQ(line["groups"], "payments.requested/probe");
  EXPECT_EQ(line["to_sha256"].get<std::string>().size(), 16u);
  EXPECT_NE(line["from_sha256"], line["to_sha256"]);
  EXPECT_TRUE(contains(log, "group-started stream=payments.requested group=probe reason=retuned"))
      << tail(log);
  EXPECT_FALSE(contains(log, "group=other reason=")) << "the other group restarted\n" << tail(log);

  produce_and_wait(41, 60);
  auto probe = by_version(probe_records());
  for (int64_t id = 41; id <= 60; ++id) {
    EXPECT_EQ(probe["v2"].count(id), 1u) << "id " << id << " not handled by version 2";
    EXPECT_EQ(probe["v1"].count(id), 0u) << "id " << id << " handled by version 1";
  }
  for (int64_t id = 1; id <= 40; ++id) EXPECT_EQ(probe["v1"].count(id), 1u) << id;
  auto other = by_version(other_records());
  EXPECT_EQ(other["v1"].size(), 60u);
  EXPECT_EQ(other.count("v2"), 0u);

  host_->signal(SIGHUP);  // nothing changed on disk: nothing upgrades, nothing restarts
  ASSERT_TRUE(wait_until([&] { return count_of(host_->log(), kApplied) == 2; }, 60s))
      << tail(host_->log());
  EXPECT_EQ(count_of(host_->log(), kUpgraded), 1);
  EXPECT_EQ(count_of(host_->log(), "reason=retuned"), 1) << tail(host_->log());
  EXPECT_EQ(host_->wait(0ms), std::nullopt);
  host_->signal(SIGTERM);
  EXPECT_EQ(host_->wait(testing::kExitBound), 0) << tail(host_->log());
}

INSTANTIATE_TEST_SUITE_P(Replace, PluginUpgrade, ::testing::Values("cp", "mv", "install"),
                         [](const auto& p) { return p.param; });

using PluginUpgradeRefused = UpgradeFixture;

// A new file the loader refuses (not a plugin, then an untrusted mode): the reload is rejected
// with the file named, and version 1 keeps handling.
TEST_F(PluginUpgradeRefused, TheRunningVersionStays) {
  start();
  produce_and_wait(1, 10);
  replace_probe_with("install", kProbeFixtures + "/bad_magic.so");
  host_->signal(SIGHUP);
  ASSERT_TRUE(wait_until([&] { return contains(host_->log(), "reload-rejected problems="); }, 60s))
      << tail(host_->log());
  EXPECT_TRUE(contains(host_->log(), plugins_ + "/probe.so")) << tail(host_->log());
  EXPECT_TRUE(contains(host_->log(), "the running version stays")) << tail(host_->log());
  EXPECT_FALSE(contains(host_->log(), kUpgraded)) << tail(host_->log());
  produce_and_wait(11, 20);
  auto probe = by_version(probe_records());
  EXPECT_EQ(probe["v1"].size(), 20u);
  EXPECT_EQ(probe.count("v2"), 0u);
  host_->signal(SIGTERM);
  EXPECT_EQ(host_->wait(testing::kExitBound), 0) << tail(host_->log());
}

class PluginUpgradeTruncated : public UpgradeFixture,
                               public ::testing::WithParamInterface<std::string> {};

// Version 2 cut short (an install caught half-way): the reload is refused with the file named,
// the host does not die of SIGBUS and version 1 keeps handling.
TEST_P(PluginUpgradeTruncated, IsRefusedAndTheHostKeepsRunningTheOldImage) {
  start();
  produce_and_wait(1, 10);
  const std::string v2 = read_file(kProbeFixtures + "/upgrade_probe_v2.so");
  const size_t cut = GetParam() == "after_header" ? 64
                     : GetParam() == "mid_text"   ? v2.size() / 2
                                                  : v2.size() - 3000;
  const std::string partial = dir_.file("partial.so");
  std::ofstream(partial, std::ios::binary).write(v2.data(), static_cast<std::streamsize>(cut));
  replace_probe_with("install", partial);
  host_->signal(SIGHUP);
  ASSERT_TRUE(wait_until([&] { return contains(host_->log(), "reload-rejected problems="); }, 60s))
      << tail(host_->log());
  const std::string log = host_->log();
  EXPECT_TRUE(contains(log, plugins_ + "/probe.so")) << tail(log);
  EXPECT_TRUE(contains(log, std::to_string(cut) + "-byte file")) << tail(log);
  EXPECT_TRUE(contains(log, "truncated")) << tail(log);
  EXPECT_FALSE(contains(log, kUpgraded)) << tail(log);
  ASSERT_TRUE(host_->running()) << tail(log);
  produce_and_wait(11, 20);
  auto probe = by_version(probe_records());
  EXPECT_EQ(probe["v1"].size(), 20u);
  EXPECT_EQ(probe.count("v2"), 0u);
  host_->signal(SIGTERM);
  EXPECT_EQ(host_->wait(testing::kExitBound), 0) << tail(host_->log());
}

INSTANTIATE_TEST_SUITE_P(Cuts, PluginUpgradeTruncated,
                         ::testing::Values("after_header", "mid_text", "last_page"),
                         [](const auto& p) { return p.param; });

using PluginUpgradeCrashingConstructor = UpgradeFixture;

// The new file's constructor crashes (crash_fixture.so with SQLSTREAMS_FIXTURE_CTOR=segv in the
// host's environment; version 1 has no such constructor): its first load happens in a throwaway
// child, so the reload is refused and the host keeps running version 1.
TEST_F(PluginUpgradeCrashingConstructor, IsRefusedAtSighupAndTheHostKeepsRunning) {
  host_ = std::make_unique<testing::ChildProcess>(
      std::vector<std::string>{SQLSTREAMS_BINARY, "run", "--config", config_, "--plugin-dir",
                               plugins_},
      std::map<std::string, std::string>{{"SQLSTREAMS_DATABASE_URL", db_.url()},
                                         {"SQLSTREAMS_FIXTURE_CTOR", "segv"}},
      dir_.file("host.log"));
  ASSERT_TRUE(wait_until([&] { return contains(host_->log(), "host-ready"); }, 60s))
      << tail(host_->log());
  produce_and_wait(1, 10);
  replace_probe_with("install", kProbeFixtures + "/crash_fixture.so");
  host_->signal(SIGHUP);
  ASSERT_TRUE(wait_until([&] { return contains(host_->log(), "reload-rejected problems="); }, 60s))
      << tail(host_->log());
  const std::string log = host_->log();
  EXPECT_TRUE(contains(log, "plugin crashed while loading (signal 11")) << tail(log);
  EXPECT_TRUE(contains(log, plugins_ + "/probe.so")) << tail(log);
  ASSERT_TRUE(host_->running()) << tail(log);
  produce_and_wait(11, 20);
  EXPECT_EQ(by_version(probe_records())["v1"].size(), 20u);
  host_->signal(SIGTERM);
  EXPECT_EQ(host_->wait(testing::kExitBound), 0) << tail(host_->log());
}

using PluginUpgradeTransaction = UpgradeFixture;

// Version 2 installed AND a group added whose plugin file does not exist: the reload is rejected
// after version 2 was loaded beside version 1. Nothing switches: no plugin-upgraded, version 1
// keeps handling. With the config fixed, the next SIGHUP upgrades (logged once, then).
TEST_F(PluginUpgradeTransaction, ARejectedReloadSwitchesNothingTheNextOneUpgrades) {
  start();
  produce_and_wait(1, 10);
  replace_probe_with("install", kProbeFixtures + "/upgrade_probe_v2.so");
  const std::string good_config = read_file(config_);
  std::ofstream(config_, std::ios::app) << group("broken", "missing.so");
  host_->signal(SIGHUP);
  ASSERT_TRUE(wait_until([&] { return contains(host_->log(), "reload-rejected problems="); }, 60s))
      << tail(host_->log());
  EXPECT_TRUE(contains(host_->log(), "missing.so")) << tail(host_->log());
  EXPECT_FALSE(contains(host_->log(), kUpgraded)) << "a rejected reload upgraded\n"
                                                  << tail(host_->log());
  produce_and_wait(11, 20);
  auto probe = by_version(probe_records());
  EXPECT_EQ(probe["v1"].size(), 20u);
  EXPECT_EQ(probe.count("v2"), 0u);

  std::ofstream(config_, std::ios::trunc) << good_config;
  host_->signal(SIGHUP);
  ASSERT_TRUE(wait_until([&] { return contains(host_->log(), kApplied); }, 60s))
      << testing::process_summary(*host_) << "\n"
      << tail(host_->log(), 12);
  const std::string log = host_->log();
  ASSERT_EQ(count_of(log, kUpgraded), 1) << tail(log);
  EXPECT_LT(log.find("reload-rejected"), log.find(kUpgraded)) << tail(log);
  EXPECT_TRUE(contains(log, "\"to\":\"upgrade-probe 2.0.0\"")) << tail(log);
  EXPECT_TRUE(contains(log, "group-started stream=payments.requested group=probe reason=retuned"))
      << tail(log);
  produce_and_wait(21, 30);
  probe = by_version(probe_records());
  for (int64_t id = 21; id <= 30; ++id) EXPECT_EQ(probe["v2"].count(id), 1u) << id;
  host_->signal(SIGTERM);
  EXPECT_EQ(host_->wait(testing::kExitBound), 0) << tail(host_->log());
}

}  // namespace
}  // namespace sqlstreams::e2e
