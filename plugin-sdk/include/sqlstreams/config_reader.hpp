// sqlstreams/config_reader.hpp — closed-world reading of a handler's JSON config (part of the
// header-only C++ layer). Owns: ConfigError (what validate() throws to reject a config) and
// ConfigReader (typed optional keys with defaults; unknown keys are an error, never ignored).
// Threading: a ConfigReader is a local helper; use it from one thread.
//
//   sqlstreams::ConfigReader r(config);                  // throws unless a JSON object
//   auto delay_ms = r.get<int64_t>("delay_ms", 1000);    // throws on a wrong type
//   auto orders = r.get<std::vector<std::string>>("delay_orders", {});
//   r.reject_unknown_keys();                             // throws naming the unknown keys
//   throw sqlstreams::ConfigError::at("delay_ms", "delay_ms: must be >= 0");  // names the key
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

namespace sqlstreams {

// A config the handler cannot accept; the message reaches the operator verbatim. Built with
// at(key, message) it also names the config key (ABI 1.1 set_error_key): the host then points
// at that key's file:line:col. Key paths: keys joined by '.', array elements as [N].
class ConfigError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
  static ConfigError at(std::string key, const std::string& message) {
    ConfigError e(message);
    e.key_ = std::move(key);
    return e;
  }
  const std::string& key() const { return key_; }  // "" when none was named

 private:
  std::string key_;
};

class ConfigReader {
 public:
  // `null` reads as an empty object.
  explicit ConfigReader(const nlohmann::json& config) : config_(config) {
    if (!config_.is_null() && !config_.is_object()) {
      throw ConfigError(std::string("config must be a JSON object, got ") + config_.type_name());
    }
  }

  bool has(const std::string& key) const { return config_.is_object() && config_.contains(key); }

  // The value at `key`, or `fallback` when absent. Throws ConfigError on a wrong type.
  template <class T>
  T get(const std::string& key, T fallback) {
    known_.insert(key);
    if (!has(key)) return fallback;
    const nlohmann::json& v = config_.at(key);
    if (!matches<T>(v)) {
      throw ConfigError::at(key,
                            "config key '" + key + "': expected " + describe<T>() + ", got " +
                                (v.is_number_float() ? "a number with a fraction" : v.type_name()));
    }
    return v.get<T>();
  }

  // Throws ConfigError naming every key never asked for with get() (its key(): the first).
  void reject_unknown_keys() const {
    if (!config_.is_object()) return;
    std::string unknown, known, first;
    for (const auto& item : config_.items()) {
      if (known_.count(item.key()) == 0) {
        if (first.empty()) first = item.key();
        unknown += (unknown.empty() ? "'" : ", '") + item.key() + "'";
      }
    }
    if (unknown.empty()) return;
    for (const auto& k : known_) known += (known.empty() ? "" : ", ") + k;
    throw ConfigError::at(first, "unknown config key(s) " + unknown + " (known: " + known + ")");
  }

 private:
  template <class T>
  static bool matches(const nlohmann::json& v) {
    if constexpr (std::is_same_v<T, bool>) {
      return v.is_boolean();
    } else if constexpr (std::is_integral_v<T> && std::is_unsigned_v<T>) {
      return v.is_number_unsigned();
    } else if constexpr (std::is_integral_v<T>) {
      return v.is_number_integer();
    } else if constexpr (std::is_floating_point_v<T>) {
      return v.is_number();
    } else if constexpr (std::is_same_v<T, std::string>) {
      return v.is_string();
    } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
      if (!v.is_array()) return false;
      for (const auto& e : v) {
        if (!e.is_string()) return false;
      }
      return true;
    } else {
      return true;  // other types: nlohmann's own conversion decides
    }
  }

  template <class T>
  static std::string describe() {
    if constexpr (std::is_same_v<T, bool>) {
      return "a boolean";
    } else if constexpr (std::is_integral_v<T> && std::is_unsigned_v<T>) {
      return "a non-negative integer";
    } else if constexpr (std::is_integral_v<T>) {
      return "an integer";
    } else if constexpr (std::is_floating_point_v<T>) {
      return "a number";
    } else if constexpr (std::is_same_v<T, std::string>) {
      return "a string";
    } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
      return "an array of strings";
    } else {
      return "a value of the right type";
    }
  }

  nlohmann::json config_;
  std::set<std::string> known_;
};

}  // namespace sqlstreams
