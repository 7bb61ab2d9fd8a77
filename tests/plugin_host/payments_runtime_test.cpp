// Runtime test of plugins/payments: the real payments.so loaded through PluginRegistry, with
// messages pushed through charge-cards and audit-payments.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "test_support.hpp"

namespace {

using plugin_host_test::kPluginDir;
using plugin_host_test::Message;
using plugin_host_test::payment;
using sqlstreams::plugin_host::HandlerInstance;
using sqlstreams::plugin_host::OutcomeKind;
using sqlstreams::plugin_host::PluginLoadError;
using sqlstreams::plugin_host::PluginRegistry;

class Payments : public ::testing::Test {
 protected:
  std::unique_ptr<HandlerInstance> charge(const std::string& config) {
    return registry_.create("payments.so", "charge-cards", config, "payments.requested",
                            "charge-cards");
  }
  std::string validate_error(const std::string& handler, const std::string& config) {
    try {
      registry_.validate("payments.so", handler, config);
    } catch (const PluginLoadError& e) {
      return e.found();
    }
    return "";
  }
  PluginRegistry registry_{kPluginDir};
};

TEST_F(Payments, ManifestListsBothHandlers) {
  const auto& info = registry_.load("payments.so");
  EXPECT_EQ(info.name, "payments");
  EXPECT_EQ(info.version, "1.0.0");
  EXPECT_EQ(info.handlers, (std::vector<std::string>{"charge-cards", "audit-payments"}));
  for (const auto& h : info.handler_infos) {
    EXPECT_EQ(h.schema_version, 2);  // the newest
    EXPECT_EQ(h.schema_versions, (std::vector<int32_t>{1, 2}));
    EXPECT_TRUE(h.concurrent);
  }
}

// Schema version 2 moved the amount into an object; v1 payloads are upcast to it.
TEST_F(Payments, HandlesBothPayloadVersionsAndRefusesAnUndeclaredOne) {
  auto h = charge(R"({"unreachable_orders": ["order-7"]})");
  const std::string v2 = R"({"order_id":"order-7","amount":{"cents":5,"currency":"EUR"}})";
  auto out = h->handle(Message{.payload = v2, .schema_version = 2}.view());
  EXPECT_EQ(out.kind, OutcomeKind::kRetry) << "the v2 payload reached handle(): " << out.error;
  out = h->handle(Message{.payload = payment("order-7"), .schema_version = 1}.view());
  EXPECT_EQ(out.kind, OutcomeKind::kRetry) << "the upcast v1 payload reached handle()";
  EXPECT_EQ(h->handle(Message{.payload = payment("order-8"), .schema_version = 1}.view()).kind,
            OutcomeKind::kOk);
  out = h->handle(Message{.payload = payment("order-7"), .schema_version = 2}.view());
  EXPECT_EQ(out.kind, OutcomeKind::kTerminal) << "a v1 shape at version 2 does not decode";
  EXPECT_EQ(
      out.error.rfind("payload does not decode into payments::Payment (schema version 2): ", 0), 0u)
      << out.error;
  out = h->handle(Message{.payload = v2, .schema_version = 3}.view());
  EXPECT_EQ(out.kind, OutcomeKind::kTerminal);
  EXPECT_EQ(out.error,
            "payload schema version 3 is not one handler 'charge-cards' declares (1, 2)");
}

TEST_F(Payments, ChargesAnOrder) {
  auto h = charge("{}");
  EXPECT_TRUE(h->concurrent());
  EXPECT_EQ(h->handle(Message{.payload = payment("order-101")}.view()).kind, OutcomeKind::kOk);
}

TEST_F(Payments, UnreachableProviderRetries) {
  auto h = charge(R"({"provider": "unreachable"})");
  const auto out = h->handle(Message{.payload = payment("order-101")}.view());
  EXPECT_EQ(out.kind, OutcomeKind::kRetry);
  EXPECT_EQ(out.error, "payment provider unreachable");
  auto some = charge(R"({"unreachable_orders": ["order-7"]})");
  EXPECT_EQ(some->handle(Message{.payload = payment("order-7")}.view()).kind, OutcomeKind::kRetry);
  EXPECT_EQ(some->handle(Message{.payload = payment("order-8")}.view()).kind, OutcomeKind::kOk);
}

TEST_F(Payments, CancelledOrderIsTerminal) {
  const auto out = charge("{}")->handle(Message{.payload = payment("order-5", true)}.view());
  EXPECT_EQ(out.kind, OutcomeKind::kTerminal);
  EXPECT_EQ(out.error, "order order-5 was cancelled");
}

TEST_F(Payments, UndecodablePayloadIsTerminal) {
  auto h = charge("{}");
  for (const std::string p : {"not json", R"({"order_id": "o"})", R"({"order_id": 5})"}) {
    const auto out = h->handle(Message{.payload = p}.view());
    EXPECT_EQ(out.kind, OutcomeKind::kTerminal) << p;
    EXPECT_EQ(
        out.error.rfind("payload does not decode into payments::PaymentV1 (schema version 1): ", 0),
        0u)
        << out.error;
  }
}

TEST_F(Payments, FlakyProviderSucceedsAfterNAttempts) {
  auto h = charge(R"({"flaky_attempts": 2})");
  for (int attempt = 1; attempt <= 3; ++attempt) {
    const auto out = h->handle(Message{.payload = payment("o"), .attempt = attempt}.view());
    EXPECT_EQ(out.kind, attempt <= 2 ? OutcomeKind::kRetry : OutcomeKind::kOk) << attempt;
  }
}

TEST_F(Payments, DelayOrders) {
  const auto dflt =
      charge(R"({"delay_orders": ["o"]})")->handle(Message{.payload = payment("o")}.view());
  EXPECT_EQ(dflt.kind, OutcomeKind::kDelay);
  EXPECT_EQ(dflt.delay, std::chrono::milliseconds(1000));
  const auto custom = charge(R"({"delay_orders": ["o"], "delay_ms": 40})")
                          ->handle(Message{.payload = payment("o")}.view());
  EXPECT_EQ(custom.delay, std::chrono::milliseconds(40));
}

TEST_F(Payments, ThrowingHandlerRetries) {
  const auto out =
      charge(R"({"throw_orders": ["o"]})")->handle(Message{.payload = payment("o")}.view());
  EXPECT_EQ(out.kind, OutcomeKind::kRetry);
  EXPECT_EQ(out.error, "charge-cards crashed on order o");
}

TEST_F(Payments, HangAndSleepTakeTime) {
  auto h = charge(R"({"hang_orders": ["slow"], "hang_ms": 60, "sleep_ms": 5})");
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(h->handle(Message{.payload = payment("slow")}.view()).kind, OutcomeKind::kOk);
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(65));
}

TEST_F(Payments, RecordFileGetsOneLinePerCall) {
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
        registry_.create("payments.so", "audit-payments",
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

TEST_F(Payments, AuditAcceptsEveryDecodablePayment) {
  auto a = registry_.create("payments.so", "audit-payments", "{}", "s", "audit-payments");
  EXPECT_EQ(a->handle(Message{.payload = payment("o", true)}.view()).kind, OutcomeKind::kOk);
  EXPECT_EQ(a->handle(Message{.payload = "[]"}.view()).kind, OutcomeKind::kTerminal);
}

TEST_F(Payments, ValidateRejectsBadConfigClearly) {
  EXPECT_EQ(validate_error("charge-cards", R"({"provider": "ok", "flaky_attempts": 2})"), "");
  EXPECT_EQ(validate_error("charge-cards", R"({"providr": "ok"})"),
            "unknown config key(s) 'providr' (known: delay_ms, delay_orders, flaky_attempts, "
            "hang_ms, hang_orders, provider, record_file, sleep_ms, throw_orders, "
            "unreachable_orders)");
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

TEST_F(Payments, UnopenableRecordFileFailsCreate) {
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
