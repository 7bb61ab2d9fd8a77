// payments_faults/audit_payments — the test plugin's `audit-payments`: accepts every decodable
// payment (OK), recording the call and simulating work.
// Config (JSON object, optional keys): record_file (path), sleep_ms (simulated work).
// Threading: concurrent (kConcurrent); immutable after construction.
#pragma once

#include <string>

#include "payments/payment.hpp"
#include "record_file.hpp"

namespace payments_faults {

using payments::Payment;
using payments::PaymentV1;
using payments::PaymentVersions;

struct AuditPaymentsConfig {
  std::string record_file;
  int64_t sleep_ms = 0;
  static AuditPaymentsConfig parse(const nlohmann::json& config);  // throws ConfigError
};

class AuditPayments : public sqlstreams::TypedHandler<Payment> {
 public:
  static constexpr const char* kName = "audit-payments";
  using Payloads = PaymentVersions;  // v1 and v2; handle() gets v2 (Payment)
  static constexpr bool kConcurrent = true;
  static Payment upcast(const PaymentV1& v1) { return payments::upcast(v1); }

  static void validate(const nlohmann::json& config) { AuditPaymentsConfig::parse(config); }
  explicit AuditPayments(const nlohmann::json& config);

  sqlstreams::Result handle(const Payment& payment,
                            const sqlstreams::MessageContext& message) override;

 private:
  const AuditPaymentsConfig config_;
  const RecordFile record_;
};

}  // namespace payments_faults
