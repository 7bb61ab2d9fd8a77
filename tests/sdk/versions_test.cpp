// Several payload versions per handler (ABI 1.1, sqlstreams::Versions): the descriptor lists
// them, each version decodes into its own type and is upcast to the newest before handle();
// an undeclared version, an undecodable payload and a failing upcast are TERMINAL. Also the
// config key a ConfigError names reaches the host through set_error_key (or falls back to
// set_error on a 1.0 host). Driven through the C ABI by the SDK's FakeHost.
#include <gtest/gtest.h>

#include <sqlstreams/testing/fake_host.hpp>
#include <string>

namespace {

using sqlstreams::testing::descriptor_of;
using sqlstreams::testing::FakeHost;
using sqlstreams::testing::validate_config;

struct ItemV1 {  // {"name": "x"}
  static constexpr int kSchemaVersion = 1;
  std::string name;
};
struct ItemV2 {  // {"title": "x", "qty": 2}
  static constexpr int kSchemaVersion = 2;
  std::string title;
  int qty = 1;
};
struct ItemV5 {  // {"title": "x", "qty": 2, "unit": "kg"}
  static constexpr int kSchemaVersion = 5;
  std::string title;
  int qty = 1;
  std::string unit;
};
void from_json(const nlohmann::json& j, ItemV1& v) { j.at("name").get_to(v.name); }
void from_json(const nlohmann::json& j, ItemV2& v) {
  j.at("title").get_to(v.title);
  j.at("qty").get_to(v.qty);
}
void from_json(const nlohmann::json& j, ItemV5& v) {
  j.at("title").get_to(v.title);
  j.at("qty").get_to(v.qty);
  j.at("unit").get_to(v.unit);
}

// Echoes what handle() received as a RETRY text, so a test sees the upcast result.
class Items : public sqlstreams::TypedHandler<ItemV5> {
 public:
  static constexpr const char* kName = "items";
  using Payloads = sqlstreams::Versions<ItemV1, ItemV2, ItemV5>;

  static ItemV2 upcast(const ItemV1& v1) {
    if (v1.name == "cannot") throw std::runtime_error("no title for 'cannot'");
    return {"v1:" + v1.name, 1};
  }
  ItemV5 upcast(const ItemV2& v2) const { return {v2.title, v2.qty, unit_}; }  // a member

  explicit Items(const nlohmann::json& config) : unit_(config.value("unit", "piece")) {}
  static void validate(const nlohmann::json& config) {
    sqlstreams::ConfigReader r(config);
    const auto unit = r.get<std::string>("unit", "piece");
    if (unit.empty()) throw sqlstreams::ConfigError::at("unit", "unit: must not be empty");
    r.reject_unknown_keys();
  }
  sqlstreams::Result handle(const ItemV5& item, const sqlstreams::MessageContext& m) override {
    return sqlstreams::retry(item.title + "|" + std::to_string(item.qty) + "|" + item.unit + "|v" +
                             std::to_string(m.schema_version));
  }

 private:
  std::string unit_;
};

TEST(Versions, TheDescriptorListsEveryVersionAndTheNewest) {
  const sqlstreams_type_handler& d = descriptor_of<Items>();
  EXPECT_EQ(d.struct_size, sizeof(sqlstreams_type_handler));
  ASSERT_EQ(d.schema_version_count, 3u);
  ASSERT_NE(d.schema_versions, nullptr);
  EXPECT_EQ(d.schema_versions[0], 1);
  EXPECT_EQ(d.schema_versions[1], 2);
  EXPECT_EQ(d.schema_versions[2], 5);
  EXPECT_EQ(d.schema_version, 5);
}

struct One : sqlstreams::TypedHandler<std::string_view> {
  static constexpr const char* kName = "one";
  static constexpr int kSchemaVersion = 4;
  sqlstreams::Result handle(const std::string_view&, const sqlstreams::MessageContext&) override {
    return sqlstreams::ok();
  }
};

TEST(Versions, ASingleVersionHandlerHasNoList) {
  const sqlstreams_type_handler& d = descriptor_of<One>();
  EXPECT_EQ(d.schema_version, 4);
  EXPECT_EQ(d.schema_version_count, 0u);
  EXPECT_EQ(d.schema_versions, nullptr);
}

TEST(Versions, EachVersionDecodesIntoItsTypeAndIsUpcastToTheNewest) {
  FakeHost host(descriptor_of<Items>(), R"({"unit": "kg"})");
  auto out = host.handle({.payload = R"({"name": "apple"})", .schema_version = 1});
  EXPECT_EQ(out.code, SQLSTREAMS_OUTCOME_RETRY);
  EXPECT_EQ(out.error, "v1:apple|1|kg|v1");  // v1 → v2 (static) → v5 (member, uses config)
  out = host.handle({.payload = R"({"title": "pear", "qty": 3})", .schema_version = 2});
  EXPECT_EQ(out.error, "pear|3|kg|v2");
  out = host.handle({.payload = R"({"title": "fig", "qty": 4, "unit": "g"})", .schema_version = 5});
  EXPECT_EQ(out.error, "fig|4|g|v5");
}

TEST(Versions, AnUndeclaredVersionIsTerminalNamingTheDeclaredOnes) {
  FakeHost host(descriptor_of<Items>());
  for (int32_t version : {0, 3, 6}) {
    auto out = host.handle(
        {.payload = R"({"title": "fig", "qty": 4, "unit": "g"})", .schema_version = version});
    EXPECT_EQ(out.code, SQLSTREAMS_OUTCOME_TERMINAL) << version;
    EXPECT_EQ(out.error, "payload schema version " + std::to_string(version) +
                             " is not one handler 'items' declares (1, 2, 5)");
  }
}

TEST(Versions, APayloadThatDoesNotDecodeIntoItsVersionIsTerminal) {
  FakeHost host(descriptor_of<Items>());
  auto out = host.handle({.payload = R"({"title": "pear", "qty": 3})", .schema_version = 1});
  EXPECT_EQ(out.code, SQLSTREAMS_OUTCOME_TERMINAL);
  EXPECT_EQ(out.error.rfind("payload does not decode into (anonymous namespace)::ItemV1 (schema "
                            "version 1): ",
                            0),
            0u)
      << out.error;
}

TEST(Versions, AnUpcastThatThrowsIsTerminal) {
  FakeHost host(descriptor_of<Items>());
  auto out = host.handle({.payload = R"({"name": "cannot"})", .schema_version = 1});
  EXPECT_EQ(out.code, SQLSTREAMS_OUTCOME_TERMINAL);
  EXPECT_EQ(out.error,
            "payload of schema version 1 does not upcast to (anonymous namespace)::ItemV5: no "
            "title for 'cannot'");
}

TEST(ConfigKeys, AConfigErrorNamingAKeyReachesTheHost) {
  auto no = validate_config(descriptor_of<Items>(), R"({"unit": ""})");
  ASSERT_TRUE(no);
  EXPECT_EQ(no->key, "unit");
  EXPECT_EQ(no->text, "unit: must not be empty");
  no = validate_config(descriptor_of<Items>(), R"({"unit": 5})");  // ConfigReader's type error
  ASSERT_TRUE(no);
  EXPECT_EQ(no->key, "unit");
  no = validate_config(descriptor_of<Items>(), R"({"units": "kg"})");  // unknown key
  ASSERT_TRUE(no);
  EXPECT_EQ(no->key, "units");
  EXPECT_FALSE(validate_config(descriptor_of<Items>(), R"({"unit": "kg"})"));
}

TEST(ConfigKeys, OnAnOldHostTheTextStillArrivesWithoutTheKey) {
  auto no = validate_config(descriptor_of<Items>(), R"({"unit": ""})", /*abi_minor=*/0);
  ASSERT_TRUE(no);
  EXPECT_EQ(no->key, "");
  EXPECT_EQ(no->text, "unit: must not be empty");
}

}  // namespace
