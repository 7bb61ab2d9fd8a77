// payments/charge_cards — the `charge-cards` handler: pretends to charge a card through a
// payment provider whose failures are scripted by the config, for demos and tests.
// Config (JSON object; every key optional, unknown keys and wrong types rejected):
//   provider           "ok" | "unreachable"  ("unreachable": every message RETRYs)
//   unreachable_orders [ids]  RETRY "payment provider unreachable"
//   flaky_attempts     N      RETRY while attempt <= N, then OK
//   delay_orders       [ids]  DELAY(delay_ms);  delay_ms default 1000
//   hang_orders        [ids]  sleep hang_ms (default 1 h) first, for timeout tests
//   sleep_ms           N      per-message simulated work
//   throw_orders       [ids]  throw std::runtime_error (→ RETRY)
//   record_file        path   one line "<group> <id> <attempt> <outcome>" per call
// A cancelled order (payload "cancelled": true) is TERMINAL.
// Threading: concurrent (kConcurrent); the instance is immutable after construction.
#pragma once

#include <set>
#include <string>

#include "payment.hpp"
#include "record_file.hpp"

namespace payments {

struct ChargeCardsConfig {
  bool provider_unreachable = false;
  std::set<std::string> unreachable_orders, delay_orders, hang_orders, throw_orders;
  int64_t flaky_attempts = 0;
  int64_t delay_ms = 1000;
  int64_t hang_ms = 3'600'000;
  int64_t sleep_ms = 0;
  std::string record_file;

  // Throws sqlstreams::ConfigError with a message for the operator.
  static ChargeCardsConfig parse(const nlohmann::json& config);
};

class ChargeCards : public sqlstreams::TypedHandler<Payment> {
 public:
  static constexpr const char* kName = "charge-cards";
  using Payloads = PaymentVersions;  // v1 and v2; handle() gets v2 (Payment)
  static constexpr bool kConcurrent = true;
  static Payment upcast(const PaymentV1& v1) { return payments::upcast(v1); }

  static void validate(const nlohmann::json& config) { ChargeCardsConfig::parse(config); }
  ChargeCards(const nlohmann::json& config, const sqlstreams::Host& host);

  sqlstreams::Result handle(const Payment& payment,
                            const sqlstreams::MessageContext& message) override;

 private:
  sqlstreams::Result decide(const Payment& payment,
                            const sqlstreams::MessageContext& message) const;

  const ChargeCardsConfig config_;
  const RecordFile record_;
};

}  // namespace payments
