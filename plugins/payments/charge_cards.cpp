#include "charge_cards.hpp"

#include <stdexcept>
#include <vector>

namespace payments {
namespace {

int64_t non_negative(sqlstreams::ConfigReader& r, const std::string& key, int64_t fallback) {
  const auto v = r.get<int64_t>(key, fallback);
  if (v < 0) {
    throw sqlstreams::ConfigError::at(
        key, "config key '" + key + "': must be >= 0 (got " + std::to_string(v) + ")");
  }
  return v;
}

std::set<std::string> ids(sqlstreams::ConfigReader& r, const std::string& key) {
  const auto list = r.get<std::vector<std::string>>(key, {});
  return {list.begin(), list.end()};
}

const char* word(sqlstreams::Code code) {
  switch (code) {
    case sqlstreams::Code::kOk:
      return "ok";
    case sqlstreams::Code::kRetry:
      return "retry";
    case sqlstreams::Code::kDelay:
      return "delay";
    case sqlstreams::Code::kTerminal:
      return "terminal";
  }
  return "?";
}

}  // namespace

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
  c.unreachable_orders = ids(r, "unreachable_orders");
  c.delay_orders = ids(r, "delay_orders");
  c.hang_orders = ids(r, "hang_orders");
  c.throw_orders = ids(r, "throw_orders");
  c.flaky_attempts = non_negative(r, "flaky_attempts", c.flaky_attempts);
  c.delay_ms = non_negative(r, "delay_ms", c.delay_ms);
  c.hang_ms = non_negative(r, "hang_ms", c.hang_ms);
  c.sleep_ms = non_negative(r, "sleep_ms", c.sleep_ms);
  c.record_file = r.get<std::string>("record_file", "");
  if (r.has("record_file") && c.record_file.empty()) {
    throw sqlstreams::ConfigError::at("record_file", "config key 'record_file': must not be empty");
  }
  r.reject_unknown_keys();
  return c;
}

ChargeCards::ChargeCards(const nlohmann::json& config, const sqlstreams::Host& host)
    : config_(ChargeCardsConfig::parse(config)), record_(config_.record_file) {
  host.info(config_.provider_unreachable ? "charge-cards ready (provider unreachable)"
                                         : "charge-cards ready");
}

sqlstreams::Result ChargeCards::handle(const Payment& payment,
                                       const sqlstreams::MessageContext& message) {
  sleep_ms(config_.sleep_ms);
  if (config_.hang_orders.count(payment.order_id) != 0) sleep_ms(config_.hang_ms);
  if (payment.cancelled) {
    record_.append(message, "terminal");
    sqlstreams::terminal("order " + payment.order_id + " was cancelled");
  }
  if (config_.throw_orders.count(payment.order_id) != 0) {
    record_.append(message, "throw");
    throw std::runtime_error("charge-cards crashed on order " + payment.order_id);
  }
  sqlstreams::Result result = decide(payment, message);
  record_.append(message, word(result.code));
  return result;
}

sqlstreams::Result ChargeCards::decide(const Payment& payment,
                                       const sqlstreams::MessageContext& message) const {
  if (config_.delay_orders.count(payment.order_id) != 0) return sqlstreams::delay(config_.delay_ms);
  if (config_.provider_unreachable || config_.unreachable_orders.count(payment.order_id) != 0) {
    return sqlstreams::retry("payment provider unreachable");
  }
  if (message.attempt <= config_.flaky_attempts) {
    return sqlstreams::retry("payment provider flaky (attempt " + std::to_string(message.attempt) +
                             " of " + std::to_string(config_.flaky_attempts) + " fails)");
  }
  return sqlstreams::ok();
}

}  // namespace payments
