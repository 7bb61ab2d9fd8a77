#include "audit_payments.hpp"

namespace payments {

void AuditPayments::validate(const nlohmann::json& config) {
  if (!config.is_object() || config.empty()) return;
  std::string keys;
  for (const auto& item : config.items()) keys += (keys.empty() ? "'" : ", '") + item.key() + "'";
  throw sqlstreams::ConfigError::at(
      config.begin().key(), "unknown config key(s) " + keys + " (audit-payments takes none)");
}

sqlstreams::Result AuditPayments::handle(const Payment& /*payment*/,
                                         const sqlstreams::MessageContext& /*message*/) {
  return sqlstreams::ok();
}

}  // namespace payments
