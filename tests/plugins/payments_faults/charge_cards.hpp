// payments_faults/charge_cards — the test plugin's `charge-cards` handler: the payments
// example's handler (payments::ChargeCards: provider, unreachable_orders, cancelled orders)
// wrapped in faults scripted by the config, for tests only (never packaged).
// Config (JSON object; every key optional, unknown keys and wrong types rejected):
//   provider, unreachable_orders  the example's keys, handed to payments::ChargeCards
//   flaky_attempts     N      RETRY while attempt <= N, then OK
//   delay_orders       [ids]  DELAY(delay_ms);  delay_ms default 1000
//   hang_orders        [ids]  sleep hang_ms (default 1 h) first, for timeout tests
//   wait_for_file      path   each call first waits until this path exists (a gate)
//   sleep_ms           N      per-message simulated work
//   throw_orders       [ids]  throw std::runtime_error (→ RETRY)
//   record_file        path   one line "<group> <id> <attempt> <outcome>" per call
// Threading: concurrent (kConcurrent); the instance is immutable after construction.
#pragma once

#include <set>
#include <string>

#include "payments/charge_cards.hpp"  // the example (plugins/payments)
#include "payments/payment.hpp"
#include "record_file.hpp"

namespace payments_faults {

using payments::Payment;
using payments::PaymentV1;
using payments::PaymentVersions;

struct ChargeCardsConfig {
  nlohmann::json example;  // provider, unreachable_orders: payments::ChargeCards' config
  std::set<std::string> delay_orders, hang_orders, throw_orders;
  int64_t flaky_attempts = 0;
  int64_t delay_ms = 1000;
  int64_t hang_ms = 3'600'000;
  int64_t sleep_ms = 0;
  std::string wait_for_file;
  std::string record_file;

  // Throws sqlstreams::ConfigError with a message for the operator.
  static ChargeCardsConfig parse(const nlohmann::json& config);
};

class ChargeCards : public sqlstreams::TypedHandler<Payment> {
 public:
  static constexpr const char* kName = payments::ChargeCards::kName;
  using Payloads = PaymentVersions;  // v1 and v2; handle() gets v2 (Payment)
  static constexpr bool kConcurrent = true;
  static Payment upcast(const PaymentV1& v1) { return payments::upcast(v1); }

  static void validate(const nlohmann::json& config) { ChargeCardsConfig::parse(config); }
  ChargeCards(const nlohmann::json& config, const sqlstreams::Host& host);

  sqlstreams::Result handle(const Payment& payment,
                            const sqlstreams::MessageContext& message) override;

 private:
  const ChargeCardsConfig config_;
  const RecordFile record_;
  payments::ChargeCards example_;
};

}  // namespace payments_faults
