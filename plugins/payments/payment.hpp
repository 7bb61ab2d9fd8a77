// payments/payment — the payload both payments handlers decode (schema version 1):
//   {"order_id": "order-101", "amount_cents": 1250, "currency": "EUR", "cancelled": false}
// `cancelled` is optional (default false). Threading: a value type.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

namespace payments {

struct Payment {
  std::string order_id;
  int64_t amount_cents = 0;
  std::string currency;
  bool cancelled = false;
};

inline void from_json(const nlohmann::json& j, Payment& p) {
  j.at("order_id").get_to(p.order_id);
  j.at("amount_cents").get_to(p.amount_cents);
  j.at("currency").get_to(p.currency);
  p.cancelled = j.value("cancelled", false);
}

}  // namespace payments
