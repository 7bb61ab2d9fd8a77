// Plugins that fault (docs/operating/security.md#plugins), with a real host and a real crashing
// plugin (tests/plugin_host/fixtures/crash_fixture.cpp):
//   - a segfault, abort(), an int thrown across the C ABI, SIGFPE: the host's last words name the
//   group,
//     handler and message in flight, and it dies by the signal (non-zero: Restart=on-failure);
//   - exit(0) / quick_exit(0) from a plugin: status 70, never 0;
//   - a message that crashes every host that runs it ends quarantined, then dead, through the
//     range reclaim budget and the retry budget, over real restarts; its neighbours succeed;
//   - `config check` refuses an untrusted plugin_dir before the plugin's code runs.
// The hosts run with ASAN_OPTIONS=handle_segv=0 so the fault reaches the host's handler and the
// default action (without it ASan reports the SEGV itself and exits 1: still non-zero).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "e2e_support.hpp"

namespace sqlstreams::e2e {
namespace {

namespace fs = std::filesystem;

struct CrashSetup {
  std::string how = "segv";
  std::string crash_on = "\"order-3\"";  // the JSON text of order-3's id, quotes included
  std::string lease_ttl = "3s";
  std::string retry;  // lines of [groups.retry]
  int max_range_reclaims = 3;
};

std::string crash_config(const CrashSetup& s) {
  return "[host]\nname = \"crashy-host\"\nshutdown_timeout = \"5s\"\nlog_format = \"json\"\n"
         "http_listen = \"\"\n\n[[streams]]\nname = \"" +
         std::string(kStream) + "\"\n\n[[groups]]\nname = \"crashy\"\nstream = \"" + kStream +
         "\"\nplugin = \"crash_fixture.so\"\nhandler = \"crash\"\nconcurrency = 4\n"
         "lease_ttl = \"" +
         s.lease_ttl + "\"\nhandler_timeout = \"1s\"\npoll_interval = \"20ms\"\n" +
         "max_poll_interval = \"200ms\"\nmax_range_reclaims = " +
         std::to_string(s.max_range_reclaims) + "\n[groups.config]\ncrash_on = '" + s.crash_on +
         "'\nhow = \"" + s.how + "\"\n" + (s.retry.empty() ? "" : "[groups.retry]\n" + s.retry);
}

std::unique_ptr<testing::ChildProcess> start_host(const ScratchDir& dir, const std::string& config,
                                                  const std::string& url, int n) {
  const std::string file = dir.file("crashy.toml");
  std::ofstream(file) << config;
  auto env = testing::sanitizer_options_letting_faults_through();
  env["SQLSTREAMS_DATABASE_URL"] = url;
  env["LSAN_OPTIONS"] = lsan_options_for_lost_connections();
  return std::make_unique<testing::ChildProcess>(
      std::vector<std::string>{SQLSTREAMS_BINARY, "run", "--config", file, "--plugin-dir",
                               SQLSTREAMS_FIXTURE_DIR},
      env, dir.file("crashy-" + std::to_string(n) + ".log"));
}

std::string line_with(const std::string& log, const std::string& needle) {
  size_t at = log.find(needle);
  if (at == std::string::npos) return "";
  size_t begin = log.rfind('\n', at);
  begin = begin == std::string::npos ? 0 : begin + 1;
  return log.substr(begin, log.find('\n', at) - begin);
}

struct Fault {
  std::string how;
  int exit_code;           // 128 + signal when killed by it
  std::string line_start;  // what the last words begin with
};

std::ostream& operator<<(std::ostream& os, const Fault& f) { return os << f.how; }

class PluginFault : public ::testing::TestWithParam<Fault> {};

TEST_P(PluginFault, TheHostNamesTheMessageInFlightAndNeverExitsZero) {
  const Fault& f = GetParam();
  testing::TestDatabase db;
  ScratchDir dir;
  CrashSetup setup;
  setup.how = f.how;
  auto host = start_host(dir, crash_config(setup), db.url(), 1);
  ASSERT_TRUE(wait_until([&] { return host->log().find("host-ready") != std::string::npos; }, 60s))
      << tail(host->log());
  query(db.url(),
        "SELECT sqlstreams.produce_batch('payments.requested', array_agg("
        "jsonb_build_object('order_id', 'order-' || g) ORDER BY g)) FROM "
        "generate_series(1, 5) g");
  auto code = host->wait(60s);
  ASSERT_TRUE(code.has_value()) << "the host did not die\n" << tail(host->log());
  EXPECT_EQ(*code, f.exit_code) << tail(host->log());
  const std::string line = line_with(host->log(), f.line_start);
  ASSERT_FALSE(line.empty()) << tail(host->log());
  EXPECT_NE(line.find("group payments.requested/crashy handler crash (plugin crash-fixture"),
            std::string::npos)
      << line;
  EXPECT_NE(line.find("message_id=3 attempt=1"), std::string::npos) << line;
  // The last words come last: nothing the host wrote follows them (other threads may still
  // log in the instant before the process ends, so allow a couple of lines).
  const std::string log = host->log();
  const size_t after = log.find(line) + line.size();
  EXPECT_LE(count_of(log.substr(after), "\n"), 3) << tail(log);
  // exit(): the hook ran before any static destructor that worker threads could still need
  // (the fixture's static is made at create(), after install_crash_handlers()).
  EXPECT_EQ(log.find("crash-fixture: static destroyed"), std::string::npos) << tail(log);
}

INSTANTIATE_TEST_SUITE_P(
    Faults, PluginFault,
    ::testing::Values(Fault{"segv", 128 + SIGSEGV, "sqlstreams: fatal-signal SIGSEGV"},
                      Fault{"abort", 128 + SIGABRT, "sqlstreams: fatal-signal SIGABRT"},
                      Fault{"throw", 128 + SIGABRT, "sqlstreams: fatal-signal SIGABRT"},
                      Fault{"fpe", 128 + SIGFPE, "sqlstreams: fatal-signal SIGFPE"},
                      Fault{"exit0", 70, "sqlstreams: undecided-exit"},
                      Fault{"quick_exit0", 70, "sqlstreams: undecided-exit"}),
    [](const auto& p) { return p.param.how; });

// A message that segfaults every host that runs it: restart the host after every crash, as
// systemd would. The range it is in is reclaimed, then quarantined (each message a `ready`
// row); the batch of rows running with it when it next crashes the host are run one by one
// afterwards; it alone spends its retry budget and ends dead. Its neighbours all succeed.
TEST(PluginFault, AMessageThatCrashesEveryHostEndsDeadAndItsNeighboursSucceed) {
  testing::TestDatabase db;
  ScratchDir dir;
  CrashSetup setup;
  setup.lease_ttl = "2s";
  setup.max_range_reclaims = 2;
  setup.retry = "max_retries = 2\ninitial_backoff = \"0s\"\nbase_delay = \"0s\"\n";
  const std::string config = crash_config(setup);
  std::ofstream(dir.file("crashy.toml")) << config;
  declare(db.url(), dir.file("crashy.toml"));
  const testing::StreamFamily t = testing::stream_family(db, kStream);
  query(db.url(),
        "SELECT sqlstreams.produce_batch('payments.requested', array_agg("
        "jsonb_build_object('order_id', 'order-' || g) ORDER BY g)) FROM "
        "generate_series(1, 12) g");
  auto dead_and_rest_done = [&] {
    return scalar<bool>(
        db.url(), "SELECT (SELECT count(*) FROM " + t.exceptions +
                      ") = 1 AND EXISTS (SELECT 1 FROM " + t.exceptions +
                      " WHERE message_id = 3 AND status = 'dead') AND (SELECT committed FROM " +
                      t.cursors + ") = 12 AND NOT EXISTS (SELECT 1 FROM " + t.leases + ")");
  };
  int crashes = 0;
  constexpr int kMaxRestarts = 12;
  std::string logs;
  for (int run = 1; run <= kMaxRestarts && !dead_and_rest_done(); ++run) {
    auto host = start_host(dir, config, db.url(), run);
    const bool resolved =
        wait_until([&] { return dead_and_rest_done() || !host->running(); }, 90s, 100ms);
    logs += host->log();
    if (!host->running()) {
      ++crashes;
      auto code = host->wait(1s);
      EXPECT_EQ(code, std::optional<int>(128 + SIGSEGV)) << tail(host->log());
      EXPECT_FALSE(line_with(host->log(), "fatal-signal SIGSEGV").empty()) << tail(host->log());
      EXPECT_NE(line_with(host->log(), "fatal-signal").find("message_id=3 "), std::string::npos)
          << tail(host->log());
      continue;
    }
    ASSERT_TRUE(resolved) << tail(host->log());
    EXPECT_EQ(host->wait(0ms), std::nullopt);
    host->signal(SIGTERM);
    // A hang's bound, not the exit's speed. 2026-12-06, a loaded slow machine: host-stopped was
    // logged 1.6 s after the SIGTERM and the process had not exited 20 s later; the report then
    // showed its one thread left in a ptrace stop (state t, wchan ptrace_stop): LeakSanitizer's
    // stop-the-world scan at exit, which a loaded machine makes last more than 20 s.
    EXPECT_EQ(host->wait(90s), std::optional<int>(0))
        << tail(host->log()) << testing::thread_report(host->pid());
  }
  ASSERT_TRUE(dead_and_rest_done())
      << query(db.url(), "SELECT message_id, status, attempts, last_error FROM " + t.exceptions +
                             " ORDER BY 1")
             .size()
      << " exception rows left\n"
      << tail(logs, 80);
  // Reclaims (first run + 2 reclaims, the last one quarantines without running), then the
  // quarantined batch, then its isolated runs: a bounded number of crashes.
  EXPECT_GE(crashes, 3);
  EXPECT_LE(crashes, 8);
  EXPECT_NE(logs.find("range-quarantined"), std::string::npos);
  const auto last_error = scalar<std::string>(
      db.url(), "SELECT last_error FROM " + t.exceptions + " WHERE message_id = 3");
  EXPECT_NE(last_error.find("did not finish: its host stopped while running it"), std::string::npos)
      << last_error;
}

// `config check` (often run as root) must not run a plugin's code before refusing it.
TEST(PluginTrust, ConfigCheckRefusesAWorldWritablePluginDirBeforeThePluginRuns) {
  ScratchDir dir;
  const fs::path plugins = fs::path(dir.path()) / "plugins";
  fs::create_directory(plugins);
  fs::copy_file(fs::path(SQLSTREAMS_FIXTURE_DIR) / "crash_fixture.so",
                plugins / "crash_fixture.so");
  fs::permissions(plugins / "crash_fixture.so", fs::perms(0755));
  fs::permissions(plugins, fs::perms(0777));
  const std::string config = dir.file("check.toml");
  std::ofstream(config) << "[host]\nplugin_dir = \"" << plugins.string()
                        << "\"\n\n[[streams]]\nname = \"s\"\n\n[[groups]]\nname = \"g\"\nstream = "
                           "\"s\"\nplugin = \"crash_fixture.so\"\nhandler = \"crash\"\n";
  const std::string marker = dir.file("constructor-ran");
  auto [code, out] = testing::run_command({SQLSTREAMS_BINARY, "config", "check", config},
                                          {{"SQLSTREAMS_FIXTURE_MARKER", marker}});
  EXPECT_EQ(code, 3) << out;
  EXPECT_NE(out.find("directory '" + plugins.string() + "'"), std::string::npos) << out;
  EXPECT_NE(out.find("mode 0777 (writable by others)"), std::string::npos) << out;
  EXPECT_NE(out.find("chmod go-w " + plugins.string()), std::string::npos) << out;
  EXPECT_FALSE(fs::exists(marker)) << "the refused plugin's constructor ran";

  // Fixed as the message says: it loads (and only now runs its constructor).
  fs::permissions(plugins, fs::perms(0755));
  auto [ok_code, ok_out] = testing::run_command({SQLSTREAMS_BINARY, "config", "check", config},
                                                {{"SQLSTREAMS_FIXTURE_MARKER", marker}});
  EXPECT_EQ(ok_code, 0) << ok_out;
  EXPECT_TRUE(fs::exists(marker));
}

TEST(PluginTrust, ConfigCheckRefusesAPluginOwnedByAnotherUser) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to chown the plugin to nobody";
  ScratchDir dir;
  const fs::path plugins = fs::path(dir.path()) / "plugins";
  fs::create_directory(plugins);
  fs::permissions(plugins, fs::perms(0755));
  fs::copy_file(fs::path(SQLSTREAMS_FIXTURE_DIR) / "crash_fixture.so",
                plugins / "crash_fixture.so");
  fs::permissions(plugins / "crash_fixture.so", fs::perms(0755));
  ASSERT_EQ(::chown((plugins / "crash_fixture.so").c_str(), 65534, static_cast<gid_t>(-1)), 0);
  const std::string config = dir.file("check.toml");
  std::ofstream(config) << "[host]\nplugin_dir = \"" << plugins.string()
                        << "\"\n\n[[streams]]\nname = \"s\"\n\n[[groups]]\nname = \"g\"\nstream = "
                           "\"s\"\nplugin = \"crash_fixture.so\"\nhandler = \"crash\"\n";
  const std::string marker = dir.file("constructor-ran");
  auto [code, out] = testing::run_command({SQLSTREAMS_BINARY, "config", "check", config},
                                          {{"SQLSTREAMS_FIXTURE_MARKER", marker}});
  EXPECT_EQ(code, 3) << out;
  EXPECT_NE(out.find("owned by uid 65534"), std::string::npos) << out;
  EXPECT_FALSE(fs::exists(marker)) << "the refused plugin's constructor ran";
}

}  // namespace
}  // namespace sqlstreams::e2e
