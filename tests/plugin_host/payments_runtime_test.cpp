// Runtime test of plugins/payments: the real payments.so loaded through PluginRegistry, with
// messages pushed through charge-cards and audit-payments.
#include <gtest/gtest.h>

#include "test_support.hpp"

namespace {

using plugin_host_test::Message;
using plugin_host_test::payment;
using sqlstreams::plugin_host::OutcomeKind;

class Payments : public plugin_host_test::PaymentsPluginTest {
 protected:
  Payments() : PaymentsPluginTest("payments.so") {}
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

TEST_F(Payments, AuditAcceptsEveryDecodablePayment) {
  auto a = registry_.create("payments.so", "audit-payments", "{}", "s", "audit-payments");
  EXPECT_EQ(a->handle(Message{.payload = payment("o", true)}.view()).kind, OutcomeKind::kOk);
  EXPECT_EQ(a->handle(Message{.payload = "[]"}.view()).kind, OutcomeKind::kTerminal);
}

TEST_F(Payments, ValidateRejectsBadConfigClearly) {
  EXPECT_EQ(validate_error("charge-cards", R"({"provider": "ok", "unreachable_orders": ["o"]})"),
            "");
  EXPECT_EQ(validate_error("charge-cards", R"({"providr": "ok"})"),
            "unknown config key(s) 'providr' (known: provider, unreachable_orders)");
  EXPECT_EQ(validate_error("charge-cards", R"({"provider": "down"})"),
            R"(config key 'provider': expected "ok" or "unreachable" (got "down"))");
  EXPECT_EQ(validate_error("charge-cards", R"({"unreachable_orders": "o"})"),
            "config key 'unreachable_orders': expected an array of strings, got string");
  EXPECT_EQ(validate_error("charge-cards", "[]"), "config must be a JSON object, got array");
  EXPECT_EQ(validate_error("audit-payments", "{}"), "");
  EXPECT_EQ(validate_error("audit-payments", R"({"provider": "ok"})"),
            "unknown config key(s) 'provider' (audit-payments takes none)");
}

// The example carries no test knobs: they live in tests/plugins/payments_faults.
TEST_F(Payments, RefusesTheTestPluginsFaultKeys) {
  for (const char* key : {"flaky_attempts", "delay_orders", "delay_ms", "hang_orders", "hang_ms",
                          "sleep_ms", "throw_orders", "record_file"}) {
    EXPECT_EQ(validate_error("charge-cards", std::string(R"({")") + key + R"(": 1})")
                  .rfind(std::string("unknown config key(s) '") + key + "'", 0),
              0u)
        << key;
  }
  EXPECT_NE(validate_error("audit-payments", R"({"sleep_ms": 1})"), "");
}

}  // namespace
