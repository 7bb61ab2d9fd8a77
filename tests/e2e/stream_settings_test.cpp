// Fleet settings change only when someone means it (docs/operating/service.md#fleet-settings,
// V008), with real processes: a host whose config differs from the database about a stream's
// retention runs with the database's value and says so (`stream-setting-differs`, naming the
// command that would change it); `sqlstreams stream set` changes it for every host, audited; bad
// input is a usage error (64), an unknown stream a data error (65), and nothing is written for
// either.
#include <gtest/gtest.h>

#include <fstream>

#include "e2e_support.hpp"

namespace sqlstreams::e2e {
namespace {

class StreamSettings : public ::testing::Test {
 protected:
  const std::string& url() const { return db_.url(); }
  std::string retention() const {
    return scalar<std::string>(
        url(), "SELECT coalesce(retention::text, 'forever') FROM sqlstreams.streams");
  }
  int64_t audit_rows() const {
    return scalar<int64_t>(url(), "SELECT count(*) FROM sqlstreams.stream_actions");
  }
  testing::TestDatabase db_;
  ScratchDir dir_;
};

TEST_F(StreamSettings, AStaleHostKeepsTheFleetsRetentionAndStreamSetChangesItForEveryone) {
  HostOptions declared;
  declared.retention = "1d";
  declare_host(dir_, url(), declared, "declared.toml");
  HostOptions stale;  // retention forever: an old copy of the TOML
  stale.audit_group = false;
  Host host(dir_, stale, url());
  ASSERT_TRUE(host.wait_for_log("host-ready", 60s)) << tail(host.log());
  EXPECT_GE(host.count_in_log("stream-setting-differs stream=payments.requested "
                              "setting=retention database=1d config=forever"),
            1)
      << tail(host.log());
  EXPECT_EQ(retention(), "24:00:00");

  auto [code, out] = cli({"stream", "set", "payments.requested", "--retention", "2d"}, url());
  ASSERT_EQ(code, 0) << out;
  EXPECT_NE(out.find("stream payments.requested: retention 1d -> 2d (recorded in stream_actions"),
            std::string::npos)
      << out;
  EXPECT_EQ(retention(), "48:00:00");
  EXPECT_EQ(
      scalar<std::string>(url(), "SELECT actor FROM sqlstreams.stream_actions").rfind("cli:", 0),
      0u);
  auto [again, same] = cli({"stream", "set", "payments.requested", "--retention", "2d"}, url());
  ASSERT_EQ(again, 0) << same;
  EXPECT_NE(same.find("already has these settings; nothing changed"), std::string::npos) << same;
  EXPECT_EQ(audit_rows(), 1);

  // --from-config: the stale file's values, on purpose this time.
  const std::string stale_file = dir_.file("stale.toml");
  std::ofstream(stale_file) << host_config(stale);
  auto [fc, fout] =
      cli({"stream", "set", "payments.requested", "--from-config", "--config", stale_file}, url());
  ASSERT_EQ(fc, 0) << fout;
  EXPECT_NE(fout.find("retention 2d -> forever"), std::string::npos) << fout;
  EXPECT_EQ(retention(), "forever");
  EXPECT_EQ(host.stop(testing::kExitBound), 0) << tail(host.log());
}

TEST_F(StreamSettings, BadValuesAreUsageErrorsAnUnknownStreamIsNamedAndNothingIsWritten) {
  declare_host(dir_, url(), HostOptions{});
  const std::vector<std::pair<std::vector<std::string>, std::string>> usage{
      {{"stream", "set", "payments.requested"}, "nothing to change"},
      {{"stream", "set", "payments.requested", "--retention", "0s"}, "not a positive duration"},
      {{"stream", "set", "payments.requested", "--retention", "soon"}, "not a positive duration"},
      {{"stream", "set", "payments.requested", "--notify", "yes"}, "expected true or false"},
      {{"stream", "set", "payments.requested", "--max-payload-bytes", "0"},
       "outside 1 .. 67108864"},
      {{"stream", "set", "payments.requested", "--max-payload-bytes", "67108865"},
       "outside 1 .. 67108864"},
      {{"stream", "set", "payments.requested", "--from-config"}, "--from-config needs --config"},
      {{"stream", "set", "payments.requested", "--idempotency-window", "0s"},
       "not a positive duration"},
      {{"stream", "set", "payments.requested", "--idempotency-window", "soon"},
       "not a positive duration"},
  };
  for (const auto& [args, expected] : usage) {
    auto [code, out] = cli(args, url());
    EXPECT_EQ(code, 64) << out;
    EXPECT_NE(out.find(expected), std::string::npos) << out;
  }
  auto [code, out] = cli({"stream", "set", "no.such.stream", "--notify", "true"}, url());
  EXPECT_EQ(code, 65) << out;
  EXPECT_NE(out.find("no stream 'no.such.stream'"), std::string::npos) << out;
  EXPECT_EQ(audit_rows(), 0);
  EXPECT_EQ(retention(), "forever");
}

// The idempotency window (docs/operating/idempotent-produce.md, V011): 1d by default, changed
// for the fleet by stream set.
TEST_F(StreamSettings, StreamSetChangesTheIdempotencyWindow) {
  declare_host(dir_, url(), HostOptions{});
  EXPECT_EQ(scalar<std::string>(url(), "SELECT idempotency_window::text FROM sqlstreams.streams"),
            "24:00:00");
  auto [code, out] =
      cli({"stream", "set", "payments.requested", "--idempotency-window", "7d"}, url());
  ASSERT_EQ(code, 0) << out;
  EXPECT_NE(out.find("idempotency_window 1d -> 7d"), std::string::npos) << out;
  EXPECT_EQ(scalar<std::string>(url(), "SELECT idempotency_window::text FROM sqlstreams.streams"),
            "168:00:00");
  EXPECT_EQ(audit_rows(), 1);
}

}  // namespace
}  // namespace sqlstreams::e2e
