#include "audit_payments.hpp"

namespace payments_faults {

AuditPaymentsConfig AuditPaymentsConfig::parse(const nlohmann::json& config) {
  sqlstreams::ConfigReader r(config);
  AuditPaymentsConfig c;
  c.record_file = r.get<std::string>("record_file", "");
  c.sleep_ms = r.get<int64_t>("sleep_ms", 0);
  if (c.sleep_ms < 0) {
    throw sqlstreams::ConfigError::at(
        "sleep_ms", "config key 'sleep_ms': must be >= 0 (got " + std::to_string(c.sleep_ms) + ")");
  }
  r.reject_unknown_keys();
  return c;
}

AuditPayments::AuditPayments(const nlohmann::json& config)
    : config_(AuditPaymentsConfig::parse(config)), record_(config_.record_file) {}

sqlstreams::Result AuditPayments::handle(const Payment& /*payment*/,
                                         const sqlstreams::MessageContext& message) {
  sleep_ms(config_.sleep_ms);
  record_.append(message, "ok");
  return sqlstreams::ok();
}

}  // namespace payments_faults
