// payments/audit_payments — the `audit-payments` handler: accepts every decodable payment (OK).
// Config: none (an empty table; any key is rejected).
// Threading: concurrent (kConcurrent); stateless.
#pragma once

#include "payment.hpp"

namespace payments {

class AuditPayments : public sqlstreams::TypedHandler<Payment> {
 public:
  static constexpr const char* kName = "audit-payments";
  using Payloads = PaymentVersions;  // v1 and v2; handle() gets v2 (Payment)
  static constexpr bool kConcurrent = true;
  static Payment upcast(const PaymentV1& v1) { return payments::upcast(v1); }

  static void validate(const nlohmann::json& config);
  explicit AuditPayments(const nlohmann::json& config) { validate(config); }

  sqlstreams::Result handle(const Payment& payment,
                            const sqlstreams::MessageContext& message) override;
};

}  // namespace payments
