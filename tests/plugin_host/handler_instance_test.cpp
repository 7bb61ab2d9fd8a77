// HandlerInstance: the per-message call through the C ABI, misbehaving handlers (no outcome,
// unknown code, negative delay, exceptions) turned into RETRY, serialisation of
// non-concurrent handlers, and destroy() exactly once.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <link.h>

#include <cstring>
#include <thread>
#include <vector>

#include "test_support.hpp"

namespace {

using plugin_host_test::kFixtureDir;
using plugin_host_test::Message;
using sqlstreams::plugin_host::OutcomeKind;
using sqlstreams::plugin_host::PluginRegistry;

// The fixture's instance counter in the c_ok.so loaded last. The host loads private copies
// (/proc/<pid>/fd/<n>, one per registry), so the library is found among the loaded objects, not
// by the fixture's file name.
int live_c_instances() {
  struct Found {
    int (*fn)() = nullptr;
  } found;
  dl_iterate_phdr(
      [](struct dl_phdr_info* info, size_t, void* data) {
        if (info->dlpi_name == nullptr || std::strncmp(info->dlpi_name, "/proc/", 6) != 0) return 0;
        void* handle = ::dlopen(info->dlpi_name, RTLD_NOW | RTLD_NOLOAD);
        if (handle == nullptr) return 0;
        if (void* sym = ::dlsym(handle, "fixture_live_instances"); sym != nullptr) {
          static_cast<Found*>(data)->fn = reinterpret_cast<int (*)()>(sym);  // the last wins
        }
        ::dlclose(handle);
        return 0;
      },
      &found);
  return found.fn != nullptr ? found.fn() : -1;
}

class CHandler : public ::testing::Test {
 protected:
  PluginRegistry registry_{kFixtureDir};
  std::unique_ptr<sqlstreams::plugin_host::HandlerInstance> echo_ =
      registry_.create("c_ok.so", "c-echo", "{}", "payments.requested", "charge-cards");
};

TEST_F(CHandler, DescribesItself) {
  EXPECT_FALSE(echo_->concurrent());
  EXPECT_EQ(echo_->plugin_name(), "c-fixture");
}

TEST_F(CHandler, PassesEveryMessageField) {
  Message m{.payload = "echo", .attempt = 4, .id = 77, .key = "k-9", .schema_version = 2};
  const auto out = echo_->handle(m.view());
  EXPECT_EQ(out.kind, OutcomeKind::kRetry);
  EXPECT_EQ(out.error, "payments.requested|charge-cards|77|4|2|k-9|1700000000000|104");
  Message keyless{.payload = "echo"};
  EXPECT_NE(echo_->handle(keyless.view()).error.find("|(none)|"), std::string::npos);
}

TEST_F(CHandler, MapsEveryOutcome) {
  EXPECT_EQ(echo_->handle(Message{.payload = "fine"}.view()).kind, OutcomeKind::kOk);
  const auto delay = echo_->handle(Message{.payload = "delay"}.view());
  EXPECT_EQ(delay.kind, OutcomeKind::kDelay);
  EXPECT_EQ(delay.delay, std::chrono::milliseconds(1500));
  const auto terminal = echo_->handle(Message{.payload = "terminal"}.view());
  EXPECT_EQ(terminal.kind, OutcomeKind::kTerminal);
  EXPECT_EQ(terminal.error, "c-echo: terminal");
  const auto silent = echo_->handle(Message{.payload = "retry-silent"}.view());
  EXPECT_EQ(silent.kind, OutcomeKind::kRetry);
  EXPECT_EQ(silent.error, "handler returned RETRY without an error message");
}

// What crosses the ABI is made valid where it enters the host
// (runtime/plugin_host/README.md#calling-a-handler).
TEST_F(CHandler, TextAndDelayAreSanitizedAtTheBoundary) {
  const auto huge = echo_->handle(Message{.payload = "huge-delay"}.view());
  EXPECT_EQ(huge.kind, OutcomeKind::kDelay);
  EXPECT_EQ(huge.delay, sqlstreams::plugin_host::kMaxDelay) << "clamped to the 30-day ceiling";
  EXPECT_EQ(echo_->handle(Message{.payload = "bad-bytes"}.view()).error,
            "a\xEF\xBF\xBD"
            "b\xEF\xBF\xBD")
      << "NUL and invalid bytes become U+FFFD";
  EXPECT_EQ(echo_->handle(Message{.payload = "bogus-length"}.view()).error, "short")
      << "a length above the cap is not trusted: read up to the NUL";
  const auto cut = echo_->handle(Message{.payload = "long-text"}.view()).error;
  EXPECT_LE(cut.size(), 8192u);
  const std::string marker = " ...(truncated)";
  ASSERT_GT(cut.size(), marker.size());
  EXPECT_EQ(cut.substr(cut.size() - marker.size()), marker);
  const std::string body = cut.substr(0, cut.size() - marker.size());
  EXPECT_EQ(body.rfind("order a", 0), 0u);
  EXPECT_EQ((body.size() - 7) % 2, 0u) << "cut between two é, not inside one";
  EXPECT_EQ(body.substr(body.size() - 2), "\xC3\xA9");
}

TEST_F(CHandler, PluginBugsBecomeRetries) {
  const auto unset = echo_->handle(Message{.payload = "unset"}.view());
  EXPECT_EQ(unset.kind, OutcomeKind::kRetry);
  EXPECT_EQ(unset.error,
            "plugin bug: handler 'c-echo' of plugin 'c-fixture' returned without setting an "
            "outcome");
  const auto unknown = echo_->handle(Message{.payload = "code99"}.view());
  EXPECT_EQ(unknown.kind, OutcomeKind::kRetry);
  EXPECT_NE(unknown.error.find("plugin bug: "), std::string::npos);
  EXPECT_NE(unknown.error.find("unknown outcome code 99"), std::string::npos);
  const auto negative = echo_->handle(Message{.payload = "negative-delay"}.view());
  EXPECT_EQ(negative.kind, OutcomeKind::kRetry);
  EXPECT_NE(negative.error.find("negative delay_ms (-5)"), std::string::npos);
}

TEST(CHandlerLifetime, DestroyIsCalledOncePerInstance) {
  PluginRegistry registry(kFixtureDir);
  registry.load("c_ok.so");
  const int before = live_c_instances();
  ASSERT_GE(before, 0);
  {
    auto a = registry.create("c_ok.so", "c-echo", "{}", "s", "g1");
    auto b = registry.create("c_ok.so", "c-second", "{}", "s", "g2");
    EXPECT_EQ(live_c_instances(), before + 2);
    EXPECT_THROW(registry.create("c_ok.so", "c-echo", R"({"fail_loudly":1})", "s", "g3"),
                 sqlstreams::plugin_host::PluginLoadError);
    EXPECT_EQ(live_c_instances(), before + 2);
  }
  EXPECT_EQ(live_c_instances(), before);
}

TEST(SdkHandler, ExceptionsBecomeRetriesAndTerminalIsTerminal) {
  PluginRegistry registry(kFixtureDir);
  auto throws = registry.create("sdk_fixture.so", "throws", "{}", "s", "g");
  const auto runtime = throws->handle(Message{.payload = "runtime"}.view());
  EXPECT_EQ(runtime.kind, OutcomeKind::kRetry);
  EXPECT_EQ(runtime.error, "ledger offline");
  const auto unknown = throws->handle(Message{.payload = "int"}.view());
  EXPECT_EQ(unknown.kind, OutcomeKind::kRetry);
  EXPECT_EQ(unknown.error, "exception of type int (not derived from std::exception)");
  const auto terminal = throws->handle(Message{.payload = "terminal"}.view());
  EXPECT_EQ(terminal.kind, OutcomeKind::kTerminal);
  EXPECT_EQ(terminal.error, "no such account");
}

// Runs `calls` handle() calls on each of `threads` threads; returns how many were not OK.
int hammer(sqlstreams::plugin_host::HandlerInstance& h, int threads, int calls) {
  std::atomic<int> failures{0};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&] {
      for (int i = 0; i < calls; ++i) {
        Message m{.payload = "x"};
        if (h.handle(m.view()).kind != OutcomeKind::kOk) ++failures;
      }
    });
  }
  for (auto& t : pool) t.join();
  return failures.load();
}

TEST(SdkHandler, NonConcurrentHandlersAreSerialised) {
  PluginRegistry registry(kFixtureDir);
  auto serial = registry.create("sdk_fixture.so", "serial-probe", "{}", "s", "g");
  EXPECT_FALSE(serial->concurrent());
  EXPECT_EQ(hammer(*serial, 4, 10), 0);
}

TEST(SdkHandler, ConcurrentHandlersRunInParallel) {
  PluginRegistry registry(kFixtureDir);
  auto concurrent = registry.create("sdk_fixture.so", "concurrent-probe", "{}", "s", "g");
  EXPECT_TRUE(concurrent->concurrent());
  EXPECT_EQ(hammer(*concurrent, 2, 1), 0);
}

}  // namespace
