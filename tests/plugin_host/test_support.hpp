// tests/plugin_host/test_support — paths of the built plugins and fixtures, and a message
// builder that owns the bytes a MessageView borrows. Threading: test-local values.
#pragma once

#include <optional>
#include <string>

#include "plugin_host/plugin_host.hpp"

namespace plugin_host_test {

inline const std::string kPluginDir = SQLSTREAMS_TEST_PLUGIN_DIR;    // payments.so, noop.so
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

}  // namespace plugin_host_test
