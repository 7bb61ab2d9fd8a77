#include "charge_cards.hpp"

#include <stdexcept>
#include <vector>

namespace payments_faults {
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
  c.example = {{"provider", r.get<std::string>("provider", "ok")},
               {"unreachable_orders", r.get<std::vector<std::string>>("unreachable_orders", {})}};
  c.delay_orders = ids(r, "delay_orders");
  c.hang_orders = ids(r, "hang_orders");
  c.throw_orders = ids(r, "throw_orders");
  c.flaky_attempts = non_negative(r, "flaky_attempts", c.flaky_attempts);
  c.delay_ms = non_negative(r, "delay_ms", c.delay_ms);
  c.hang_ms = non_negative(r, "hang_ms", c.hang_ms);
  c.sleep_ms = non_negative(r, "sleep_ms", c.sleep_ms);
  c.wait_for_file = r.get<std::string>("wait_for_file", "");
  if (r.has("wait_for_file") && c.wait_for_file.empty()) {
    throw sqlstreams::ConfigError::at("wait_for_file",
                                      "config key 'wait_for_file': must not be empty");
  }
  c.record_file = r.get<std::string>("record_file", "");
  if (r.has("record_file") && c.record_file.empty()) {
    throw sqlstreams::ConfigError::at("record_file", "config key 'record_file': must not be empty");
  }
  r.reject_unknown_keys();
  payments::ChargeCardsConfig::parse(c.example);  // the example's own checks (provider's value)
  return c;
}

ChargeCards::ChargeCards(const nlohmann::json& config, const sqlstreams::Host& host)
    : config_(ChargeCardsConfig::parse(config)),
      record_(config_.record_file),
      example_(config_.example, host) {}

sqlstreams::Result ChargeCards::handle(const Payment& payment,
                                       const sqlstreams::MessageContext& message) {
  if (!config_.wait_for_file.empty()) wait_for_file(config_.wait_for_file);
  sleep_ms(config_.sleep_ms);
  if (config_.hang_orders.count(payment.order_id) != 0) sleep_ms(config_.hang_ms);
  if (payment.cancelled) {
    record_.append(message, "terminal");
    return example_.handle(payment, message);  // throws sqlstreams::terminal
  }
  if (config_.throw_orders.count(payment.order_id) != 0) {
    record_.append(message, "throw");
    throw std::runtime_error("charge-cards crashed on order " + payment.order_id);
  }
  sqlstreams::Result result = config_.delay_orders.count(payment.order_id) != 0
                                  ? sqlstreams::delay(config_.delay_ms)
                                  : example_.handle(payment, message);
  if (result.code == sqlstreams::Code::kOk && message.attempt <= config_.flaky_attempts) {
    result =
        sqlstreams::retry("payment provider flaky (attempt " + std::to_string(message.attempt) +
                          " of " + std::to_string(config_.flaky_attempts) + " fails)");
  }
  record_.append(message, word(result.code));
  return result;
}

}  // namespace payments_faults
