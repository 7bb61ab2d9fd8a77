// runtime/isolation/README.md#the-supervisor: `isolation = "process"` children run the host's
// sealed plugin image, never the file on disk. A real host runs group "isolated" (upgrade_probe v1,
// one handler child, whose handler SIGKILLs its process on order-15, forcing child restarts); the
// plugin file is then rewritten in place WITHOUT a SIGHUP — with version 2, with version 2 cut in
// half, with text that is no ELF at all — and more messages are produced. Every restarted child
// still runs version 1: each innocent message is handled once, by v1, and only order-15 ends dead
// (it crashed each of its attempts). Before the fix the restarted child loaded the file: version 2
// ran beside the old one, and a broken file failed every restart and dead-lettered innocent
// messages. For version 2 a SIGHUP afterwards upgrades the group: from then on its children run v2.
// The host's log names the image each child maps (handler-process-started sha256=...).
// GroupPluginVisible: which version a group runs is visible
// (docs/operating/service.md#which-version-runs) — a group-plugin log line at start and for each
// group a reload restarts (manifest name and version, the image's SHA-256, the file), and
// `sqlstreams status` (text and --json) from the hosts' heartbeats.
#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "e2e_support.hpp"

namespace sqlstreams::e2e::isolated_image {
namespace {

namespace fs = std::filesystem;
const std::string kFixtures = SQLSTREAMS_FIXTURE_DIR;
constexpr int64_t kCrashing = 15;

using testing::read_file;

// "v1 3" lines → version → ids handled.
std::map<std::string, std::multiset<int64_t>> by_version(const std::string& records) {
  std::map<std::string, std::multiset<int64_t>> out;
  std::istringstream in(records);
  std::string version;
  int64_t id = 0;
  while (in >> version >> id) out[version].insert(id);
  return out;
}

std::string sha256_of(const std::string& file) {
  auto [code, out] = testing::run_command({"/usr/bin/sha256sum", file});
  EXPECT_EQ(code, 0) << out;
  return out.substr(0, 64);
}

// The JSON log lines of event `event`.
std::vector<nlohmann::json> events(const std::string& log, const std::string& event) {
  std::vector<nlohmann::json> out;
  std::istringstream in(log);
  std::string line;
  while (std::getline(in, line)) {
    if (line.find("\"event\":\"" + event + "\"") == std::string::npos) continue;
    out.push_back(nlohmann::json::parse(line, nullptr, false));
  }
  return out;
}

class IsolatedPluginImage : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    plugins_ = dir_.file("plugins");
    fs::create_directory(plugins_);
    fs::permissions(plugins_, fs::perms(0755));
    auto [code, out] = testing::run_command(
        {"/usr/bin/install", "-m", "0755", kFixtures + "/upgrade_probe_v1.so", probe_path()});
    ASSERT_EQ(code, 0) << out;
    config_ = dir_.file("isolated.toml");
    std::ofstream(config_)
        << "[host]\nname = \"image-host\"\nshutdown_timeout = \"5s\"\nhttp_listen = \"\"\n\n"
        << "[[streams]]\nname = \"" << kStream << "\"\n\n"
        << "[[groups]]\nname = \"isolated\"\nstream = \"" << kStream
        << "\"\nplugin = \"probe.so\"\nhandler = \"probe\"\nisolation = \"process\"\n"
        << "concurrency = 1\nlease_ttl = \"5s\"\nhandler_timeout = \"2s\"\npoll_interval = "
           "\"20ms\"\n"
        << "max_poll_interval = \"100ms\"\n"
        << "[groups.retry]\nmax_retries = 2\ninitial_backoff = \"100ms\"\n"
        << "base_delay = \"100ms\"\n"
        << "[groups.config]\nrecord_file = \"" << records_file() << "\"\ncrash_on = '\"order-"
        << kCrashing << "\"'\n";
  }
  std::string probe_path() const { return plugins_ + "/probe.so"; }
  std::string records_file() const { return dir_.file("records.txt"); }

  void start() {
    auto env = testing::sanitizer_options_letting_faults_through();
    env["SQLSTREAMS_DATABASE_URL"] = db_.url();
    env["LSAN_OPTIONS"] = lsan_options_for_lost_connections();
    host_ = std::make_unique<testing::ChildProcess>(
        std::vector<std::string>{SQLSTREAMS_BINARY, "run", "--config", config_, "--plugin-dir",
                                 plugins_},
        env, dir_.file("host.log"));
    ASSERT_TRUE(
        wait_until([&] { return host_->log().find("host-ready") != std::string::npos; }, 60s))
        << tail(host_->log());
    family_ = testing::stream_family(db_, kStream);  // the host declared it
  }
  // Committed through `to`, nothing in flight, and no exception row but `dead_ids` (dead).
  bool settled(int64_t to) {
    return scalar<bool>(db_.url(), "SELECT (SELECT min(committed) FROM " + family_.cursors +
                                       ") = " + std::to_string(to) +
                                       " AND NOT EXISTS (SELECT 1 FROM " + family_.leases +
                                       ") AND NOT EXISTS (SELECT 1 FROM " + family_.exceptions +
                                       " WHERE status <> 'dead')");
  }
  std::vector<int64_t> dead_ids() {
    std::vector<int64_t> out;
    for (const auto& row : query(db_.url(), "SELECT message_id FROM " + family_.exceptions +
                                                " WHERE status = 'dead' ORDER BY message_id")) {
      out.push_back(row[0].as<int64_t>());
    }
    return out;
  }
  void wait_settled(int64_t to) {
    ASSERT_TRUE(wait_until([&] { return settled(to) || !host_->running(); }, 120s, 100ms))
        << "dead: " << ::testing::PrintToString(dead_ids()) << "\n"
        << tail(host_->log(), 60);
    ASSERT_TRUE(host_->running()) << tail(host_->log(), 60);
  }
  // Rewrites the plugin file in place (same inode, mode 0755 kept), without a SIGHUP.
  void rewrite_plugin(const std::string& how) {
    std::string bytes;
    if (how == "garbage") {
      bytes = "this is not a plugin, just text an editor saved\n";
    } else {
      bytes = read_file(kFixtures + "/upgrade_probe_v2.so");
      ASSERT_GT(bytes.size(), 4096u);
      if (how == "truncated") bytes.resize(bytes.size() / 2);
    }
    std::ofstream out(probe_path(), std::ios::binary | std::ios::trunc);
    out << bytes;
    out.close();
    ASSERT_TRUE(out) << "cannot rewrite " << probe_path();
  }

  testing::TestDatabase db_;
  ScratchDir dir_;
  std::string plugins_, config_;
  std::unique_ptr<testing::ChildProcess> host_;
  testing::StreamFamily family_;  // kStream's tables, once start() has run
};

TEST_P(IsolatedPluginImage, RestartedChildrenRunTheHostsImageNotTheFileOnDisk) {
  start();
  produce_payments(db_.url(), 10, 1);
  wait_settled(10);
  rewrite_plugin(GetParam());
  // order-15 kills its child at each of its 3 attempts: every later message runs in a child
  // restarted after the file changed.
  produce_payments(db_.url(), 30, 11);
  wait_settled(40);

  EXPECT_EQ(dead_ids(), std::vector<int64_t>{kCrashing}) << "innocent messages were dead-lettered\n"
                                                         << tail(host_->log(), 60);
  auto records = by_version(read_file(records_file()));
  EXPECT_EQ(records.count("v2"), 0u) << "version 2 ran without a reload";
  for (int64_t id = 1; id <= 40; ++id) {
    if (id == kCrashing) continue;
    EXPECT_EQ(records["v1"].count(id), 1u) << "id " << id << " not handled once by version 1";
  }
  const std::string log = host_->log();
  EXPECT_GE(count_of(log, "\"event\":\"handler-process-crashed\""), 3) << tail(log);
  const auto started = events(log, "handler-process-started");
  EXPECT_GE(started.size(), 3u) << tail(log);
  const std::string v1 = sha256_of(kFixtures + "/upgrade_probe_v1.so");
  for (const auto& line : started) {
    EXPECT_EQ(line.value("sha256", ""), v1.substr(0, 16)) << line.dump();
  }

  if (GetParam() == "version2") {
    // Only a reload changes what the children run.
    host_->signal(SIGHUP);
    ASSERT_TRUE(wait_until(
        [&] { return host_->log().find("\"event\":\"reload-applied\"") != std::string::npos; },
        60s))
        << tail(host_->log());
    produce_payments(db_.url(), 10, 41);
    wait_settled(50);
    records = by_version(read_file(records_file()));
    for (int64_t id = 41; id <= 50; ++id) {
      EXPECT_EQ(records["v2"].count(id), 1u) << "id " << id << " not handled by version 2";
      EXPECT_EQ(records["v1"].count(id), 0u) << "id " << id << " handled by version 1";
    }
  }
  host_->signal(SIGTERM);
  EXPECT_EQ(host_->wait(testing::kExitBound), 0) << tail(host_->log());
}

using GroupPluginVisible = IsolatedPluginImage;

TEST_F(GroupPluginVisible, InTheLogAndInStatusAtStartAndAfterAnUpgrade) {
  const std::string v1 = sha256_of(kFixtures + "/upgrade_probe_v1.so");
  const std::string v2 = sha256_of(kFixtures + "/upgrade_probe_v2.so");
  start();
  auto lines = events(host_->log(), "group-plugin");
  ASSERT_EQ(lines.size(), 1u) << tail(host_->log());
  EXPECT_EQ(lines[0]["stream"], kStream);
  EXPECT_EQ(lines[0]["group"], "isolated");
  EXPECT_EQ(lines[0]["plugin"], "upgrade-probe");
  EXPECT_EQ(lines[0]["version"], "1.0.0");
  EXPECT_EQ(lines[0]["sha256"], v1);
  EXPECT_EQ(lines[0]["file"], probe_path());
  EXPECT_EQ(lines[0]["isolation"], "process");
  EXPECT_LT(host_->log().find("\"event\":\"group-plugin\""), host_->log().find("host-ready"));

  // `sqlstreams status` reads it from the host's heartbeat.
  auto status_plugins = [&] {
    const auto json =
        nlohmann::json::parse(cli({"status", "--json"}, db_.url()).second, nullptr, false);
    if (json.is_discarded()) return nlohmann::json();
    return json["streams"][0]["groups"][0]["plugins"];
  };
  auto shows = [&](const std::string& version, const std::string& sha) {
    const auto p = status_plugins();
    return p.is_array() && p.size() == 1 && p[0]["name"] == "upgrade-probe" &&
           p[0]["version"] == version && p[0]["sha256"] == sha && p[0]["hosts"] == 1;
  };
  ASSERT_TRUE(wait_until([&] { return shows("1.0.0", v1); }, 30s)) << status_plugins().dump();
  const std::string text = cli({"status"}, db_.url()).second;
  EXPECT_NE(text.find("plugin: isolated runs upgrade-probe 1.0.0 (sha256 " + v1.substr(0, 16) +
                      ") on 1 host(s)"),
            std::string::npos)
      << text;

  rewrite_plugin("version2");
  host_->signal(SIGHUP);
  ASSERT_TRUE(wait_until([&] { return events(host_->log(), "group-plugin").size() == 2; }, 60s))
      << tail(host_->log());
  lines = events(host_->log(), "group-plugin");
  EXPECT_EQ(lines[1]["version"], "2.0.0");
  EXPECT_EQ(lines[1]["sha256"], v2);
  EXPECT_TRUE(wait_until([&] { return shows("2.0.0", v2); }, 30s)) << status_plugins().dump();
  host_->signal(SIGTERM);
  EXPECT_EQ(host_->wait(testing::kExitBound), 0) << tail(host_->log());
}

INSTANTIATE_TEST_SUITE_P(Rewritten, IsolatedPluginImage,
                         ::testing::Values("version2", "truncated", "garbage"),
                         [](const auto& p) { return p.param; });

}  // namespace
}  // namespace sqlstreams::e2e::isolated_image
