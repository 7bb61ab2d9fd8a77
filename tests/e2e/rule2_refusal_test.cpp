// Rule 2 (docs/design.md#rule-2-the-id-sequence-is-cache-1): a stream whose id sequence is not
// CACHE 1 would hand out ids out of time order and let the fence skip messages, so `sqlstreams run`
// refuses to start (exit 4) and names the stream.
#include <gtest/gtest.h>

#include <fstream>

#include "e2e_support.hpp"

namespace sqlstreams::e2e {
namespace {

TEST(Rule2Refusal, RunExits4NamingTheStreamWhenItsSequenceIsCached) {
  testing::TestDatabase db;
  ScratchDir dir;
  HostOptions o;
  o.name = "rule2";
  declare_host(dir, db.url(), o, "declare.toml");
  db.sql("ALTER SEQUENCE " + testing::stream_family(db.url(), kStream).id_seq + " CACHE 10");

  Host host(dir, o, db.url());
  auto code = host.process().wait(60s);
  ASSERT_TRUE(code.has_value()) << "the host must refuse, not run:\n" << tail(host.log());
  EXPECT_EQ(*code, 4) << host.log();
  EXPECT_NE(host.log().find(kStream), std::string::npos) << host.log();
  EXPECT_NE(host.log().find("CACHE 1"), std::string::npos) << host.log();
  EXPECT_EQ(host.log().find("host-ready"), std::string::npos) << host.log();
}

}  // namespace
}  // namespace sqlstreams::e2e
