// The supervisor of `isolation = "process"` with real `sqlstreams __handler-child` processes
// running the real crash_fixture plugin (tests/plugin_host/fixtures/crash_fixture.cpp): a
// segfault, abort(), exit(0) and a hang each cost exactly the message that caused them a kRetry
// naming the signal or status; the other children keep answering; a crashed child comes back;
// a plugin the child refuses is the child's PluginLoadError; no child outlives its handler.
// The children run with ASan's own fault handlers off, so a fault ends them BY the signal.
#include <dirent.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <atomic>
#include <fstream>
#include <thread>

#include "isolation/isolation.hpp"

namespace sqlstreams::isolation {
namespace {

using namespace std::chrono_literals;
using plugin_host::OutcomeKind;
using Clock = std::chrono::steady_clock;

class Supervisor : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const char* inherited = std::getenv("ASAN_OPTIONS");
    std::string options = inherited && *inherited ? std::string(inherited) + ":" : "";
    options += "handle_segv=0:handle_sigbus=0:handle_sigfpe=0:handle_abort=0";
    ::setenv("ASAN_OPTIONS", options.c_str(), 1);  // before any thread: read by the children
  }

  static IsolationOptions options(const std::string& how, int children = 2,
                                  const std::string& handler = "crash") {
    IsolationOptions o;
    o.plugin_dir = SQLSTREAMS_FIXTURE_DIR;
    o.plugin = "crash_fixture.so";
    o.handler = handler;
    o.stream = "payments.requested";
    o.group = "isolated";
    o.config_json = "{\"crash_on\": \"boom\", \"how\": \"" + how + "\"}";
    o.children = children;
    o.handler_timeout = 300ms;
    o.restart.initial = 50ms;
    o.restart.max = 200ms;
    o.executable = SQLSTREAMS_BINARY;
    o.log_level = "warn";
    return o;
  }

  static plugin_host::Outcome handle(plugin_host::HandlerInstance& h, const std::string& payload,
                                     int64_t id = 1) {
    plugin_host::MessageView m;
    m.id = id;
    m.stream = "payments.requested";
    m.group = "isolated";
    m.payload = payload;
    return h.handle(m);
  }

  // Children of this process (every thread's), zombies included.
  static int child_count() {
    int n = 0;
    DIR* dir = ::opendir("/proc/self/task");
    while (dirent* e = ::readdir(dir)) {
      if (e->d_name[0] == '.') continue;
      std::ifstream in(std::string("/proc/self/task/") + e->d_name + "/children");
      std::string pid;
      while (in >> pid) ++n;
    }
    ::closedir(dir);
    return n;
  }

  // Until `payload` gets something other than "restarting" (the crashed child is back).
  static plugin_host::Outcome handle_when_up(plugin_host::HandlerInstance& h,
                                             const std::string& payload) {
    const auto deadline = Clock::now() + 20s;
    for (;;) {
      auto out = handle(h, payload);
      if (out.error != "handler process restarting" || Clock::now() > deadline) return out;
      std::this_thread::sleep_for(10ms);  // poll: the restart is due within 200 ms
    }
  }
};

TEST_F(Supervisor, OkMessagesRoundTripThroughTheChildren) {
  auto h = make_isolated_handler(options("segv"));
  EXPECT_EQ(h->plugin_name(), "crash-fixture");
  EXPECT_TRUE(h->concurrent());
  EXPECT_EQ(child_count(), 2);
  std::atomic<int> ok{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 50; ++i) {
        auto out = handle(*h, "{\"order_id\":\"order-" + std::to_string(i) + "\"}", t * 100 + i);
        if (out.kind == OutcomeKind::kOk) ++ok;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(ok.load(), 200);
}

struct Crash {
  std::string how;
  std::string error;
};
std::ostream& operator<<(std::ostream& os, const Crash& c) { return os << c.how; }

class SupervisorCrash : public Supervisor, public ::testing::WithParamInterface<Crash> {};

TEST_P(SupervisorCrash, OnlyTheCrashingMessageFailsAndTheChildComesBack) {
  auto h = make_isolated_handler(options(GetParam().how));
  auto crashed = handle(*h, "{\"order_id\":\"boom\"}");
  EXPECT_EQ(crashed.kind, OutcomeKind::kRetry);
  EXPECT_EQ(crashed.error.rfind(GetParam().error, 0), 0u) << crashed.error;
  // The other child answers at once; the crashed one is reaped (no zombie) and restarts.
  EXPECT_EQ(handle(*h, "{\"order_id\":\"fine\"}").kind, OutcomeKind::kOk);
  EXPECT_LE(child_count(), 2);
  for (int round = 0; round < 2; ++round) {
    auto again = handle_when_up(*h, "{\"order_id\":\"boom\"}");
    EXPECT_EQ(again.error.rfind(GetParam().error, 0), 0u) << again.error;
  }
  auto fine = handle_when_up(*h, "{\"order_id\":\"fine\"}");
  EXPECT_EQ(fine.kind, OutcomeKind::kOk) << fine.error;
  h.reset();
  EXPECT_EQ(child_count(), 0);
}

INSTANTIATE_TEST_SUITE_P(
    Faults, SupervisorCrash,
    ::testing::Values(Crash{"segv", "handler process crashed (signal 11)"},
                      Crash{"abort", "handler process crashed (signal 6)"},
                      Crash{"exit0", "handler process exited (status 70)"},
                      Crash{"hang", "handler process crashed (signal 9): killed, no answer"}),
    [](const auto& info) { return info.param.how; });

TEST_F(Supervisor, AHungChildIsKilledAfterTheTimeoutPlusGrace) {
  auto h = make_isolated_handler(options("hang", 1));
  const auto start = Clock::now();
  auto out = handle(*h, "{\"order_id\":\"boom\"}");
  const auto took = Clock::now() - start;
  EXPECT_EQ(out.kind, OutcomeKind::kRetry);
  EXPECT_GE(took, 300ms + kAnswerGrace);
  EXPECT_LT(took, 300ms + kAnswerGrace + 5s);
}

TEST_F(Supervisor, WhileTheOnlyChildIsDownHandleReturnsRestartingAtOnce) {
  auto o = options("segv", 1);
  o.restart.initial = 30s;  // it stays down for the whole test
  o.restart.max = 30s;
  auto h = make_isolated_handler(o);
  EXPECT_EQ(handle(*h, "{\"order_id\":\"boom\"}").error, "handler process crashed (signal 11)");
  const auto start = Clock::now();
  auto out = handle(*h, "{\"order_id\":\"fine\"}");
  EXPECT_EQ(out.kind, OutcomeKind::kRetry);
  EXPECT_EQ(out.error, "handler process restarting");
  EXPECT_LT(Clock::now() - start, 1s);
  EXPECT_EQ(child_count(), 0);  // reaped at once, not restarted yet
}

TEST_F(Supervisor, AHandlerTheChildCannotCreateIsItsPluginLoadError) {
  try {
    auto h = make_isolated_handler(options("segv", 2, "no-such-handler"));
    FAIL() << "created";
  } catch (const plugin_host::PluginLoadError& e) {
    EXPECT_NE(std::string(e.what()).find("no-such-handler"), std::string::npos) << e.what();
  }
  EXPECT_EQ(child_count(), 0);
}

TEST_F(Supervisor, AChildWhosePluginCrashesWhileLoadingIsALoadErrorNamingTheSignal) {
  ::setenv("SQLSTREAMS_FIXTURE_CTOR", "segv", 1);
  try {
    auto h = make_isolated_handler(options("segv", 1));
    ::unsetenv("SQLSTREAMS_FIXTURE_CTOR");
    FAIL() << "created";
  } catch (const plugin_host::PluginLoadError& e) {
    ::unsetenv("SQLSTREAMS_FIXTURE_CTOR");
    EXPECT_NE(e.found().find("handler process crashed (signal 11)"), std::string::npos)
        << e.found();
  }
  EXPECT_EQ(child_count(), 0);
}

}  // namespace
}  // namespace sqlstreams::isolation
