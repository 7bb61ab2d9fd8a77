// payments/charge_cards — the `charge-cards` handler: charges a card through a payment provider.
// The example has no real provider: `provider` stands in for its endpoint, and the demo makes
// it unreachable for some orders to show retries and dead letters.
// Config (JSON object; every key optional, unknown keys and wrong types rejected):
//   provider           "ok" | "unreachable"  ("unreachable": every message RETRYs)
//   unreachable_orders [ids]  RETRY "payment provider unreachable"
// A cancelled order (payload "cancelled": true) is TERMINAL.
// Threading: concurrent (kConcurrent); the instance is immutable after construction.
#pragma once

#include <set>
#include <string>

#include "payment.hpp"

namespace payments {

struct ChargeCardsConfig {
  bool provider_unreachable = false;
  std::set<std::string> unreachable_orders;

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
  const ChargeCardsConfig config_;
};

}  // namespace payments
