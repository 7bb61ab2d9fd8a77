// The C++ layer seen through the C ABI: outcomes, the exception fence, payload decoding,
// config validation, logging and the manifest written by SQLSTREAMS_PLUGIN.
#include <gtest/gtest.h>

#include <cstddef>
#include <sqlstreams/testing/fake_host.hpp>

#include "test_handlers.hpp"

// The test binary is a plugin too: the macro must compile and describe both handlers.
SQLSTREAMS_PLUGIN("sdk-test", "9.9.9", sdk_test::Scripted, sdk_test::Minimal)

namespace {

using sqlstreams::testing::descriptor_of;
using sqlstreams::testing::FakeHost;

std::string order(const std::string& id) { return R"({"id":")" + id + R"(","qty":1})"; }

TEST(Manifest, MacroWritesAVersionedManifest) {
  const sqlstreams_type_manifest* m = sqlstreams_plugin_manifest_v1();
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m, sqlstreams_plugin_manifest_v1());  // the same static manifest every call
  EXPECT_EQ(m->magic, SQLSTREAMS_PLUGIN_MAGIC);
  EXPECT_EQ(m->struct_size, sizeof(sqlstreams_type_manifest));
  EXPECT_EQ(m->abi_major, 1u);
  EXPECT_EQ(m->abi_minor, 3u);
  EXPECT_STREQ(m->plugin_name, "sdk-test");
  EXPECT_STREQ(m->plugin_version, "9.9.9");
  EXPECT_NE(std::string(m->sdk_build).find("sqlstreams-plugin-sdk 1.3.0 (ABI 1.3)"),
            std::string::npos);
  ASSERT_EQ(m->handler_count, 2u);
  EXPECT_STREQ(m->handlers[0]->name, "scripted");
  EXPECT_EQ(m->handlers[0]->flags, SQLSTREAMS_HANDLER_CONCURRENT);
  EXPECT_EQ(m->handlers[0]->schema_version, 3);
  EXPECT_EQ(m->handlers[0]->struct_size, sizeof(sqlstreams_type_handler));
  EXPECT_STREQ(m->handlers[1]->name, "minimal");
  EXPECT_EQ(m->handlers[1]->flags, 0u);
}

TEST(Outcomes, HelpersMapToAbiCodes) {
  FakeHost host(descriptor_of<sdk_test::Scripted>());
  EXPECT_EQ(host.handle({.payload = order("fine")}).code, SQLSTREAMS_OUTCOME_OK);

  auto retry = host.handle({.payload = order("retry")});
  EXPECT_EQ(retry.code, SQLSTREAMS_OUTCOME_RETRY);
  EXPECT_EQ(retry.error, "try later");

  auto delay = host.handle({.payload = order("delay")});
  EXPECT_EQ(delay.code, SQLSTREAMS_OUTCOME_DELAY);
  EXPECT_EQ(delay.delay_ms, 250);

  auto terminal = host.handle({.payload = order("terminal")});
  EXPECT_EQ(terminal.code, SQLSTREAMS_OUTCOME_TERMINAL);
  EXPECT_EQ(terminal.error, "order terminal is bad");
}

TEST(Outcomes, ExceptionsBecomeRetries) {
  FakeHost host(descriptor_of<sdk_test::Scripted>());
  auto thrown = host.handle({.payload = order("throw")});
  EXPECT_EQ(thrown.code, SQLSTREAMS_OUTCOME_RETRY);
  EXPECT_EQ(thrown.error, "boom");

  // Every thrown type is named (plugin-sdk/README.md#a-handler-in-c; it used to be "unknown
  // exception" for both of these and "exception without a message").
  auto unknown = host.handle({.payload = order("throw-int")});
  EXPECT_EQ(unknown.code, SQLSTREAMS_OUTCOME_RETRY);
  EXPECT_EQ(unknown.error, "exception of type int (not derived from std::exception)");

  auto object = host.handle({.payload = order("throw-struct")});
  EXPECT_EQ(object.error,
            "exception of type sdk_test::NotAnException (not derived from std::exception)");

  auto silent = host.handle({.payload = order("throw-silent")});
  EXPECT_EQ(silent.code, SQLSTREAMS_OUTCOME_RETRY);
  EXPECT_EQ(silent.error, "exception of type sdk_test::SilentError without a message");

  auto subclass = host.handle({.payload = order("throw-subclass")});
  EXPECT_EQ(subclass.code, SQLSTREAMS_OUTCOME_RETRY);
  EXPECT_EQ(subclass.error, "card declined (sdk_test::Declined)");
}

TEST(Decoding, UndecodablePayloadIsTerminal) {
  FakeHost host(descriptor_of<sdk_test::Scripted>());
  for (const std::string payload : {"not json", R"({"id":"x"})", R"({"id":7,"qty":1})", ""}) {
    SCOPED_TRACE(payload);
    auto out = host.handle({.payload = payload});
    EXPECT_EQ(out.code, SQLSTREAMS_OUTCOME_TERMINAL);
    EXPECT_EQ(out.error.rfind("payload does not decode into sdk_test::Order: ", 0), 0u)
        << out.error;
  }
  auto missing = host.handle({.payload = R"({"id":"x"})"});
  EXPECT_NE(missing.error.find("'qty'"), std::string::npos) << missing.error;
}

TEST(Decoding, JsonPayloadTypeGetsTheDocument) {
  FakeHost host(descriptor_of<sdk_test::Minimal>());
  EXPECT_EQ(host.handle({.payload = R"({"a":1})"}).code, SQLSTREAMS_OUTCOME_OK);
  EXPECT_EQ(host.handle({.payload = "[1]"}).error, "not an object");
  EXPECT_EQ(host.handle({.payload = "{"}).code, SQLSTREAMS_OUTCOME_TERMINAL);
  EXPECT_FALSE(host.concurrent());
}

TEST(Context, EveryMessageFieldReachesTheHandler) {
  FakeHost host(descriptor_of<sdk_test::Scripted>());
  auto out = host.handle({.id = 42,
                          .payload = order("context"),
                          .attempt = 3,
                          .schema_version = 3,
                          .stream = "s",
                          .group = "g",
                          .message_key = "k-1",
                          .created_at_unix_ms = 1700000000000});
  EXPECT_EQ(out.error, "s|g|42|3|3|k-1|1700000000000|" + order("context"));
  auto keyless = host.handle({.payload = order("context")});
  EXPECT_NE(keyless.error.find("|(none)|"), std::string::npos);
}

TEST(Config, ValidateRejectsWithTheHandlersMessage) {
  const auto& d = descriptor_of<sdk_test::Scripted>();
  EXPECT_EQ(sqlstreams::testing::validate(d, R"({"limit": 5})"), std::nullopt);
  EXPECT_EQ(sqlstreams::testing::validate(d, ""), std::nullopt);  // empty text = {}
  EXPECT_EQ(sqlstreams::testing::validate(d, R"({"limit": 0})"), "limit must be positive");
  EXPECT_EQ(sqlstreams::testing::validate(d, R"({"limt": 5})"),
            "unknown config key(s) 'limt' (known: limit)");
  EXPECT_EQ(sqlstreams::testing::validate(d, "[1]"), "config must be a JSON object, got array");
  auto bad_json = sqlstreams::testing::validate(d, "{limit");
  ASSERT_TRUE(bad_json);
  EXPECT_EQ(bad_json->rfind("config is not valid JSON: ", 0), 0u) << *bad_json;
}

TEST(Config, DefaultValidateAcceptsAnything) {
  EXPECT_EQ(sqlstreams::testing::validate(descriptor_of<sdk_test::Minimal>(), R"({"x":1})"),
            std::nullopt);
}

TEST(Create, ValidatesAgainAndReportsConstructorExceptions) {
  EXPECT_THROW(
      {
        try {
          FakeHost host(descriptor_of<sdk_test::Scripted>(), R"({"limit": -1})");
        } catch (const std::runtime_error& e) {
          EXPECT_STREQ(e.what(), "limit must be positive");
          throw;
        }
      },
      std::runtime_error);
  try {
    FakeHost host(descriptor_of<sdk_test::CreateThrows>());
    FAIL() << "create should fail";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "cannot open ledger");
  }
}

TEST(Host, LogLinesGoThroughTheHostApi) {
  FakeHost host(descriptor_of<sdk_test::Scripted>(), R"({"limit": 7})");
  host.handle({.payload = order("log")});
  ASSERT_EQ(host.logs().size(), 2u);
  EXPECT_EQ(host.logs()[0].level, SQLSTREAMS_LOG_INFO);
  EXPECT_EQ(host.logs()[0].text, "scripted created with limit 7");
  EXPECT_EQ(host.logs()[1].level, SQLSTREAMS_LOG_WARN);
  EXPECT_EQ(host.logs()[1].text, "careful with log");
}

// The ABI rule for host structs: the plugin copies at most the size the host declared, so a
// host whose struct ends before `log` (an older or a stripped-down host) is never called
// through bytes it did not write; a default Host logs nowhere.
TEST(Host, CopiesOnlyWhatTheHostDeclared) {
  static int calls = 0;
  sqlstreams_type_host_api api{};
  api.log = [](void*, int32_t, const char*, size_t) { ++calls; };
  api.struct_size = static_cast<uint32_t>(offsetof(sqlstreams_type_host_api, log));
  sqlstreams::Host short_host(&api);
  short_host.error("the host did not declare log()");
  EXPECT_EQ(calls, 0);
  api.struct_size = sizeof(api);
  sqlstreams::Host full_host(&api);
  full_host.error("heard");
  EXPECT_EQ(calls, 1);
  sqlstreams::Host default_host;
  default_host.error("nobody hears this");
  sqlstreams::Host null_host(nullptr);
  null_host.error("nobody hears this either");
  EXPECT_EQ(calls, 1);
}

}  // namespace
