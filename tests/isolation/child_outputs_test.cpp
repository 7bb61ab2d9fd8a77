// isolation::take_child_outputs — the host's second check of what a handler process sent back
// with an OK reply (docs/operating/emits.md#from-a-handler-process-isolation--process). A real
// child checks every emit the same way first, so only this table reaches the refusals: a child
// whose memory or code went wrong must not get a row past the group's policy.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "isolation/isolation.hpp"

namespace sqlstreams::isolation {
namespace {

plugin_host::EmitPolicy policy() {
  plugin_host::EmitPolicy p;
  p.max_payload_bytes = {{"orders.enriched", 100}, {"orders.audit", 1000}};
  p.max_count = 3;
  p.max_bytes = 60;
  return p;
}

OutputFrame output(std::string stream, std::string payload) {
  return OutputFrame{std::move(stream), std::move(payload), 1, std::nullopt, std::nullopt};
}

TEST(TakeChildOutputs, OutputsWithinThePolicyAreTakenInOrder) {
  const auto p = policy();
  std::vector<plugin_host::Output> into(1);  // what was there stays, the outputs follow
  const std::vector<OutputFrame> outputs{
      output("orders.enriched", R"({"a": 1})"),
      OutputFrame{"orders.audit", R"({"b": "x"})", 2, "k-1", "idem-1"}};
  EXPECT_EQ(take_child_outputs(&p, outputs, into), "");
  ASSERT_EQ(into.size(), 3u);
  EXPECT_EQ(into[1].stream, "orders.enriched");
  EXPECT_EQ(into[1].payload, R"({"a": 1})");
  EXPECT_EQ(into[2].stream, "orders.audit");
  EXPECT_EQ(into[2].schema_version, 2);
  EXPECT_EQ(into[2].key, "k-1");
  EXPECT_EQ(into[2].idempotency_key, "idem-1");
  EXPECT_EQ(take_child_outputs(nullptr, {}, into), "") << "no outputs: nothing to check";
}

TEST(TakeChildOutputs, AnythingPastThePolicyIsRefusedAndNothingOfTheReplyIsTaken) {
  const auto p = policy();
  struct Case {
    const char* what;
    const plugin_host::EmitPolicy* policy;
    std::vector<OutputFrame> outputs;
    const char* says;
  };
  const std::string long_key(kMaxOutputFieldBytes, 'k');
  const std::vector<Case> cases{
      {"a group without emits", nullptr, {output("orders.enriched", "{}")}, "does not emit"},
      {"more than max_count",
       &p,
       {output("orders.enriched", "{}"), output("orders.enriched", "{}"),
        output("orders.enriched", "{}"), output("orders.enriched", "{}")},
       "max_emits_per_message"},
      {"a stream the group does not emit to",
       &p,
       {output("orders.enriched", "{}"), output("orders.placed", "{}")},
       "not one the group emits to"},
      {"not a JSON object", &p, {output("orders.enriched", "[1, 2]")}, "payload"},
      {"not JSON", &p, {output("orders.enriched", "{\"a\": ")}, "payload"},
      {"past the stream's max_payload_bytes",
       &p,
       {output("orders.enriched", R"({"pad": ")" + std::string(120, 'x') + R"("})")},
       "payload"},
      {"past the call's bytes",
       &p,
       {output("orders.audit", R"({"pad": ")" + std::string(30, 'x') + R"("})"),
        output("orders.audit", R"({"pad": ")" + std::string(30, 'x') + R"("})")},
       "max_emit_bytes_per_message"},
      {"schema_version 0", &p, {OutputFrame{"orders.enriched", "{}", 0, {}, {}}}, "schema_version"},
      {"an oversized message_key",
       &p,
       {OutputFrame{"orders.enriched", "{}", 1, long_key, {}}},
       "message_key"},
      {"a message_key with a NUL byte",
       &p,
       {OutputFrame{"orders.enriched", "{}", 1, std::string("k\0y", 3), {}}},
       "NUL"},
      {"a message_key that is not UTF-8",
       &p,
       {OutputFrame{"orders.enriched", "{}", 1, std::string("k\xff"), {}}},
       "UTF-8"},
      {"an empty idempotency_key",
       &p,
       {OutputFrame{"orders.enriched", "{}", 1, {}, ""}},
       "idempotency_key"},
  };
  for (const auto& c : cases) {
    std::vector<plugin_host::Output> into;
    const std::string why = take_child_outputs(c.policy, c.outputs, into);
    EXPECT_NE(why.find(c.says), std::string::npos) << c.what << ": " << why;
    EXPECT_TRUE(into.empty()) << c.what << ": a refused reply keeps none of its outputs";
  }
}

}  // namespace
}  // namespace sqlstreams::isolation
