#include "charge_cards.hpp"

#include <vector>

namespace payments {

ChargeCardsConfig ChargeCardsConfig::parse(const nlohmann::json& config) {
  sqlstreams::ConfigReader r(config);
  ChargeCardsConfig c;
  const auto provider = r.get<std::string>("provider", "ok");
  if (provider != "ok" && provider != "unreachable") {
    throw sqlstreams::ConfigError::at(
        "provider",
        "config key 'provider': expected \"ok\" or \"unreachable\" (got \"" + provider + "\")");
  }
  c.provider_unreachable = provider == "unreachable";
  const auto unreachable = r.get<std::vector<std::string>>("unreachable_orders", {});
  c.unreachable_orders = {unreachable.begin(), unreachable.end()};
  r.reject_unknown_keys();
  return c;
}

ChargeCards::ChargeCards(const nlohmann::json& config, const sqlstreams::Host& host)
    : config_(ChargeCardsConfig::parse(config)) {
  host.info(config_.provider_unreachable ? "charge-cards ready (provider unreachable)"
                                         : "charge-cards ready");
}

sqlstreams::Result ChargeCards::handle(const Payment& payment,
                                       const sqlstreams::MessageContext& /*message*/) {
  if (payment.cancelled) sqlstreams::terminal("order " + payment.order_id + " was cancelled");
  if (config_.provider_unreachable || config_.unreachable_orders.count(payment.order_id) != 0) {
    return sqlstreams::retry("payment provider unreachable");
  }
  return sqlstreams::ok();
}

}  // namespace payments
