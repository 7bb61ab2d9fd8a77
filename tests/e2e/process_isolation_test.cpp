// `isolation = "process"` (runtime/isolation/README.md) with a real host: group "isolated" runs
// crash_fixture in handler child processes and its handler segfaults / aborts / calls exit(0) on
// order-3, while group "steady" runs the same plugin in-process on the same stream. The host never
// exits; the crashing message ends dead after max_retries with the crash as its error; its
// neighbours in the isolated group and every message of the steady group succeed; SIGTERM still
// exits 0 and leaves no handler child behind.
// Like plugin_fault_test, the host runs with ASan's fault handlers off (inherited by the
// children), so a faulting child ends BY its signal.
#include <dirent.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <fstream>

#include "e2e_support.hpp"

namespace sqlstreams::e2e {
namespace {

std::string isolation_config(const std::string& how) {
  const std::string group_common =
      "stream = \"payments.requested\"\nplugin = \"crash_fixture.so\"\nhandler = \"crash\"\n"
      "concurrency = 2\nlease_ttl = \"5s\"\nhandler_timeout = \"1s\"\n"
      "poll_interval = \"20ms\"\nmax_poll_interval = \"200ms\"\n";
  return "[host]\nname = \"isolating-host\"\nshutdown_timeout = \"5s\"\nlog_format = \"json\"\n"
         "http_listen = \"\"\n\n[[streams]]\nname = \"payments.requested\"\n\n"
         "[[groups]]\nname = \"isolated\"\nisolation = \"process\"\n" +
         group_common +
         "[groups.retry]\nmax_retries = 2\ninitial_backoff = \"100ms\"\nbase_delay = "
         "\"100ms\"\n[groups.config]\ncrash_on = '\"order-3\"'\nhow = \"" +
         how + "\"\n\n[[groups]]\nname = \"steady\"\n" + group_common +
         "[groups.config]\ncrash_on = 'never-in-a-payload'\nhow = \"" + how + "\"\n";
}

// Processes started as handler children of host `pid` that are still alive (or zombies).
int children_of(pid_t pid) {
  const std::string marker = std::string("--parent-pid") + '\0' + std::to_string(pid) + '\0';
  int n = 0;
  DIR* proc = ::opendir("/proc");
  while (dirent* e = ::readdir(proc)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    // A process may end between readdir and the read (a crashing handler child does, often).
    const auto cmdline = testing::read_proc_file(std::string("/proc/") + e->d_name + "/cmdline");
    if (cmdline && cmdline->find("__handler-child") != std::string::npos &&
        cmdline->find(marker) != std::string::npos) {
      ++n;
    }
  }
  ::closedir(proc);
  return n;
}

struct ChildFault {
  std::string how;
  std::string error;      // the dead message's last_error
  std::string log_field;  // in the handler-process-crashed line
};
std::ostream& operator<<(std::ostream& os, const ChildFault& f) { return os << f.how; }

class ProcessIsolation : public ::testing::TestWithParam<ChildFault> {};

TEST_P(ProcessIsolation, ACrashingHandlerCostsItsMessageOnlyAndTheHostKeepsRunning) {
  const ChildFault& f = GetParam();
  testing::TestDatabase db;
  ScratchDir dir;
  const std::string config = dir.file("isolated.toml");
  std::ofstream(config) << isolation_config(f.how);
  auto env = testing::sanitizer_options_letting_faults_through();
  env["SQLSTREAMS_DATABASE_URL"] = db.url();
  env["LSAN_OPTIONS"] = lsan_options_for_lost_connections();
  testing::ChildProcess host(
      {SQLSTREAMS_BINARY, "run", "--config", config, "--plugin-dir", SQLSTREAMS_FIXTURE_DIR}, env,
      dir.file("host.log"));
  ASSERT_TRUE(wait_until([&] { return host.log().find("host-ready") != std::string::npos; }, 60s))
      << tail(host.log());
  // One child per worker of the isolated group (concurrency = 2), none for the steady group.
  EXPECT_TRUE(wait_until([&] { return children_of(host.pid()) == 2; }, 30s)) << tail(host.log());
  constexpr int kMessages = 200;
  produce_payments(db.url(), kMessages);

  const testing::StreamFamily t = testing::stream_family(db, "payments.requested");
  const std::string group_id = "(SELECT id FROM sqlstreams.groups WHERE name = '";
  auto settled = [&] {
    return scalar<bool>(db.url(), "SELECT (SELECT count(*) FROM " + t.exceptions +
                                      ") = 1 AND EXISTS (SELECT 1 FROM " + t.exceptions +
                                      " WHERE message_id = 3 AND status = 'dead' AND group_id = " +
                                      group_id + "isolated')) AND (SELECT min(committed) FROM " +
                                      t.cursors + ") = " + std::to_string(kMessages) +
                                      " AND NOT EXISTS (SELECT 1 FROM " + t.leases + ")");
  };
  const bool done = wait_until([&] { return settled() || !host.running(); }, 90s, 100ms);
  ASSERT_TRUE(host.running()) << "the host died\n" << tail(host.log());
  ASSERT_TRUE(done) << query(db.url(), "SELECT 1 FROM " + t.exceptions).size()
                    << " exception rows\n"
                    << tail(host.log(), 60);

  const auto dead =
      query(db.url(), "SELECT attempts, last_error FROM " + t.exceptions + " WHERE message_id = 3");
  ASSERT_EQ(dead.size(), 1u);
  EXPECT_EQ(dead[0][0].as<int>(), 3);  // the first attempt and max_retries = 2 retries
  EXPECT_EQ(dead[0][1].as<std::string>().rfind(f.error, 0), 0u) << dead[0][1].as<std::string>();

  const std::string log = host.log();
  EXPECT_GE(count_of(log, "\"event\":\"handler-process-crashed\""), 3) << tail(log);
  EXPECT_NE(log.find(f.log_field), std::string::npos) << tail(log);
  EXPECT_NE(log.find("\"event\":\"handler-process-started\""), std::string::npos);
  // exit0: the child re-armed its exit hook after create(), so the hook ended it before the
  // plugin's statics were destroyed (their line would be in the log, as child-stderr).
  EXPECT_EQ(log.find("crash-fixture: static destroyed"), std::string::npos) << tail(log);
  // Crashed children are reaped at once and restarted on demand (after their backoff): more
  // messages are all handled by the isolated group, by restarted children, never more than 2.
  produce_payments(db.url(), 20, kMessages + 1);
  ASSERT_TRUE(wait_until(
      [&] {
        return scalar<bool>(db.url(), "SELECT (SELECT min(committed) FROM " + t.cursors +
                                          ") = " + std::to_string(kMessages + 20) +
                                          " AND (SELECT count(*) FROM " + t.exceptions + ") = 1");
      },
      60s, 100ms))
      << tail(host.log());
  EXPECT_GE(count_of(host.log(), "\"event\":\"handler-process-started\""), 3);
  EXPECT_GE(children_of(host.pid()), 1);
  EXPECT_LE(children_of(host.pid()), 2);

  host.signal(SIGTERM);
  EXPECT_EQ(host.wait(testing::kExitBound), std::optional<int>(0)) << tail(host.log());
  EXPECT_EQ(children_of(host.pid()), 0);
}

INSTANTIATE_TEST_SUITE_P(Faults, ProcessIsolation,
                         ::testing::Values(ChildFault{"segv", "handler process crashed (signal 11)",
                                                      "\"signal\":\"11\""},
                                           ChildFault{"abort", "handler process crashed (signal 6)",
                                                      "\"signal\":\"6\""},
                                           ChildFault{"exit0", "handler process exited (status 70)",
                                                      "\"status\":\"70\""}),
                         [](const auto& p) { return p.param.how; });

}  // namespace
}  // namespace sqlstreams::e2e
