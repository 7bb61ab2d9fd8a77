// The operator CLI end to end: exit codes (0 ok, 3 plugin, 65 bad input) and messages that say
// where the problem is — `config check`, `produce` from stdin and argument, `migrate` twice.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "e2e_support.hpp"

namespace sqlstreams::e2e {
namespace {

const std::string kPayment = R"({"order_id":"order-1","amount_cents":100,"currency":"EUR"})";

TEST(Cli, ConfigCheckAcceptsTheExampleConfig) {
  auto [code, out] =
      cli({"config", "check", std::string(SQLSTREAMS_SOURCE_DIR) + "/config/example.toml",
           "--plugin-dir", SQLSTREAMS_PLUGIN_DIR});
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find("OK"), std::string::npos) << out;
}

TEST(Cli, ConfigCheckNamesFileAndAvailableHandlersForUnknownHandler) {
  ScratchDir dir;
  HostOptions o;
  std::string text = host_config(o);
  auto pos = text.find("handler = \"charge-cards\"");
  ASSERT_NE(pos, std::string::npos);
  text.replace(pos, 24, "handler = \"refund-cards\"");
  auto file = dir.file("unknown-handler.toml");
  std::ofstream(file) << text;

  auto [code, out] = cli({"config", "check", file, "--plugin-dir", SQLSTREAMS_PLUGIN_DIR});
  EXPECT_EQ(code, 3) << out;
  EXPECT_NE(out.find(file), std::string::npos) << "names the config file:\n" << out;
  EXPECT_NE(out.find("refund-cards"), std::string::npos) << out;
  EXPECT_NE(out.find("charge-cards"), std::string::npos) << "lists the handlers:\n" << out;
  EXPECT_NE(out.find("audit-payments"), std::string::npos) << "lists the handlers:\n" << out;
}

class CliProduce : public ::testing::Test {
 protected:
  void SetUp() override {
    HostOptions o;
    o.audit_group = false;
    config_ = declare_host(dir_, db_.url(), o);
  }
  int64_t messages() const {
    return db_.scalar<int64_t>("SELECT count(*) FROM " +
                               testing::stream_family(db_.url(), kStream).messages);
  }
  testing::TestDatabase db_;
  ScratchDir dir_;
  std::string config_;
};

// `status` names each stream's id: the N of its tables (messages_N, cursors_N, ...).
TEST_F(CliProduce, StatusShowsEachStreamsId) {
  const std::string id = std::to_string(testing::stream_family(db_.url(), kStream).id);
  auto [code, out] = testing::run_command({SQLSTREAMS_BINARY, "status", "--config", config_},
                                          {{"SQLSTREAMS_DATABASE_URL", db_.url()}});
  ASSERT_EQ(code, 0) << out;
  EXPECT_NE(out.find("stream payments.requested (id " + id + ": messages_" + id + "): head 0"),
            std::string::npos)
      << out;
  auto [json_code, json_out] =
      testing::run_command({SQLSTREAMS_BINARY, "status", "--json", "--config", config_},
                           {{"SQLSTREAMS_DATABASE_URL", db_.url()}});
  ASSERT_EQ(json_code, 0) << json_out;
  EXPECT_EQ(nlohmann::json::parse(json_out)["streams"][0]["id"], std::stoll(id)) << json_out;
}

TEST_F(CliProduce, WritesEveryNdjsonLineFromStdin) {
  std::string ndjson;
  for (int i = 1; i <= 1200; ++i) {
    ndjson += R"({"order_id":"order-)" + std::to_string(i) +
              R"(","currency":"EUR"})"
              "\n";
  }
  auto [code, out] = cli({"produce", kStream, "--batch-size", "500"}, db_.url(), ndjson);
  EXPECT_EQ(code, 0) << out;
  EXPECT_EQ(messages(), 1200);
}

TEST_F(CliProduce, InvalidJsonOnStdinLine3Exits65AndWritesNothingOfTheBatch) {
  std::string ndjson = kPayment + "\n" + kPayment + "\n" +
                       R"({"order_id": "order-3",)"
                       "\n" +
                       kPayment + "\n";
  auto [code, out] = cli({"produce", kStream}, db_.url(), ndjson);
  EXPECT_EQ(code, 65) << out;
  EXPECT_NE(out.find("stdin:3"), std::string::npos) << out;
  EXPECT_EQ(messages(), 0) << "lines 1-2 share the failing batch and must not be written";
}

TEST_F(CliProduce, UnknownStreamExits65) {
  auto [code, out] = cli({"produce", "refunds.requested", kPayment}, db_.url());
  EXPECT_EQ(code, 65) << out;
  EXPECT_NE(out.find("refunds.requested"), std::string::npos) << out;
  EXPECT_EQ(messages(), 0);
}

TEST_F(CliProduce, NonObjectPayloadExits65) {
  auto [code, out] = cli({"produce", kStream, "[1, 2, 3]"}, db_.url());
  EXPECT_EQ(code, 65) << out;
  EXPECT_NE(out.find("object"), std::string::npos) << out;

  auto [code2, out2] = cli({"produce", kStream}, db_.url(), kPayment + "\n\"just a string\"\n");
  EXPECT_EQ(code2, 65) << out2;
  EXPECT_NE(out2.find("stdin:2"), std::string::npos) << out2;
  EXPECT_EQ(messages(), 0);
}

TEST_F(CliProduce, SingleArgumentPrintsTheNewId) {
  auto [code, out] = cli({"produce", kStream, kPayment}, db_.url());
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find("1"), std::string::npos) << out;
  EXPECT_EQ(messages(), 1);
}

// --idempotency-key K (docs/operating/idempotent-produce.md): line N of stdin gets the key K:N, the
// argument the key K; the same command on the same input again writes nothing (the argument form
// prints the first id again); another key writes; bad keys exit 65 before anything is written.
TEST_F(CliProduce, TheSameCommandWithTheSameIdempotencyKeyWritesOnce) {
  const std::string ndjson = kPayment + "\n" + kPayment + "\n\n" + kPayment + "\n";
  for (int i = 0; i < 2; ++i) {
    auto [code, out] =
        cli({"produce", kStream, "--idempotency-key", "import-7"}, db_.url(), ndjson);
    EXPECT_EQ(code, 0) << out;
    EXPECT_EQ(messages(), 3) << "run " << i + 1;
  }
  EXPECT_EQ(db_.scalar<std::string>("SELECT string_agg(key, ',' ORDER BY key) FROM "
                                    "sqlstreams.idempotency_keys"),
            "import-7:1,import-7:2,import-7:4");
  auto [c1, first] = cli({"produce", kStream, kPayment, "--idempotency-key", "one"}, db_.url());
  auto [c2, again] = cli({"produce", kStream, kPayment, "--idempotency-key", "one"}, db_.url());
  EXPECT_EQ(c1, 0) << first;
  EXPECT_EQ(c2, 0) << again;
  EXPECT_EQ(first, again);
  EXPECT_EQ(messages(), 4);
  auto [c3, other] = cli({"produce", kStream, "--idempotency-key", "import-8"}, db_.url(), ndjson);
  EXPECT_EQ(c3, 0) << other;
  EXPECT_EQ(messages(), 7);
  auto [c4, empty] = cli({"produce", kStream, kPayment, "--idempotency-key", ""}, db_.url());
  EXPECT_EQ(c4, 65) << empty;
  EXPECT_NE(empty.find("must not be empty"), std::string::npos) << empty;
  auto [c5, huge] =
      cli({"produce", kStream, "--idempotency-key", std::string(254, 'k')}, db_.url(), ndjson);
  EXPECT_EQ(c5, 65) << huge;
  EXPECT_NE(huge.find("stdin:1: idempotency_key of 256 bytes exceeds the limit of 255 bytes"),
            std::string::npos)
      << huge;
  EXPECT_EQ(messages(), 7);
}

TEST(Cli, MigrateTwiceSaysUpToDateTheSecondTime) {
  testing::TestDatabase db;
  auto [code0, out0] = cli({"migrate", "--check", "--database-url", db.url()});
  EXPECT_EQ(code0, 4) << "pending migrations:\n" << out0;
  auto [code1, out1] = cli({"migrate", "--database-url", db.url()});
  EXPECT_EQ(code1, 0) << out1;
  EXPECT_NE(out1.find("applied"), std::string::npos) << out1;
  auto [code2, out2] = cli({"migrate", "--database-url", db.url()});
  EXPECT_EQ(code2, 0) << out2;
  EXPECT_NE(out2.find("up to date"), std::string::npos) << out2;
  auto [code3, out3] = cli({"migrate", "--check", "--database-url", db.url()});
  EXPECT_EQ(code3, 0) << out3;
}

}  // namespace
}  // namespace sqlstreams::e2e
