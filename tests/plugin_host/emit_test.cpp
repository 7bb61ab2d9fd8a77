// Outputs committed with the ack, the host side (plugin_host/emit_registry.hpp): what an emitted
// payload must be, and a real C plugin (c_ok.so) and a real asynchronous C++ plugin (async_io.so)
// emitting through host_api->emit: kept only with an OK outcome, refused with a reason when
// undeclared, malformed or over budget, CLOSED once the call is over.
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <thread>

#include "plugin_host/emit_registry.hpp"
#include "test_support.hpp"

namespace {

using plugin_host_test::kFixtureDir;
using plugin_host_test::kPluginDir;
using plugin_host_test::Message;
using sqlstreams::plugin_host::check_output_payload;
using sqlstreams::plugin_host::EmitPolicy;
using sqlstreams::plugin_host::EmitRegistry;
using sqlstreams::plugin_host::Outcome;
using sqlstreams::plugin_host::OutcomeKind;
using sqlstreams::plugin_host::PluginRegistry;

struct PayloadCase {
  std::string json;
  int64_t max_bytes;
  std::string error_part;  // "" = accepted
};

TEST(EmitPayload, OnlyObjectsThatProvablyFitTheirStreamAreKept) {
  const std::vector<PayloadCase> cases = {
      {R"({"a": 1})", 100, ""},
      {R"({"a":[1,2,{"b":null}],"c":"é\n"})", 100, ""},
      {R"({"small": 1e-05, "big": 1.5E+300})", 1000, ""},
      {"[1]", 100, "a JSON array, not an object"},
      {"17", 100, "not a JSON object"},
      {R"("text")", 100, "not a JSON object"},
      {"{}{}", 100, "not valid JSON"},
      {"{\"a\": 1", 100, "not valid JSON"},
      {"", 100, "not valid JSON"},
      {"{\"a\": \"\\u0000\"}", 100, "\\u0000"},
      {"{\"\\u0000\": 1}", 100, "\\u0000"},
      {"{\"a\": \"\xff\"}", 100, "not valid JSON"},
      {"{\"a\": \"\\ud800\"}", 100, "not valid JSON"},
      {R"({"a": 1e1001})", 100000, "a number is too large"},
      {R"({"a": 1e-1001})", 100000, "exponent beyond"},
      // {"a":1} is stored as {"a": 1}: 8 bytes; the bound counts ": " and ", " spaces.
      {R"({"a":1})", 8, ""},
      {R"({"a":1})", 7, "may take up to 8 bytes"},
      {R"({"a":[1,2]})", 13, ""},
      {R"({"a":[1,2]})", 12, "may take up to 13"},
      // 1e300 is written out in full by jsonb: far past 100 bytes although its text is short.
      {R"({"a": 1e300})", 100, "past the stream's max_payload_bytes 100"},
  };
  for (const auto& c : cases) {
    const std::string error = check_output_payload(c.json, c.max_bytes);
    if (c.error_part.empty()) {
      EXPECT_EQ(error, "") << c.json;
    } else {
      EXPECT_NE(error.find(c.error_part), std::string::npos) << c.json << " → " << error;
    }
  }
  std::string deep(1001, '[');
  deep = "{\"a\": " + deep + std::string(1001, ']') + "}";
  EXPECT_NE(check_output_payload(deep, 1 << 20).find("deeper than 1000"), std::string::npos);
}

class EmitTest : public ::testing::Test {
 protected:
  std::unique_ptr<sqlstreams::plugin_host::HandlerInstance> c_echo(size_t max_count = 100) {
    auto h = fixtures_.create("c_ok.so", "c-echo", "{}", "test.in", "g");
    auto policy = std::make_shared<EmitPolicy>();
    policy->max_payload_bytes["test.out"] = 1 << 20;
    policy->max_count = max_count;
    h->set_emit_policy(policy);
    return h;
  }
  PluginRegistry fixtures_{kFixtureDir};
};

TEST_F(EmitTest, AnOkCallKeepsWhatItEmittedInOrder) {
  auto h = c_echo();
  Message m{.payload = "emit"};
  const Outcome out = h->handle(m.view());
  ASSERT_EQ(out.kind, OutcomeKind::kOk) << out.error;
  ASSERT_EQ(out.outputs.size(), 2u);
  EXPECT_EQ(out.outputs[0].stream, "test.out");
  EXPECT_EQ(out.outputs[0].payload, R"({"n": 1})");
  EXPECT_FALSE(out.outputs[0].key.has_value());
  EXPECT_EQ(out.outputs[1].payload, R"({"n": 2})");
  EXPECT_EQ(out.outputs[1].key, "k-2");
  EXPECT_EQ(EmitRegistry::instance().open_calls(), 0u);
}

TEST_F(EmitTest, ACallThatDoesNotEndOkKeepsNothing) {
  auto h = c_echo();
  Message m{.payload = "emit-retry"};
  const Outcome out = h->handle(m.view());
  EXPECT_EQ(out.kind, OutcomeKind::kRetry);
  EXPECT_TRUE(out.outputs.empty());
}

TEST_F(EmitTest, RefusalsSayWhy) {
  auto h = c_echo(3);
  Message undeclared{.payload = "emit-undeclared"};
  EXPECT_EQ(h->handle(undeclared.view()).error,
            "emit=1: stream 'test.nowhere' is not one the group emits to (emits: test.out)");
  Message array{.payload = "emit-array"};
  EXPECT_EQ(h->handle(array.view()).error,
            "emit=1: payload to 'test.out': the payload is a JSON array, not an object");
  Message many{.payload = "emit-many"};
  EXPECT_EQ(h->handle(many.view()).error,
            "emitted 3, then emit=2: the call emitted max_emits_per_message (3) already");
}

TEST_F(EmitTest, AGroupWithoutEmitsAndACallThatIsOverAreClosed) {
  auto plain = fixtures_.create("c_ok.so", "c-echo", "{}", "test.in", "g");
  Message undeclared{.payload = "emit-undeclared"};
  EXPECT_EQ(plain->handle(undeclared.view()).error,
            "emit=3: this call may not emit: its group declares no emits");

  auto h = c_echo();
  Message emit{.payload = "emit"};
  ASSERT_EQ(h->handle(emit.view()).kind, OutcomeKind::kOk);
  // Every token drawn so far names a call that returned: the host refuses whatever is sent
  // with one now (a plugin that kept its token, or invented one).
  std::string reason;
  sqlstreams_type_output o{};
  o.struct_size = sizeof o;
  o.schema_version = 1;
  o.stream = {"test.out", 8};
  o.payload = {reinterpret_cast<const uint8_t*>("{}"), 2};
  const uint64_t drawn = sqlstreams::plugin_host::draw_call_token();
  for (uint64_t token = 0; token <= drawn; ++token) {
    ASSERT_EQ(EmitRegistry::instance().emit(token, o, reason), SQLSTREAMS_EMIT_CLOSED);
  }
  EXPECT_EQ(EmitRegistry::instance().open_calls(), 0u);
}

TEST(EmitAsync, AnAsynchronousHandlerEmitsBeforeItCompletesAndOnlyOkKeepsThem) {
  PluginRegistry plugins(kPluginDir);
  auto h = plugins.create("async_io.so", "timer-io", R"({"delay_ms": 5})", "test.in", "g");
  auto policy = std::make_shared<EmitPolicy>();
  policy->max_payload_bytes["test.out"] = 1 << 20;
  h->set_emit_policy(policy);
  auto run = [&](const std::string& payload) {
    auto m = std::make_shared<Message>(Message{.payload = payload, .id = 41});
    std::promise<Outcome> done;
    auto f = done.get_future();
    h->start_async(m->view(), m, [&done](const Outcome& o) { done.set_value(o); });
    return f.get();
  };
  const Outcome ok = run(R"({"emit_to": "test.out"})");
  ASSERT_EQ(ok.kind, OutcomeKind::kOk) << ok.error;
  ASSERT_EQ(ok.outputs.size(), 1u);
  EXPECT_EQ(ok.outputs[0].payload, R"({"from": 41})");
  const Outcome retry = run(R"({"emit_to": "test.out", "outcome": "retry"})");
  EXPECT_EQ(retry.kind, OutcomeKind::kRetry);
  EXPECT_TRUE(retry.outputs.empty());
  // An undeclared stream: the SDK's EmitError escapes handle_async and completes it RETRY.
  const Outcome refused = run(R"({"emit_to": "elsewhere"})");
  EXPECT_EQ(refused.kind, OutcomeKind::kRetry);
  EXPECT_NE(refused.error.find("stream 'elsewhere' is not one the group emits to"),
            std::string::npos)
      << refused.error;
  // Given up (a timeout): the buffer goes with it.
  auto m =
      std::make_shared<Message>(Message{.payload = R"({"emit_to": "test.out", "delay_ms": 500})"});
  const uint64_t token = h->start_async(m->view(), m, [](const Outcome&) {});
  EXPECT_TRUE(h->cancel_async(token));
  EXPECT_EQ(EmitRegistry::instance().open_calls(), 0u);
}

}  // namespace
