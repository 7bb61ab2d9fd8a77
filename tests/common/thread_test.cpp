// The runtime's thread policy (common/thread.hpp): a named thread, and an escaped exception is
// one located log line and an abort, never a silent thread death or a bare std::terminate.
#include "common/thread.hpp"

#include <gtest/gtest.h>
#include <pthread.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <stdexcept>

namespace sqlstreams {
namespace {

TEST(StartThread, NamesTheThreadCutToFifteenBytes) {
  std::string seen;
  start_thread("sqlstreams-claimer-orders", [&] {
    char buf[32] = {};
    ::pthread_getname_np(::pthread_self(), buf, sizeof buf);
    seen = buf;
  }).join();
  EXPECT_EQ(seen, "sqlstreams-clai");
}

TEST(StartThread, RunsTheBodyAndReturnsNormally) {
  int runs = 0;
  start_thread("ok", [&] { ++runs; }).join();
  EXPECT_EQ(runs, 1);
}

// The host logs to stderr (ops/logging); so does the death test's child here.
void log_to_stderr() {
  auto logger = spdlog::get("thread-test");
  if (!logger) logger = spdlog::stderr_logger_mt("thread-test");
  spdlog::set_default_logger(logger);
}

TEST(StartThreadDeathTest, AnEscapedExceptionIsLoggedWithItsThreadThenAborts) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  log_to_stderr();
  EXPECT_DEATH(
      start_thread("committer", [] { throw std::runtime_error("cursor row vanished"); }).join(),
      "thread-exception thread=committer what=cursor row vanished");
}

TEST(StartThreadDeathTest, ANonStdExceptionIsNamedAsSuch) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  log_to_stderr();
  EXPECT_DEATH(start_thread("retrier", [] { throw 42; }).join(),
               "thread-exception thread=retrier what=an exception that is not a std::exception");
}

}  // namespace
}  // namespace sqlstreams
