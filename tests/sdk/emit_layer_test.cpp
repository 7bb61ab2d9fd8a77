// The C++ layer's emit (ABI 1.3) through the C ABI with the SDK's FakeHost: typed emit<T> with its
// schema version, keys, emit_json, a refusal as EmitError (and as the RETRY it becomes when it
// escapes), async emits recorded with their completion, and a host without emit (ABI 1.2).
#include <gtest/gtest.h>

#include <sqlstreams/testing/fake_host.hpp>

namespace emit_test {

struct Enriched {
  static constexpr int kSchemaVersion = 3;
  std::string order;
  int total = 0;
};
inline void to_json(nlohmann::json& j, const Enriched& e) {
  j = {{"order", e.order}, {"total", e.total}};
}
struct Plain {
  int n = 0;
};
inline void to_json(nlohmann::json& j, const Plain& p) { j = {{"n", p.n}}; }

struct Order {
  std::string id;
  std::string mode;
};
inline void from_json(const nlohmann::json& j, Order& o) {
  o.id = j.at("id").get<std::string>();
  o.mode = j.value("mode", "");
}

class Enrich : public sqlstreams::TypedHandler<Order> {
 public:
  static constexpr const char* kName = "enrich";
  static constexpr int kSchemaVersion = 1;
  sqlstreams::Result handle(const Order& o, const sqlstreams::MessageContext& m) override {
    if (o.mode == "undeclared") m.emit("elsewhere", Plain{1});  // throws EmitError
    if (o.mode == "caught") {
      try {
        m.emit("elsewhere", Plain{1});
      } catch (const sqlstreams::EmitError& e) {
        return sqlstreams::retry("caught code " + std::to_string(e.code()) + ": " + e.what());
      }
    }
    m.emit("orders.enriched", Enriched{o.id, 7}, {.key = o.id});
    m.emit("audit", Plain{2});
    m.emit_json("audit", R"({"raw": true})", {.schema_version = 2, .idempotency_key = "i-1"});
    return sqlstreams::ok();
  }
};

class EnrichLater : public sqlstreams::AsyncTypedHandler<Order> {
 public:
  static constexpr const char* kName = "enrich-later";
  static constexpr int kSchemaVersion = 1;
  void handle_async(Order o, const sqlstreams::MessageContext& m,
                    sqlstreams::Completion done) override {
    m.emit("orders.enriched", Plain{static_cast<int>(o.id.size())});
    done.complete(sqlstreams::ok());
  }
};

}  // namespace emit_test

namespace {

using sqlstreams::testing::descriptor_of;
using sqlstreams::testing::FakeHost;

TEST(Emit, TypedOutputsCarryTheirVersionKeyAndOrder) {
  FakeHost host(descriptor_of<emit_test::Enrich>());
  host.allow_emits({"orders.enriched", "audit"});
  auto out = host.handle({.payload = R"({"id": "o-17"})"});
  ASSERT_EQ(out.code, SQLSTREAMS_OUTCOME_OK) << out.error;
  ASSERT_EQ(out.outputs.size(), 3u);
  EXPECT_EQ(out.outputs[0].stream, "orders.enriched");
  EXPECT_EQ(nlohmann::json::parse(out.outputs[0].payload),
            nlohmann::json({{"order", "o-17"}, {"total", 7}}));
  EXPECT_EQ(out.outputs[0].schema_version, 3);  // Enriched::kSchemaVersion
  EXPECT_EQ(out.outputs[0].key, "o-17");
  EXPECT_EQ(out.outputs[1].schema_version, 1);  // Plain declares none
  EXPECT_FALSE(out.outputs[1].key.has_value());
  EXPECT_EQ(out.outputs[2].payload, R"({"raw": true})");
  EXPECT_EQ(out.outputs[2].schema_version, 2);
  EXPECT_EQ(out.outputs[2].idempotency_key, "i-1");
}

TEST(Emit, ARefusalIsAnEmitErrorAndARetryWhenItEscapes) {
  FakeHost host(descriptor_of<emit_test::Enrich>());
  host.allow_emits({"orders.enriched", "audit"});
  auto caught = host.handle({.payload = R"({"id": "o-1", "mode": "caught"})"});
  EXPECT_EQ(caught.code, SQLSTREAMS_OUTCOME_RETRY);
  EXPECT_EQ(caught.error,
            "caught code 1: fake host: stream 'elsewhere' is not one the group emits to");
  auto escaped = host.handle({.payload = R"({"id": "o-1", "mode": "undeclared"})"});
  EXPECT_EQ(escaped.code, SQLSTREAMS_OUTCOME_RETRY);
  EXPECT_EQ(escaped.error, "fake host: stream 'elsewhere' is not one the group emits to");
}

TEST(Emit, AnAsynchronousHandlerEmitsBeforeItCompletes) {
  FakeHost host(descriptor_of<emit_test::EnrichLater>());
  auto out = host.start({.payload = R"({"id": "abc"})"}).get();
  ASSERT_EQ(out.code, SQLSTREAMS_OUTCOME_OK);
  ASSERT_EQ(out.outputs.size(), 1u);
  EXPECT_EQ(out.outputs[0].payload, R"({"n":3})");
}

TEST(Emit, AContextWithoutAHostEmitSaysWhy) {
  sqlstreams::MessageContext m;  // what an ABI 1.2 host's message gives
  try {
    m.emit_json("audit", "{}");
    FAIL() << "emit without a host emit function";
  } catch (const sqlstreams::EmitError& e) {
    EXPECT_EQ(e.code(), SQLSTREAMS_EMIT_CLOSED);
    EXPECT_EQ(std::string(e.what()), "this host cannot emit (it speaks plugin ABI 1.2 or older)");
  }
}

}  // namespace
