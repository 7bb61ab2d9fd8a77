// Runtime test of tests/plugins/payments_faults: the test plugin payments_faults.so (the
// payments handlers with scripted faults) loaded through PluginRegistry. Other tests rely on
// these knobs doing exactly this.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "test_support.hpp"

namespace {

using plugin_host_test::Message;
using plugin_host_test::payment;
using sqlstreams::plugin_host::OutcomeKind;
using sqlstreams::plugin_host::PluginLoadError;

class PaymentsFaults : public plugin_host_test::PaymentsPluginTest {
 protected:
  PaymentsFaults() : PaymentsPluginTest("payments_faults.so") {}
};

TEST_F(PaymentsFaults, ManifestListsBothHandlers) {
  const auto& info = registry_.load("payments_faults.so");
  EXPECT_EQ(info.name, "payments-faults");
  EXPECT_EQ(info.handlers, (std::vector<std::string>{"charge-cards", "audit-payments"}));
  for (const auto& h : info.handler_infos) {
    EXPECT_EQ(h.schema_versions, (std::vector<int32_t>{1, 2}));
    EXPECT_TRUE(h.concurrent);
  }
}

TEST_F(PaymentsFaults, BehavesAsTheExampleWithoutFaults) {
  auto h = charge(R"({"unreachable_orders": ["order-7"]})");
  EXPECT_EQ(h->handle(Message{.payload = payment("order-7")}.view()).kind, OutcomeKind::kRetry);
  EXPECT_EQ(h->handle(Message{.payload = payment("order-8")}.view()).kind, OutcomeKind::kOk);
  const auto out = h->handle(Message{.payload = payment("order-5", true)}.view());
  EXPECT_EQ(out.kind, OutcomeKind::kTerminal);
  EXPECT_EQ(out.error, "order order-5 was cancelled");
  EXPECT_EQ(charge(R"({"provider": "unreachable"})")
                ->handle(Message{.payload = payment("order-8")}.view())
                .error,
            "payment provider unreachable");
}

TEST_F(PaymentsFaults, FlakyProviderSucceedsAfterNAttempts) {
  auto h = charge(R"({"flaky_attempts": 2})");
  for (int attempt = 1; attempt <= 3; ++attempt) {
    const auto out = h->handle(Message{.payload = payment("o"), .attempt = attempt}.view());
    EXPECT_EQ(out.kind, attempt <= 2 ? OutcomeKind::kRetry : OutcomeKind::kOk) << attempt;
  }
}

TEST_F(PaymentsFaults, DelayOrders) {
  const auto dflt =
      charge(R"({"delay_orders": ["o"]})")->handle(Message{.payload = payment("o")}.view());
  EXPECT_EQ(dflt.kind, OutcomeKind::kDelay);
  EXPECT_EQ(dflt.delay, std::chrono::milliseconds(1000));
  const auto custom = charge(R"({"delay_orders": ["o"], "delay_ms": 40})")
                          ->handle(Message{.payload = payment("o")}.view());
  EXPECT_EQ(custom.delay, std::chrono::milliseconds(40));
}

TEST_F(PaymentsFaults, ThrowingHandlerRetries) {
  const auto out =
      charge(R"({"throw_orders": ["o"]})")->handle(Message{.payload = payment("o")}.view());
  EXPECT_EQ(out.kind, OutcomeKind::kRetry);
  EXPECT_EQ(out.error, "charge-cards crashed on order o");
}

TEST_F(PaymentsFaults, HangAndSleepTakeTime) {
  auto h = charge(R"({"hang_orders": ["slow"], "hang_ms": 60, "sleep_ms": 5})");
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(h->handle(Message{.payload = payment("slow")}.view()).kind, OutcomeKind::kOk);
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(65));
}

TEST_F(PaymentsFaults, RecordFileGetsOneLinePerCall) {
  const auto path = std::filesystem::temp_directory_path() /
                    ("sqlstreams-record-" + std::to_string(::getpid()) + ".txt");
  std::filesystem::remove(path);
  {
    auto c = charge(R"({"flaky_attempts": 1, "delay_orders": ["d"], "throw_orders": ["t"],
                        "record_file": ")" +
                    path.string() + R"("})");
    c->handle(Message{.payload = payment("a"), .attempt = 1, .id = 10}.view());
    c->handle(Message{.payload = payment("a"), .attempt = 2, .id = 10}.view());
    c->handle(Message{.payload = payment("d"), .attempt = 2, .id = 11}.view());
    c->handle(Message{.payload = payment("t"), .attempt = 2, .id = 12}.view());
    c->handle(Message{.payload = payment("x", true), .attempt = 2, .id = 13}.view());
    auto audit =
        registry_.create("payments_faults.so", "audit-payments",
                         R"({"record_file": ")" + path.string() + R"("})", "s", "audit-payments");
    audit->handle(Message{.payload = payment("a"), .id = 10, .group = "audit-payments"}.view());
  }
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_EQ(text.str(),
            "charge-cards 10 1 retry\n"
            "charge-cards 10 2 ok\n"
            "charge-cards 11 2 delay\n"
            "charge-cards 12 2 throw\n"
            "charge-cards 13 2 terminal\n"
            "audit-payments 10 1 ok\n");
  std::filesystem::remove(path);
}

TEST_F(PaymentsFaults, ValidateRejectsBadConfigClearly) {
  EXPECT_EQ(validate_error("charge-cards", R"({"provider": "ok", "flaky_attempts": 2})"), "");
  EXPECT_EQ(validate_error("charge-cards", R"({"providr": "ok"})"),
            "unknown config key(s) 'providr' (known: delay_ms, delay_orders, flaky_attempts, "
            "hang_ms, hang_orders, provider, record_file, sleep_ms, throw_orders, "
            "unreachable_orders, wait_for_file)");
  EXPECT_EQ(validate_error("charge-cards", R"({"provider": "down"})"),
            R"(config key 'provider': expected "ok" or "unreachable" (got "down"))");
  EXPECT_EQ(validate_error("charge-cards", R"({"delay_ms": "1s"})"),
            "config key 'delay_ms': expected an integer, got string");
  EXPECT_EQ(validate_error("charge-cards", R"({"flaky_attempts": -1})"),
            "config key 'flaky_attempts': must be >= 0 (got -1)");
  EXPECT_EQ(validate_error("charge-cards", R"({"delay_orders": "o"})"),
            "config key 'delay_orders': expected an array of strings, got string");
  EXPECT_EQ(validate_error("charge-cards", "[]"), "config must be a JSON object, got array");
  EXPECT_EQ(validate_error("audit-payments", R"({"provider": "ok"})"),
            "unknown config key(s) 'provider' (known: record_file, sleep_ms)");
}

TEST_F(PaymentsFaults, UnopenableRecordFileFailsCreate) {
  try {
    charge(R"({"record_file": "/nonexistent-dir/x.txt"})");
    FAIL();
  } catch (const PluginLoadError& e) {
    EXPECT_NE(std::string(e.what()).find("cannot open record_file '/nonexistent-dir/x.txt'"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
