// tests/plugin_host/test_support — paths of the built plugins and fixtures, and a message
// builder that owns the bytes a MessageView borrows. Threading: test-local values.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "plugin_host/plugin_host.hpp"

namespace plugin_host_test {

inline const std::string kPluginDir =
    SQLSTREAMS_TEST_PLUGIN_DIR;  // payments.so, payments_faults.so, noop.so
inline const std::string kFixtureDir = SQLSTREAMS_TEST_FIXTURE_DIR;  // broken plugins

// Owns the strings; view() borrows them (keep the Message alive during handle()).
struct Message {
  std::string payload;
  int32_t attempt = 1;
  int64_t id = 1;
  std::string group = "charge-cards";
  std::string stream = "payments.requested";
  std::optional<std::string> key = std::nullopt;
  int32_t schema_version = 1;
  int64_t created_at_unix_ms = 1700000000000;

  sqlstreams::plugin_host::MessageView view() const {
    sqlstreams::plugin_host::MessageView v;
    v.id = id;
    v.stream = stream;
    v.group = group;
    v.payload = payload;
    v.schema_version = schema_version;
    v.attempt = attempt;
    if (key) v.message_key = *key;
    v.created_at_unix_ms = created_at_unix_ms;
    return v;
  }
};

inline std::string payment(const std::string& order, bool cancelled = false) {
  return R"({"order_id":")" + order + R"(","amount_cents":1250,"currency":"EUR")" +
         (cancelled ? R"(,"cancelled":true})" : "}");
}

// A registry over the built plugins with shortcuts to one payments plugin (payments.so or the
// test plugin payments_faults.so): its charge-cards instance, and what validate() says.
class PaymentsPluginTest : public ::testing::Test {
 protected:
  explicit PaymentsPluginTest(std::string plugin) : plugin_(std::move(plugin)) {}
  std::unique_ptr<sqlstreams::plugin_host::HandlerInstance> charge(const std::string& config) {
    return registry_.create(plugin_, "charge-cards", config, "payments.requested", "charge-cards");
  }
  // The refusal's text, or "" when the config is accepted.
  std::string validate_error(const std::string& handler, const std::string& config) {
    try {
      registry_.validate(plugin_, handler, config);
    } catch (const sqlstreams::plugin_host::PluginLoadError& e) {
      return e.found();
    }
    return "";
  }
  const std::string plugin_;
  sqlstreams::plugin_host::PluginRegistry registry_{kPluginDir};
};

}  // namespace plugin_host_test
