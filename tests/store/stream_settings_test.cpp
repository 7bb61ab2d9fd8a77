// `sqlstreams stream set` underneath (store/reporting/stream_settings, V008): the one way to change
// a stream's fleet-wide settings; every real change writes one stream_actions row with what it
// changed from and to, an idempotent call writes none, and out-of-range values are refused.
#include "store/reporting/stream_settings.hpp"

#include "store_fixture.hpp"

namespace sqlstreams::testing {
namespace {

using StreamSettingsTest = StoreTest;

TEST_F(StreamSettingsTest, ASetChangesTheFleetSettingsAndAuditsEachRealChangeOnce) {
  store::StreamSettingsChange c;
  c.retention = std::optional<Millis>(std::chrono::hours(24 * 7));
  c.notify = true;
  auto r = store::set_stream_settings(*session_, "payments.requested", c, "cli:op@test");
  ASSERT_TRUE(r.audit_id);
  EXPECT_EQ(db_.scalar<std::string>("SELECT retention::text FROM sqlstreams.streams"), "168:00:00");
  EXPECT_TRUE(db_.scalar<bool>("SELECT notify FROM sqlstreams.streams"));
  EXPECT_EQ(
      db_.scalar<std::string>("SELECT detail::text FROM sqlstreams.stream_actions"),
      R"({"notify": {"to": true, "from": false}, "retention": {"to": 604800000, "from": null}})");
  EXPECT_EQ(
      db_.scalar<std::string>("SELECT actor || ' ' || db_user FROM sqlstreams.stream_actions"),
      "cli:op@test " + db_.scalar<std::string>("SELECT session_user::text"));

  // The same values again: nothing changes, nothing is recorded.
  EXPECT_FALSE(store::set_stream_settings(*session_, "payments.requested", c, "x").audit_id);
  EXPECT_EQ(db_.scalar<int64_t>("SELECT count(*) FROM sqlstreams.stream_actions"), 1);

  // Forever again, and a flag left out is left alone.
  store::StreamSettingsChange forever;
  forever.retention = std::optional<Millis>();
  ASSERT_TRUE(store::set_stream_settings(*session_, "payments.requested", forever, "x").audit_id);
  EXPECT_TRUE(db_.scalar<bool>("SELECT retention IS NULL AND notify FROM sqlstreams.streams"));
}

TEST_F(StreamSettingsTest, OutOfRangeValuesAndUnknownStreamsAreRefusedNamingWhat) {
  auto refusal = [&](const std::string& stream, const store::StreamSettingsChange& c) {
    try {
      store::set_stream_settings(*session_, stream, c, "x");
    } catch (const store::StoreError& e) {
      EXPECT_EQ(e.kind(), store::StoreError::Kind::kRejected) << e.what();
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  store::StreamSettingsChange big;
  big.max_payload_bytes = (1 << 26) + 1;
  EXPECT_NE(refusal("payments.requested", big).find("max_payload_bytes must be 1 .. 67108864"),
            std::string::npos);
  store::StreamSettingsChange zero;
  zero.max_payload_bytes = 0;
  EXPECT_NE(refusal("payments.requested", zero).find("max_payload_bytes"), std::string::npos);
  store::StreamSettingsChange notify;
  notify.notify = true;
  EXPECT_EQ(refusal("no.such.stream", notify), "no stream 'no.such.stream'");
  EXPECT_EQ(db_.scalar<int64_t>("SELECT count(*) FROM sqlstreams.stream_actions"), 0);
  EXPECT_EQ(db_.scalar<int>("SELECT max_payload_bytes FROM sqlstreams.streams"), 1 << 20);
}

}  // namespace
}  // namespace sqlstreams::testing
