// Several payload versions per handler, end to end (plugin-sdk/README.md#several-payload-versions):
// payments.so's charge-cards declares versions 1 and 2 (sqlstreams::Versions<PaymentV1, Payment>)
// and a real host runs it. A v1 and a v2 message are both handled (the v1 one upcast); a payload
// that does not decode into its version's type is dead at once naming that type; a message at
// version 3, which the handler does not declare, is kept by the host
// (docs/design.md#payload-schema-versions, `unaccepted_versions = "keep"`, the default: a `parked`
// row with its payload, logged `version-kept`, never handled, never dead-lettered, not holding the
// cursor back).
#include <gtest/gtest.h>

#include "e2e_support.hpp"

namespace sqlstreams::e2e {
namespace {

void produce(const std::string& url, const std::string& payload, int version) {
  query(url, "SELECT sqlstreams.produce('payments.requested', '" + payload + "'::jsonb, " +
                 std::to_string(version) + ")");
}

TEST(PayloadVersions, V1AndV2AreHandledAnUndeclaredVersionIsKept) {
  testing::TestDatabase db;
  ScratchDir dir;
  HostOptions o;
  o.name = "versions";
  o.audit_group = false;
  o.record_file = dir.file("calls.records");
  o.charge_config = "unreachable_orders = [\"v2-retry\"]\n";
  Host host(dir, o, db.url());
  ASSERT_TRUE(host.wait_for_log("host-ready", 60s)) << host.log();

  produce(db.url(), R"({"order_id":"v1-ok","amount_cents":5,"currency":"EUR"})", 1);      // 1
  produce(db.url(), R"({"order_id":"v2-ok","amount":{"cents":5,"currency":"EUR"}})", 2);  // 2
  produce(db.url(), R"({"order_id":"v2-as-v1","amount":{"cents":5,"currency":"EUR"}})",
          1);                                                                          // 3
  produce(db.url(), R"({"order_id":"v3","amount":{"cents":5,"currency":"EUR"}})", 3);  // 4
  produce(db.url(),
          R"({"order_id":"v2-cancelled","amount":{"cents":5,"currency":"EUR"},"cancelled":true})",
          2);  // 5: reached handle() as a v2 Payment
  wait_drained(db.url(), 60s);

  const auto records = read_records({o.record_file});
  const auto& charge = records.at(kCharge);
  EXPECT_EQ(charge.count(1), 1u) << "the v1 message was handled (upcast to v2)";
  EXPECT_EQ(charge.count(2), 1u) << "the v2 message was handled";
  EXPECT_EQ(charge.count(3), 0u) << "does not decode: never reaches handle()";
  EXPECT_EQ(charge.count(4), 0u) << "version 3 is not declared: kept, not handled";
  EXPECT_EQ(charge.count(5), 1u);

  const std::string exceptions = testing::stream_family(db.url(), kStream).exceptions;
  EXPECT_EQ(scalar<std::string>(db.url(), "SELECT status || ' ' || last_error FROM " + exceptions +
                                              " WHERE message_id = 3"),
            "dead payload does not decode into payments::PaymentV1 (schema version 1): "
            "[json.exception.out_of_range.403] key 'amount_cents' not found");
  EXPECT_EQ(scalar<std::string>(db.url(), "SELECT status || ' ' || last_error FROM " + exceptions +
                                              " WHERE message_id = 5"),
            "dead order v2-cancelled was cancelled");
  EXPECT_EQ(scalar<int64_t>(db.url(),
                            "SELECT count(*) FROM " + exceptions + " WHERE message_id IN (1, 2)"),
            0)
      << "handled messages leave no exception row";
  EXPECT_EQ(scalar<std::string>(db.url(),
                                "SELECT status || ' ' || last_error || ' ' || "
                                "(payload ->> 'order_id') FROM " +
                                    exceptions + " WHERE message_id = 4"),
            "parked schema_version 3 is not accepted by the group (schema_versions): kept until "
            "it is v3");
  EXPECT_NE(host.log().find("version-kept stream=payments.requested group=charge-cards "
                            "schema_version=3 message_id=4"),
            std::string::npos)
      << tail(host.log());
  EXPECT_EQ(host.stop(testing::kExitBound), std::optional<int>(0)) << tail(host.log());
}

}  // namespace
}  // namespace sqlstreams::e2e
