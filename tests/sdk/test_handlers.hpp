// tests/sdk/test_handlers — handlers written against sqlstreams/plugin.hpp, driven through the
// C ABI by FakeHost in the SDK tests (no .so, no daemon). Threading: Scripted is concurrent.
#pragma once

#include <sqlstreams/plugin.hpp>
#include <string>

namespace sdk_test {

struct Order {
  std::string id;
  int qty = 0;
};

inline void from_json(const nlohmann::json& j, Order& o) {
  j.at("id").get_to(o.id);
  j.at("qty").get_to(o.qty);
}

struct SilentError : std::exception {
  const char* what() const noexcept override { return ""; }
};
struct Declined : std::runtime_error {
  using std::runtime_error::runtime_error;
};
struct NotAnException {};

// Does what the order id says.
class Scripted : public sqlstreams::TypedHandler<Order> {
 public:
  static constexpr const char* kName = "scripted";
  static constexpr int kSchemaVersion = 3;
  static constexpr bool kConcurrent = true;

  static void validate(const nlohmann::json& config) {
    sqlstreams::ConfigReader r(config);
    if (r.get<int64_t>("limit", 1) <= 0) throw sqlstreams::ConfigError("limit must be positive");
    r.reject_unknown_keys();
  }
  Scripted(const nlohmann::json& config, const sqlstreams::Host& host) : host_(host) {
    host_.info("scripted created with limit " + std::to_string(config.value("limit", 1)));
  }

  sqlstreams::Result handle(const Order& o, const sqlstreams::MessageContext& m) override {
    if (o.id == "retry") return sqlstreams::retry("try later");
    if (o.id == "delay") return sqlstreams::delay(250);
    if (o.id == "terminal") sqlstreams::terminal("order " + o.id + " is bad");
    if (o.id == "throw") throw std::runtime_error("boom");
    if (o.id == "throw-int") throw 42;
    if (o.id == "throw-silent") throw SilentError();
    if (o.id == "throw-subclass") throw Declined("card declined");
    if (o.id == "throw-struct") throw NotAnException{};
    if (o.id == "log") host_.warn("careful with " + o.id);
    if (o.id == "context") {
      return sqlstreams::retry(std::string(m.stream) + "|" + std::string(m.group) + "|" +
                               std::to_string(m.id) + "|" + std::to_string(m.attempt) + "|" +
                               std::to_string(m.schema_version) + "|" +
                               std::string(m.message_key.value_or("(none)")) + "|" +
                               std::to_string(m.created_at_unix_ms) + "|" + std::string(m.payload));
    }
    return sqlstreams::ok();
  }

 private:
  sqlstreams::Host host_;
};

// The least a handler can be: default constructor, default validate, not concurrent.
class Minimal : public sqlstreams::TypedHandler<nlohmann::json> {
 public:
  static constexpr const char* kName = "minimal";
  static constexpr int kSchemaVersion = 1;
  sqlstreams::Result handle(const nlohmann::json& p, const sqlstreams::MessageContext&) override {
    return p.is_object() ? sqlstreams::ok() : sqlstreams::retry("not an object");
  }
};

class CreateThrows : public sqlstreams::TypedHandler<std::string_view> {
 public:
  static constexpr const char* kName = "create-throws";
  static constexpr int kSchemaVersion = 1;
  explicit CreateThrows(const nlohmann::json&) { throw std::runtime_error("cannot open ledger"); }
  sqlstreams::Result handle(const std::string_view&, const sqlstreams::MessageContext&) override {
    return sqlstreams::ok();
  }
};

}  // namespace sdk_test
