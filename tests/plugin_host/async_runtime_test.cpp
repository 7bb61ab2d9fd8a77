// Runtime test of plugins/async_io (ABI 1.2 handle_async) through PluginRegistry: completions
// from the plugin's timer thread, out of order; every outcome kind; a completion repeated, after
// cancel_async(), and after the instance was destroyed (dropped and counted, never a crash: the
// suite runs under ASan).
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "test_support.hpp"

namespace {

using namespace std::chrono_literals;
using plugin_host_test::kPluginDir;
using plugin_host_test::Message;
using sqlstreams::plugin_host::Outcome;
using sqlstreams::plugin_host::OutcomeKind;
using sqlstreams::plugin_host::PluginRegistry;

// Collects the outcomes `done` receives, with the thread each came from.
struct Outcomes {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::pair<int64_t, Outcome>> got;
  std::vector<std::thread::id> threads;
  sqlstreams::plugin_host::AsyncDone done_for(int64_t id) {
    return [this, id](const Outcome& o) {
      std::lock_guard lock(mu);
      got.emplace_back(id, o);
      threads.push_back(std::this_thread::get_id());
      cv.notify_all();
    };
  }
  bool wait_for(size_t n, std::chrono::milliseconds timeout = 10s) {
    std::unique_lock lock(mu);
    return cv.wait_for(lock, timeout, [&] { return got.size() >= n; });
  }
};

template <class Pred>
bool eventually(Pred pred, std::chrono::milliseconds timeout = 10s) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (pred()) return true;
    std::this_thread::sleep_for(5ms);
  }
  return pred();
}

// Keeps a Message's bytes alive for the instance (the pipeline passes its RangeWork).
std::shared_ptr<const void> owned(std::shared_ptr<Message> m) { return m; }

TEST(AsyncIo, DeclaresAsynchronousAndCompletesOutOfOrderFromItsTimerThread) {
  PluginRegistry registry(kPluginDir);
  const auto& info = registry.load("async_io.so");
  EXPECT_EQ(info.abi_minor, 3u);
  ASSERT_EQ(info.handler_infos.size(), 1u);
  EXPECT_TRUE(info.handler_infos[0].asynchronous);
  auto h = registry.create("async_io.so", "timer-io", R"({"delay_ms": 10})", "s", "g");
  ASSERT_TRUE(h->asynchronous());
  Outcomes out;
  constexpr int kMessages = 20;
  for (int i = 1; i <= kMessages; ++i) {  // the first waits longest: completions come reversed
    auto m = std::make_shared<Message>(Message{
        .payload = R"({"delay_ms":)" + std::to_string((kMessages - i) * 15) + "}", .id = i});
    EXPECT_NE(h->start_async(m->view(), owned(m), out.done_for(i)), 0u);
  }
  ASSERT_TRUE(out.wait_for(kMessages));
  std::lock_guard lock(out.mu);
  EXPECT_EQ(out.got.front().first, kMessages) << "the shortest delay completes first";
  EXPECT_EQ(out.got.back().first, 1);
  for (const auto& [id, o] : out.got) EXPECT_EQ(o.kind, OutcomeKind::kOk) << o.error;
  for (auto t : out.threads) EXPECT_NE(t, std::this_thread::get_id());
}

TEST(AsyncIo, EveryOutcomeKindTravelsThroughTheCompletion) {
  PluginRegistry registry(kPluginDir);
  auto h = registry.create("async_io.so", "timer-io", R"({"delay_ms": 0})", "s", "g");
  Outcomes out;
  const std::vector<std::string> payloads = {R"({"outcome":"retry"})", R"({"outcome":"terminal"})",
                                             R"({"outcome":"delay"})", "this is not json"};
  for (size_t i = 0; i < payloads.size(); ++i) {
    auto m = std::make_shared<Message>(Message{.payload = payloads[i], .id = int64_t(i)});
    h->start_async(m->view(), owned(m), out.done_for(int64_t(i)));
  }
  ASSERT_TRUE(out.wait_for(payloads.size()));
  std::map<int64_t, Outcome> by_id(out.got.begin(), out.got.end());
  EXPECT_EQ(by_id[0].kind, OutcomeKind::kRetry);
  EXPECT_EQ(by_id[0].error, "timer-io: asked to retry");
  EXPECT_EQ(by_id[1].kind, OutcomeKind::kTerminal);
  EXPECT_EQ(by_id[2].kind, OutcomeKind::kDelay);
  EXPECT_EQ(by_id[2].delay, 1000ms);
  EXPECT_EQ(by_id[3].kind, OutcomeKind::kTerminal) << "an undecodable payload: " << by_id[3].error;
}

TEST(AsyncIo, ACompletionRepeatedIsDroppedAndCounted) {
  PluginRegistry registry(kPluginDir);
  auto h = registry.create("async_io.so", "timer-io", R"({"delay_ms": 0})", "s", "g");
  Outcomes out;
  auto m = std::make_shared<Message>(Message{.payload = "{}"});
  const uint64_t token = h->start_async(m->view(), owned(m), out.done_for(1));
  ASSERT_TRUE(out.wait_for(1));
  const uint64_t unknown = sqlstreams::plugin_host::async_unknown_completions();
  EXPECT_FALSE(
      sqlstreams::plugin_host::complete_async(token, OutcomeKind::kTerminal, 0ms, "again"));
  EXPECT_FALSE(sqlstreams::plugin_host::complete_async(987654321987ull, OutcomeKind::kOk, 0ms, ""));
  EXPECT_EQ(sqlstreams::plugin_host::async_unknown_completions(), unknown + 2);
  std::lock_guard lock(out.mu);
  ASSERT_EQ(out.got.size(), 1u) << "done ran once";
  EXPECT_EQ(out.got[0].second.kind, OutcomeKind::kOk);
}

TEST(AsyncIo, ACompletionAfterTheHostGaveUpIsDroppedAndCounted) {
  PluginRegistry registry(kPluginDir);
  auto h = registry.create("async_io.so", "timer-io", R"({"delay_ms": 100})", "s", "g");
  Outcomes out;
  auto m = std::make_shared<Message>(Message{.payload = "{}"});
  std::weak_ptr<Message> bytes = m;
  const uint64_t token = h->start_async(m->view(), owned(m), out.done_for(1));
  m.reset();
  EXPECT_FALSE(bytes.expired()) << "the instance keeps the message until the plugin completes";
  EXPECT_TRUE(h->cancel_async(token));
  EXPECT_FALSE(h->cancel_async(token)) << "cancelled once";
  ASSERT_TRUE(eventually([&] { return h->dropped_completions() == 1; }));
  EXPECT_TRUE(bytes.expired()) << "freed once the plugin completed";
  std::lock_guard lock(out.mu);
  EXPECT_TRUE(out.got.empty()) << "done never runs after cancel_async";
}

TEST(AsyncIo, CompletionsAfterTheInstanceIsDestroyedAreHarmless) {
  PluginRegistry registry(kPluginDir);
  const size_t pending_before = sqlstreams::plugin_host::async_pending_messages();
  const uint64_t unknown = sqlstreams::plugin_host::async_unknown_completions();
  Outcomes out;
  std::vector<std::weak_ptr<Message>> bytes;
  {
    auto h = registry.create("async_io.so", "timer-io",
                             R"({"delay_ms": 60000, "on_destroy": "complete_late"})", "s", "g");
    for (int i = 0; i < 10; ++i) {
      auto m = std::make_shared<Message>(Message{.payload = "{}", .id = i});
      bytes.push_back(m);
      h->start_async(m->view(), owned(m), out.done_for(i));
    }
    EXPECT_EQ(sqlstreams::plugin_host::async_pending_messages(), pending_before + 10);
  }  // destroyed with 10 pending: its destructor hands them to a thread completing 50 ms later
  EXPECT_EQ(sqlstreams::plugin_host::async_pending_messages(), pending_before);
  for (auto& b : bytes) EXPECT_TRUE(b.expired()) << "freed when destroy() returned";
  ASSERT_TRUE(eventually(
      [&] { return sqlstreams::plugin_host::async_unknown_completions() >= unknown + 10; }));
  std::lock_guard lock(out.mu);
  EXPECT_TRUE(out.got.empty());
}

TEST(AsyncIo, TheSynchronousHandleWaitsForTheCompletion) {  // what isolation = "process" runs
  PluginRegistry registry(kPluginDir);
  auto h = registry.create("async_io.so", "timer-io", R"({"delay_ms": 30})", "s", "g");
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(h->handle(Message{.payload = R"({"outcome":"retry"})"}.view()).kind,
            OutcomeKind::kRetry);
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 30ms);
}

TEST(AsyncIo, ASynchronousPluginIsNotAsynchronous) {
  PluginRegistry registry(kPluginDir);
  auto h = registry.create("noop.so", "noop", "{}", "s", "g");
  EXPECT_FALSE(h->asynchronous());
  EXPECT_FALSE(registry.load("noop.so").handler_infos[0].asynchronous);
}

}  // namespace
