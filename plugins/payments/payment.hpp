// payments/payment — the payloads both payments handlers decode, in two schema versions:
//   v1: {"order_id": "order-101", "amount_cents": 1250, "currency": "EUR", "cancelled": false}
//   v2: {"order_id": "order-101", "amount": {"cents": 1250, "currency": "EUR"},
//        "cancelled": false}
// `cancelled` is optional (default false) in both. Handlers receive the newest, Payment (v2):
// a v1 payload is decoded as PaymentV1 and upcast (upcast() below).
// Threading: value types.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <sqlstreams/plugin.hpp>
#include <string>

namespace payments {

struct PaymentV1 {
  static constexpr int kSchemaVersion = 1;
  std::string order_id;
  int64_t amount_cents = 0;
  std::string currency;
  bool cancelled = false;
};

struct Payment {  // schema version 2: the amount is an object
  static constexpr int kSchemaVersion = 2;
  std::string order_id;
  int64_t amount_cents = 0;
  std::string currency;
  bool cancelled = false;
};

// What both handlers declare: `using Payloads = PaymentVersions;`.
using PaymentVersions = sqlstreams::Versions<PaymentV1, Payment>;

inline void from_json(const nlohmann::json& j, PaymentV1& p) {
  j.at("order_id").get_to(p.order_id);
  j.at("amount_cents").get_to(p.amount_cents);
  j.at("currency").get_to(p.currency);
  p.cancelled = j.value("cancelled", false);
}

inline void from_json(const nlohmann::json& j, Payment& p) {
  j.at("order_id").get_to(p.order_id);
  const nlohmann::json& amount = j.at("amount");
  amount.at("cents").get_to(p.amount_cents);
  amount.at("currency").get_to(p.currency);
  p.cancelled = j.value("cancelled", false);
}

// v1 → v2: the same facts; nothing to look up.
inline Payment upcast(const PaymentV1& v1) {
  return {v1.order_id, v1.amount_cents, v1.currency, v1.cancelled};
}

}  // namespace payments
