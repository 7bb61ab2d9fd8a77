// ConfigReader: typed optional keys with defaults, precise type errors, closed-world keys.
#include <gtest/gtest.h>

#include <sqlstreams/config_reader.hpp>

namespace {

using nlohmann::json;
using sqlstreams::ConfigError;
using sqlstreams::ConfigReader;

std::string error_of(const json& config, void (*read)(ConfigReader&)) {
  try {
    ConfigReader r(config);
    read(r);
    r.reject_unknown_keys();
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(ConfigReader, ReadsTypedValuesAndDefaults) {
  ConfigReader r(json::parse(R"({"n": 5, "s": "x", "b": true, "l": ["a", "b"], "f": 1.5})"));
  EXPECT_EQ(r.get<int64_t>("n", 0), 5);
  EXPECT_EQ(r.get<int64_t>("absent", 9), 9);
  EXPECT_EQ(r.get<std::string>("s", ""), "x");
  EXPECT_TRUE(r.get<bool>("b", false));
  EXPECT_EQ(r.get<std::vector<std::string>>("l", {}), (std::vector<std::string>{"a", "b"}));
  EXPECT_DOUBLE_EQ(r.get<double>("f", 0), 1.5);
  EXPECT_NO_THROW(r.reject_unknown_keys());
}

TEST(ConfigReader, NullIsAnEmptyObject) {
  ConfigReader r(json(nullptr));
  EXPECT_EQ(r.get<int64_t>("n", 3), 3);
  EXPECT_NO_THROW(r.reject_unknown_keys());
}

TEST(ConfigReader, WrongTypesAreNamed) {
  EXPECT_EQ(error_of(json::parse(R"({"n": "5"})"), [](ConfigReader& r) { r.get<int64_t>("n", 0); }),
            "config key 'n': expected an integer, got string");
  EXPECT_EQ(error_of(json::parse(R"({"n": 1.5})"), [](ConfigReader& r) { r.get<int64_t>("n", 0); }),
            "config key 'n': expected an integer, got a number with a fraction");
  EXPECT_EQ(error_of(json::parse(R"({"n": -1})"), [](ConfigReader& r) { r.get<uint32_t>("n", 0); }),
            "config key 'n': expected a non-negative integer, got number");
  EXPECT_EQ(error_of(json::parse(R"({"l": ["a", 1]})"),
                     [](ConfigReader& r) { r.get<std::vector<std::string>>("l", {}); }),
            "config key 'l': expected an array of strings, got array");
  EXPECT_EQ(error_of(json::parse(R"({"b": 1})"), [](ConfigReader& r) { r.get<bool>("b", false); }),
            "config key 'b': expected a boolean, got number");
}

TEST(ConfigReader, UnknownKeysAreListedWithTheKnownOnes) {
  EXPECT_EQ(error_of(json::parse(R"({"a": 1, "zz": 2, "yy": 3})"),
                     [](ConfigReader& r) {
                       r.get<int64_t>("a", 0);
                       r.get<int64_t>("b", 0);
                     }),
            "unknown config key(s) 'yy', 'zz' (known: a, b)");
}

TEST(ConfigReader, ErrorsNameTheirKey) {
  try {
    ConfigReader r(json::parse(R"({"n": "5", "zz": 1})"));
    r.get<int64_t>("n", 0);
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key(), "n");
  }
  try {
    ConfigReader r(json::parse(R"({"zz": 1, "yy": 2})"));
    r.reject_unknown_keys();
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key(), "yy");  // the first unknown key (in key order)
  }
  EXPECT_EQ(ConfigError("plain").key(), "");
  EXPECT_EQ(ConfigError::at("a.b[2]", "bad").key(), "a.b[2]");
}

TEST(ConfigReader, NonObjectsAreRejected) {
  EXPECT_THROW(ConfigReader(json::parse("[1, 2]")), ConfigError);
  EXPECT_THROW(ConfigReader(json("text")), ConfigError);
}

}  // namespace
