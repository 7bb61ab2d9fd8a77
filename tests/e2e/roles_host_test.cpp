// The shipped roles end to end (docs/operating/security.md#producers-and-roles): an admin migrates;
// a real `sqlstreams run` host connects as a LOGIN role holding only sqlstreams_host
// (database.migrate = "check"), declares the stream (its family and partitions go to
// sqlstreams_host), and drains what a LOGIN role holding only sqlstreams_producer produced; an
// operator LOGIN role runs `status` and `dead list`.
#include <gtest/gtest.h>
#include <unistd.h>

#include "e2e_support.hpp"

namespace sqlstreams::e2e {
namespace {

class RolesEndToEnd : public ::testing::Test {
 protected:
  std::string login_as(const std::string& granted) { return logins_.login_as(granted); }
  testing::TestDatabase db_;
  ScratchDir dir_;
  testing::TestLogins logins_{db_};
};

TEST_F(RolesEndToEnd, AHostRoleRunsAHostThatDrainsWhatAProducerRoleProduced) {
  auto [code, out] = cli({"migrate"}, db_.url());
  ASSERT_EQ(code, 0) << out;
  const std::string host_url = login_as("sqlstreams_host");
  const std::string producer_url = login_as("sqlstreams_producer");
  const std::string operator_url = login_as("sqlstreams_operator");
  HostOptions o;
  o.migrate = "check";
  Host host(dir_, o, host_url);
  ASSERT_TRUE(host.wait_for_log("host-ready", 60s)) << tail(host.log());
  const testing::StreamFamily t = testing::stream_family(db_, kStream);
  EXPECT_EQ(db_.scalar<std::string>("SELECT pg_get_userbyid(relowner) FROM pg_class WHERE oid = '" +
                                    t.messages + "'::regclass"),
            "sqlstreams_host");
  produce_payments(producer_url, 300);
  wait_drained(db_.url(), 60s);
  auto [scode, status] = cli({"status"}, operator_url);
  EXPECT_EQ(scode, 0) << status;
  EXPECT_NE(status.find("charge-cards"), std::string::npos) << status;
  auto [dcode, dead] = cli({"dead", "list", kStream, kCharge}, operator_url);
  EXPECT_EQ(dcode, 0) << dead;
  EXPECT_EQ(host.stop(testing::kExitBound), 0) << tail(host.log());
  EXPECT_EQ(host.count_in_log("permission denied"), 0) << tail(host.log());
}

}  // namespace
}  // namespace sqlstreams::e2e
