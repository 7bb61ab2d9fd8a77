// The operator CLI on dead letters, through the real binary: a negative id is refused with
// exit 64 (it used to mean "no filter": `dead discard S G --id -2 --yes` discarded every dead
// letter), `--error` is a literal substring, an empty `--error` is refused.
#include <gtest/gtest.h>

#include <fstream>

#include "e2e_support.hpp"

namespace sqlstreams::e2e {
namespace {

class CliDead : public ::testing::Test {
 protected:
  void SetUp() override {
    HostOptions o;
    o.audit_group = false;
    config_ = declare_host(dir_, db_.url(), o);
    const std::string n = std::to_string(stream_id(db_.url()));
    exceptions_ = "sqlstreams.exceptions_" + n;
    query(
        db_.url(),
        "INSERT INTO " + exceptions_ +
            " (group_id, message_id, status, attempts, "
            "can_run_after, last_error, payload) SELECT g.id, e.id, 'dead', 4, now(), e.err, '{}' "
            "FROM sqlstreams.groups g, (VALUES (1, 'field a_b missing'), (2, 'field axb "
            "missing'), (3, 'quota 100% used'), (4, 'quota 1000 used')) AS e(id, err) "
            "WHERE g.name = 'charge-cards'");
  }
  int64_t dead() const {
    return scalar<int64_t>(db_.url(),
                           "SELECT count(*) FROM " + exceptions_ + " WHERE status = 'dead'");
  }
  void expect_usage_error(const std::vector<std::string>& args, const std::string& expect) {
    auto [code, out] = cli(args, db_.url());
    EXPECT_EQ(code, 64) << out;
    EXPECT_NE(out.find(expect), std::string::npos) << out;
    EXPECT_EQ(dead(), 4) << "a refused command changed dead letters:\n" << out;
  }
  testing::TestDatabase db_;
  ScratchDir dir_;
  std::string config_, exceptions_;
};

TEST_F(CliDead, NegativeIdsAreRefusedWithExit64AndDiscardNothing) {
  expect_usage_error({"dead", "discard", kStream, kCharge, "--id", "-2", "--yes"},
                     "--id: message ids are >= 0 (got -2)");
  expect_usage_error({"dead", "discard", kStream, kCharge, "--from-id=-1", "--yes"}, "--from-id");
  expect_usage_error({"dead", "retry", kStream, kCharge, "--to-id=-5"}, "--to-id");
  expect_usage_error({"dead", "list", kStream, kCharge, "--id=-1"}, "--id");
  expect_usage_error({"group", "rewind", kStream, kCharge, "--to-id=-1"}, "--to-id");
  auto [code, out] = cli({"dead", "show", kStream, kCharge, "--", "-2"}, db_.url());
  EXPECT_EQ(code, 64) << out;
}

TEST_F(CliDead, ErrorFilterIsALiteralSubstringAndMustNotBeEmpty) {
  auto [code, out] = cli({"dead", "discard", kStream, kCharge, "--error", "_", "--yes"}, db_.url());
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find("discarded 1 dead letter"), std::string::npos) << out;
  auto [code2, out2] = cli({"dead", "list", kStream, kCharge, "--error", "%", "--json"}, db_.url());
  EXPECT_EQ(code2, 0) << out2;
  EXPECT_NE(out2.find("100% used"), std::string::npos) << out2;
  EXPECT_EQ(out2.find("1000 used"), std::string::npos) << "% matched as a wildcard:\n" << out2;
  EXPECT_EQ(dead(), 3);
  auto [code3, out3] =
      cli({"dead", "discard", kStream, kCharge, "--error", "", "--yes"}, db_.url());
  EXPECT_EQ(code3, 64) << out3;
  EXPECT_EQ(dead(), 3) << "an empty --error discarded everything:\n" << out3;
}

TEST_F(CliDead, AnExactIdDiscardsOnlyThatDeadLetter) {
  auto [code, out] = cli({"dead", "discard", kStream, kCharge, "--id", "2", "--yes"}, db_.url());
  EXPECT_EQ(code, 0) << out;
  EXPECT_EQ(dead(), 3);
  EXPECT_EQ(
      scalar<int64_t>(db_.url(), "SELECT count(*) FROM " + exceptions_ + " WHERE message_id = 2"),
      0);
}

}  // namespace
}  // namespace sqlstreams::e2e
