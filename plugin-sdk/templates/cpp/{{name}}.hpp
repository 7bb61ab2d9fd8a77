// {{name}} — handler `{{handler}}`: one message at a time, typed payload, closed-world config.
// Threading: handle() keeps no shared state, so it is declared concurrent.
#pragma once

#include <sqlstreams/plugin.hpp>

#include <cstdint>
#include <string>

namespace {{name}}_plugin {

// The payload, schema version 1: {"id": "a-1", "amount": 5}
struct Payload {
  std::string id;
  int64_t amount = 0;
};
inline void from_json(const nlohmann::json& j, Payload& p) {
  j.at("id").get_to(p.id);
  j.at("amount").get_to(p.amount);
}

class Handler : public sqlstreams::TypedHandler<Payload> {
 public:
  static constexpr const char* kName = "{{handler}}";  // the group's `handler =`
  static constexpr int kSchemaVersion = 1;             // the payload version understood
  // A v2 payload later: `using Payloads = sqlstreams::Versions<PayloadV1, Payload>;` in place
  // of kSchemaVersion, plus `static Payload upcast(const PayloadV1&)` (SDK README).
  static constexpr bool kConcurrent = true;            // handle() is thread-safe

  // The group's [groups.config]; also run by `sqlstreams config check`. Pure.
  static void validate(const nlohmann::json& config) { max_amount(config); }

  Handler(const nlohmann::json& config, const sqlstreams::Host& host)
      : max_amount_(max_amount(config)), host_(host) {}

  // A payload that does not decode into Payload never gets here: it is TERMINAL.
  sqlstreams::Result handle(const Payload& p, const sqlstreams::MessageContext& m) override {
    if (p.amount < 0) sqlstreams::terminal("amount is negative");  // dead-letter now
    if (p.amount > max_amount_) return sqlstreams::retry("amount over max_amount");
    host_.info("handled message " + std::to_string(m.id));  // never log payloads
    return sqlstreams::ok();
  }

 private:
  static int64_t max_amount(const nlohmann::json& config) {
    sqlstreams::ConfigReader r(config);
    const int64_t v = r.get<int64_t>("max_amount", 1000);
    r.reject_unknown_keys();
    if (v < 1) {  // at(): names the key, so `config check` points at its line
      throw sqlstreams::ConfigError::at("max_amount", "config key 'max_amount': must be >= 1");
    }
    return v;
  }

  int64_t max_amount_;
  sqlstreams::Host host_;
};

}  // namespace {{name}}_plugin
