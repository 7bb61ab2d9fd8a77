// The operator CLI on dead letters, through the real binary: a negative id is refused with
// exit 64 (it used to mean "no filter": `dead discard S G --id -2 --yes` discarded every dead
// letter), `--error` is a literal substring, an empty `--error` is refused; `--kept` lists and
// shows the messages kept for a schema version the group does not accept, and nothing else;
// `dead discard --kept` discards named kept messages (audited), and says why it discarded none.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "e2e_support.hpp"

namespace sqlstreams::e2e {
namespace {

class CliDead : public ::testing::Test {
 protected:
  void SetUp() override {
    HostOptions o;
    o.audit_group = false;
    config_ = declare_host(dir_, db_.url(), o);
    exceptions_ = testing::stream_family(db_.url(), kStream).exceptions;
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

// A kept row (status `parked`: docs/tutorial.md#versions-a-group-does-not-accept-yet) is not
// a dead letter: `dead list` leaves it out, `dead list --kept` and `dead show --kept` show it with
// its reason and payload, and retry/discard do not take it.
TEST_F(CliDead, KeptMessagesAreListedAndShownApartFromDeadLetters) {
  query(db_.url(), "INSERT INTO " + exceptions_ +
                       " (group_id, message_id, status, attempts, can_run_after, last_error, "
                       "payload, schema_version) SELECT g.id, 9, 'parked', 0, 'infinity', "
                       "'schema version 2 is not accepted by this group (accepts 1)', "
                       "'{\"order_id\":\"o-9\"}', 2 FROM sqlstreams.groups g WHERE g.name = "
                       "'charge-cards'");
  auto [code, out] = cli({"dead", "list", kStream, kCharge}, db_.url());
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find("4 dead letter(s)"), std::string::npos) << out;
  EXPECT_EQ(out.find("schema version 2"), std::string::npos) << "a kept row listed as dead:\n"
                                                             << out;

  auto [code2, out2] = cli({"dead", "list", kStream, kCharge, "--kept"}, db_.url());
  EXPECT_EQ(code2, 0) << out2;
  EXPECT_NE(out2.find("KEPT_AT"), std::string::npos) << out2;
  EXPECT_NE(out2.find("schema version 2 is not accepted"), std::string::npos) << out2;
  EXPECT_NE(out2.find("1 kept message(s)"), std::string::npos) << out2;

  auto [code3, out3] = cli({"dead", "list", kStream, kCharge, "--kept", "--json"}, db_.url());
  EXPECT_EQ(code3, 0) << out3;
  auto rows = nlohmann::json::parse(out3.substr(out3.find('[')));
  ASSERT_EQ(rows.size(), 1u) << out3;
  EXPECT_EQ(rows[0]["message_id"], 9);
  EXPECT_TRUE(rows[0].contains("kept_at")) << out3;
  EXPECT_EQ(rows[0]["payload"]["order_id"], "o-9");

  auto [code4, out4] = cli({"dead", "show", kStream, kCharge, "9", "--kept"}, db_.url());
  EXPECT_EQ(code4, 0) << out4;
  EXPECT_NE(out4.find("kept after 0 attempt(s)"), std::string::npos) << out4;
  EXPECT_NE(out4.find("o-9"), std::string::npos) << out4;
  auto [code5, out5] = cli({"dead", "show", kStream, kCharge, "9"}, db_.url());
  EXPECT_NE(code5, 0) << out5;
  EXPECT_NE(out5.find("message 9 is not dead"), std::string::npos) << out5;

  // Retry has no --kept (a usage error); discard --kept needs the kept rows named (below).
  expect_usage_error({"dead", "discard", kStream, kCharge, "--kept", "--yes"}, "--kept");
  expect_usage_error({"dead", "retry", kStream, kCharge, "--kept"}, "--kept");
  EXPECT_EQ(scalar<int64_t>(db_.url(), "SELECT count(*) FROM " + exceptions_ +
                                           " WHERE status = 'parked' AND message_id = 9"),
            1);
}

// `dead discard --kept` (docs/tutorial.md#versions-a-group-does-not-accept-yet): only kept rows,
// only when named (ids, a filter or --all), audited; an id that is a dead letter, unknown, or no
// longer kept (a host released it and runs it) is refused with exit 65 saying which, and changes
// nothing.
TEST_F(CliDead, KeptMessagesAreDiscardedOnlyWhenNamedAndEachRefusalSaysWhy) {
  for (int id : {9, 10, 11, 12}) {
    query(db_.url(), "INSERT INTO " + exceptions_ +
                         " (group_id, message_id, status, attempts, can_run_after, last_error, "
                         "payload, schema_version) SELECT g.id, " +
                         std::to_string(id) +
                         ", 'parked', 0, 'infinity', 'schema version 2 is not accepted', '{}', 2 "
                         "FROM sqlstreams.groups g WHERE g.name = 'charge-cards'");
  }
  auto kept = [&] {
    return scalar<int64_t>(db_.url(),
                           "SELECT count(*) FROM " + exceptions_ + " WHERE status = 'parked'");
  };
  auto refused = [&](const std::vector<std::string>& args, int exit, const std::string& expect) {
    auto [code, out] = cli(args, db_.url());
    EXPECT_EQ(code, exit) << out;
    EXPECT_NE(out.find(expect), std::string::npos) << out;
    EXPECT_EQ(kept(), 4) << out;
    EXPECT_EQ(dead(), 4) << out;
  };
  refused({"dead", "discard", kStream, kCharge, "--kept", "--id", "2", "--yes"}, 65,
          "message 2 of payments.requested/charge-cards is a dead letter, not a kept message");
  refused({"dead", "discard", kStream, kCharge, "--kept", "--id", "77", "--yes"}, 65,
          "message 77 of payments.requested/charge-cards is not kept: the group has no "
          "exception row for it");
  refused({"dead", "discard", kStream, kCharge, "--kept", "--id", "9", "--all", "--yes"}, 64,
          "give filters or --all, not both");
  refused({"dead", "discard", kStream, kCharge, "--kept", "--id", "-9", "--yes"}, 64,
          "--id: message ids are >= 0");
  // A host released 10 (the group accepts version 2 now) and claimed it.
  query(db_.url(), "UPDATE " + exceptions_ +
                       " SET status = 'inflight', lease_token = gen_random_uuid(), "
                       "lease_expires_at = now() + interval '1 minute' WHERE message_id = 10");
  auto [code, out] =
      cli({"dead", "discard", kStream, kCharge, "--kept", "--id", "10", "--yes"}, db_.url());
  EXPECT_EQ(code, 65) << out;
  EXPECT_NE(out.find("is no longer kept (status inflight)"), std::string::npos) << out;
  EXPECT_EQ(
      scalar<int64_t>(db_.url(), "SELECT count(*) FROM " + exceptions_ + " WHERE message_id = 10"),
      1);

  auto [code2, out2] =
      cli({"dead", "discard", kStream, kCharge, "--kept", "--id", "9", "--yes"}, db_.url());
  EXPECT_EQ(code2, 0) << out2;
  EXPECT_NE(out2.find("discarded 1 kept message(s) of payments.requested/charge-cards"),
            std::string::npos)
      << out2;
  auto [code3, out3] =
      cli({"dead", "discard", kStream, kCharge, "--kept", "--all", "--yes"}, db_.url());
  EXPECT_EQ(code3, 0) << out3;
  EXPECT_NE(out3.find("discarded 2 kept message(s)"), std::string::npos) << out3;
  EXPECT_EQ(kept(), 0);
  EXPECT_EQ(dead(), 4) << "a dead letter went with the kept messages";
  EXPECT_EQ(scalar<int64_t>(db_.url(),
                            "SELECT count(*) FROM " +
                                testing::stream_family(db_.url(), kStream).deliveries +
                                " WHERE outcome = 'operator-discard' AND error = 'kept message "
                                "discarded' AND host LIKE 'cli:%' AND message_id IN (9, 11, 12)"),
            3);
}

}  // namespace
}  // namespace sqlstreams::e2e
