// The C++ layer's asynchronous handler (ABI 1.2: AsyncTypedHandler, Completion) driven through
// the C ABI with the SDK's FakeHost: completion from another thread, completing once, a dropped
// Completion, exceptions at the boundary, undecodable payloads, the synchronous handle().
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <mutex>
#include <sqlstreams/plugin.hpp>
#include <sqlstreams/testing/fake_host.hpp>
#include <thread>
#include <vector>

namespace {

using namespace std::chrono_literals;

struct Job {
  std::string action;
};
inline void from_json(const nlohmann::json& j, Job& job) { job.action = j.at("action"); }

// Keeps what the test asks it to keep; completes on a thread of its own otherwise.
class Worker : public sqlstreams::AsyncTypedHandler<Job> {
 public:
  static constexpr const char* kName = "worker";
  static constexpr int kSchemaVersion = 1;
  static constexpr bool kConcurrent = true;

  ~Worker() override {
    for (auto& t : threads_) t.join();
  }
  void handle_async(Job job, const sqlstreams::MessageContext& m,
                    sqlstreams::Completion done) override {
    if (job.action == "throw") throw std::runtime_error("provider exploded");
    if (job.action == "terminal") sqlstreams::terminal("no such account");
    if (job.action == "drop") return;  // `done` is destroyed here, never completed
    if (job.action == "twice") {
      EXPECT_TRUE(done.complete(sqlstreams::ok()));
      EXPECT_FALSE(done.complete(sqlstreams::retry("again"))) << "a Completion completes once";
      return;
    }
    const std::string payload(m.payload);  // the views stay valid until completion
    std::lock_guard<std::mutex> lock(mu_);
    threads_.emplace_back([done = std::move(done), payload]() mutable {
      std::this_thread::sleep_for(5ms);
      done.complete(payload.find("later") != std::string::npos ? sqlstreams::ok()
                                                               : sqlstreams::retry("unexpected"));
    });
  }

 private:
  std::mutex mu_;
  std::vector<std::thread> threads_;
};

class SyncWorker : public sqlstreams::TypedHandler<Job> {
 public:
  static constexpr const char* kName = "sync";
  static constexpr int kSchemaVersion = 1;
  sqlstreams::Result handle(const Job&, const sqlstreams::MessageContext&) override {
    return sqlstreams::ok();
  }
};

TEST(AsyncLayer, TheDescriptorCarriesHandleAsyncOnlyForAsyncHandlers) {
  EXPECT_NE(sqlstreams::testing::descriptor_of<Worker>().handle_async, nullptr);
  EXPECT_NE(sqlstreams::testing::descriptor_of<Worker>().handle, nullptr) << "still required";
  EXPECT_EQ(sqlstreams::testing::descriptor_of<SyncWorker>().handle_async, nullptr);
  EXPECT_EQ(sqlstreams::testing::descriptor_of<Worker>().struct_size,
            sizeof(sqlstreams_type_handler));
}

TEST(AsyncLayer, CompletesFromAnotherThread) {
  sqlstreams::testing::FakeHost host(sqlstreams::testing::descriptor_of<Worker>());
  ASSERT_TRUE(host.asynchronous());
  auto f = host.start({.payload = R"({"action":"later"})"});
  ASSERT_EQ(f.wait_for(10s), std::future_status::ready);
  EXPECT_EQ(f.get().code, SQLSTREAMS_OUTCOME_OK);
}

TEST(AsyncLayer, ADroppedCompletionIsARetry) {
  sqlstreams::testing::FakeHost host(sqlstreams::testing::descriptor_of<Worker>());
  auto out = host.start({.payload = R"({"action":"drop"})"}).get();
  EXPECT_EQ(out.code, SQLSTREAMS_OUTCOME_RETRY);
  EXPECT_EQ(out.error, "handler dropped the completion");
}

TEST(AsyncLayer, ExceptionsBecomeOutcomesAtTheBoundary) {
  sqlstreams::testing::FakeHost host(sqlstreams::testing::descriptor_of<Worker>());
  auto thrown = host.start({.payload = R"({"action":"throw"})"}).get();
  EXPECT_EQ(thrown.code, SQLSTREAMS_OUTCOME_RETRY);
  EXPECT_EQ(thrown.error, "provider exploded") << "the exception, not the dropped completion";
  auto terminal = host.start({.payload = R"({"action":"terminal"})"}).get();
  EXPECT_EQ(terminal.code, SQLSTREAMS_OUTCOME_TERMINAL);
  EXPECT_EQ(terminal.error, "no such account");
  auto undecodable = host.start({.payload = R"({"no_action":1})"}).get();
  EXPECT_EQ(undecodable.code, SQLSTREAMS_OUTCOME_TERMINAL);
  EXPECT_NE(undecodable.error.find("does not decode"), std::string::npos) << undecodable.error;
}

TEST(AsyncLayer, CompletingTwiceReachesTheHostOnce) {
  sqlstreams::testing::FakeHost host(sqlstreams::testing::descriptor_of<Worker>());
  const uint64_t dropped = sqlstreams::testing::FakeHost::dropped_completions();
  EXPECT_EQ(host.start({.payload = R"({"action":"twice"})"}).get().code, SQLSTREAMS_OUTCOME_OK);
  EXPECT_EQ(sqlstreams::testing::FakeHost::dropped_completions(), dropped)
      << "the second complete() never left the plugin";
}

TEST(AsyncLayer, TheSynchronousHandleWaitsForTheCompletion) {
  sqlstreams::testing::FakeHost host(sqlstreams::testing::descriptor_of<Worker>());
  EXPECT_EQ(host.handle({.payload = R"({"action":"later"})"}).code, SQLSTREAMS_OUTCOME_OK);
  EXPECT_EQ(host.handle({.payload = R"({"action":"drop"})"}).error,
            "handler dropped the completion");
}

TEST(AsyncLayer, AnEmptyOrMovedFromCompletionDoesNothing) {
  sqlstreams::Completion empty;
  EXPECT_FALSE(empty.pending());
  EXPECT_FALSE(empty.complete(sqlstreams::ok()));
}

}  // namespace
