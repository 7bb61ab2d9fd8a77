// Hostile input to the CLI (docs/reference/cli.md#commands,
// docs/operating/security.md#logs-and-http), fed exactly as found: `sqlstreams produce` with a
// 100,000-deep document, a raw NUL byte, huge numbers, payloads whose size only the stored (jsonb)
// measure decides, an oversized key — each a located `stdin:N:` error, exit 65, and nothing
// produced; and `dead list` / `dead show` printing forged lines and terminal escape sequences as
// visible escapes.
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <algorithm>
#include <fstream>

#include "e2e_support.hpp"

namespace sqlstreams::e2e {
namespace {

const std::string kPayment = R"({"order_id":"order-1","amount_cents":100})";

class CliHostileInput : public ::testing::Test {
 protected:
  void SetUp() override {
    HostOptions o;
    o.audit_group = false;
    config_ = dir_.file("host.toml");
    std::ofstream(config_) << host_config(o) << "\n[[streams]]\nname = \"tiny\"\n"
                           << "max_payload_bytes = 64\n";
    declare(db_.url(), config_);
    payments_ = testing::stream_family(db_, kStream);
    tiny_ = testing::stream_family(db_, "tiny");
  }
  int64_t messages() const {
    return db_.scalar<int64_t>("SELECT count(*) FROM " + payments_.messages) +
           db_.scalar<int64_t>("SELECT count(*) FROM " + tiny_.messages);
  }
  testing::TestDatabase db_;
  ScratchDir dir_;
  std::string config_;
  testing::StreamFamily payments_, tiny_;  // the tables of kStream and of "tiny"
};

TEST_F(CliHostileInput, AHundredThousandDeepDocumentIsALocatedErrorNotACrash) {
  const std::string deep =
      kPayment + "\n" + "{\"a\":" + std::string(100'000, '[') + std::string(100'000, ']') + "}\n";
  auto [code, out] = cli({"produce", kStream}, db_.url(), deep);
  EXPECT_EQ(code, 65) << tail(out);
  EXPECT_NE(out.find("stdin:2: payload nested deeper than 256 levels"), std::string::npos)
      << tail(out);
  EXPECT_EQ(messages(), 0);
  // The same as the argument (50,000 deep: one argument is limited to 128 KiB by the kernel).
  auto [code2, out2] = cli(
      {"produce", kStream, "{\"a\":" + std::string(50'000, '[') + std::string(50'000, ']') + "}"},
      db_.url());
  EXPECT_EQ(code2, 65) << tail(out2);
  EXPECT_NE(out2.find("argument: payload nested deeper"), std::string::npos) << tail(out2);
}

TEST_F(CliHostileInput, ARawNulByteIsAnErrorNotASilentlyShortenedLine) {
  std::string input = kPayment + "\n" + std::string("{\"a\":1}\0{\"b\":2}", 15) + "\n";
  auto [code, out] = cli({"produce", kStream}, db_.url(), input);
  EXPECT_EQ(code, 65) << out;
  EXPECT_NE(out.find("stdin:2: NUL byte at column 8"), std::string::npos) << out;
  EXPECT_EQ(messages(), 0);
  // An escaped NUL inside a string cannot be stored by jsonb either: refused up front.
  auto [code2, out2] = cli({"produce", kStream}, db_.url(), "{\"a\":\"x\\u0000y\"}\n");
  EXPECT_EQ(code2, 65) << out2;
  EXPECT_NE(out2.find("stdin:1: a string contains \\u0000"), std::string::npos) << out2;
}

TEST_F(CliHostileInput, LargeNumbersAreStoredExactlyAsSent) {
  auto [code, out] = cli({"produce", kStream}, db_.url(),
                         R"({"n":12345678901234567890123,"f":0.1000000000000000055511})"
                         "\n");
  ASSERT_EQ(code, 0) << out;
  auto r = db_.sql("SELECT payload->>'n', payload->>'f' FROM " + payments_.messages);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0][0].as<std::string>(), "12345678901234567890123");
  EXPECT_EQ(r[0][1].as<std::string>(), "0.1000000000000000055511");
}

TEST_F(CliHostileInput, TheSizeCheckIsTheSqlFunctionsOwn) {
  // 61 bytes as sent (and as a compact re-serialization), 80 as stored by jsonb: over 64.
  const std::string compact = R"({"a":1,"b":2,"c":3,"d":4,"e":5,"f":6,"g":7,"h":8,"i":9,"j":0})";
  ASSERT_EQ(compact.size(), 61u);
  // 79 bytes as sent, 56 as stored: under 64.
  const std::string spaced =
      R"({  "a" : 1 ,  "b" : 2 ,  "c" : 3 ,  "d" : 4 ,  "e" : 5 ,  "f" : 6 ,  "g" : 7  })";
  EXPECT_THROW(db_.sql("SELECT sqlstreams.produce('tiny', '" + compact + "')"), pqxx::sql_error);
  db_.sql("SELECT sqlstreams.produce('tiny', '" + spaced + "')");
  auto [code, out] = cli({"produce", "tiny"}, db_.url(), spaced + "\n" + compact + "\n");
  EXPECT_EQ(code, 65) << out;
  EXPECT_NE(out.find("stdin:2: payload of 80 bytes exceeds max_payload_bytes 64"),
            std::string::npos)
      << out;
  EXPECT_EQ(out.find("stdin:1"), std::string::npos) << "line 1 fits as stored:\n" << out;
  EXPECT_EQ(messages(), 1) << "only the direct produce() call above";
  auto [code2, out2] = cli({"produce", "tiny"}, db_.url(), spaced + "\n");
  EXPECT_EQ(code2, 0) << out2;
}

TEST_F(CliHostileInput, AnOversizeLineIsRefusedWhileItIsReadNotBufferedAndSent) {
  // 64 MiB of valid JSON on one line, for a stream whose payloads are at most 1 MiB: the old
  // code buffered it (and its copies) and sent it to PostgreSQL to be measured. Written to a
  // file in chunks, so this process stays small (a spawned child's peak RSS starts from its
  // parent's: posix_spawn shares the parent's memory until the exec).
  const std::string file = dir_.file("huge.ndjson");
  const size_t body = 64u << 20;
  {
    std::ofstream out(file, std::ios::binary);
    out << kPayment << "\n{\"a\":\"";
    const std::string chunk(1u << 20, 'x');
    for (size_t i = 0; i < body / chunk.size(); ++i) out << chunk;
    out << "\"}\n" << kPayment << "\n";
  }
  const size_t line = body + 8;  // {"a":"…"}
  struct rusage self {};
  ASSERT_EQ(getrusage(RUSAGE_SELF, &self), 0);
  auto [code, out] = testing::run_command(
      {"/bin/sh", "-c", "exec \"$0\" produce \"$1\" < \"$2\"", SQLSTREAMS_BINARY, kStream, file},
      {{"SQLSTREAMS_DATABASE_URL", db_.url()}});
  EXPECT_EQ(code, 65) << tail(out);
  EXPECT_NE(out.find("stdin:2: line of " + std::to_string(line) +
                     " bytes refused while reading: more than twice max_payload_bytes 1048576"),
            std::string::npos)
      << tail(out);
  EXPECT_EQ(messages(), 0);
  struct rusage children {};
  ASSERT_EQ(getrusage(RUSAGE_CHILDREN, &children), 0);
  // The CLI alone peaks at ~65 MB under ASan here; holding the line took it past 300 MB.
  EXPECT_LT(children.ru_maxrss, std::max<long>(self.ru_maxrss, 96 * 1024) + 32 * 1024)
      << "KiB (this process: " << self.ru_maxrss << "): the CLI held the oversize line";
}

TEST_F(CliHostileInput, AnEmptyJsonArgumentIsRefusedNotTakenAsReadStdin) {
  auto [code, out] = cli({"produce", kStream, ""}, db_.url(), kPayment + "\n");
  EXPECT_EQ(code, 65) << out;
  EXPECT_NE(out.find("the JSON argument is empty"), std::string::npos) << out;
  EXPECT_EQ(messages(), 0);
}

TEST_F(CliHostileInput, ABadLineLateInTheInputLeavesNothingProduced) {
  std::string input;
  for (int i = 0; i < 7; ++i) input += kPayment + "\n";
  input += "{\"broken\":\n";
  auto [code, out] = cli({"produce", kStream, "--batch-size", "2"}, db_.url(), input);
  EXPECT_EQ(code, 65) << out;
  EXPECT_NE(out.find("stdin:8: invalid JSON"), std::string::npos) << out;
  EXPECT_EQ(messages(), 0) << "batches before the bad line must not be committed either";
}

TEST_F(CliHostileInput, AKeyOverTheLimitIsRefusedBeforeSending) {
  auto [code, out] =
      cli({"produce", kStream, "--key", std::string(1025, 'k'), kPayment}, db_.url());
  EXPECT_EQ(code, 65) << out;
  EXPECT_NE(out.find("--key: message_key of 1025 bytes exceeds the limit of 1024 bytes"),
            std::string::npos)
      << out;
  EXPECT_EQ(messages(), 0);
}

TEST_F(CliHostileInput, DeadListAndShowEscapeForgedLinesAndTerminalSequences) {
  db_.sql(
      "SELECT sqlstreams.produce('payments.requested', '{\"note\":\"\\u001b]0;owned\\u0007\"}')");
  db_.sql("INSERT INTO " + payments_.exceptions +
          " (group_id, message_id, status, attempts, can_run_after, last_error, payload) SELECT "
          "g.id, 1, 'dead', 1, now(), " +
          db_.scalar<std::string>("SELECT quote_literal(E'card declined\\n2026-11-30 10:00:00.000 "
                                  "info  host-ready: forged \\x1b[2J\\x1b[31m \\u009b6n')") +
          ", m.payload FROM sqlstreams.groups g, " + payments_.messages +
          " m WHERE g.name = 'charge-cards'");
  auto [code, out] = cli({"dead", "list", kStream, kCharge}, db_.url());
  ASSERT_EQ(code, 0) << out;
  EXPECT_EQ(out.find('\x1b'), std::string::npos) << "no raw ESC may reach the terminal";
  EXPECT_EQ(out.find("\xc2\x9b"), std::string::npos) << "no raw C1 CSI either";
  EXPECT_EQ(count_of(out, "\n"), 3) << "header, one row, summary:\n" << out;
  EXPECT_NE(out.find("card declined\\n2026-11-30 10:00:00.000 info  host-ready: forged "
                     "\\x1b[2J\\x1b[31m \\u009b6n"),
            std::string::npos)
      << out;
  auto [code2, out2] = cli({"dead", "show", kStream, kCharge, "1"}, db_.url());
  ASSERT_EQ(code2, 0) << out2;
  EXPECT_EQ(out2.find('\x1b'), std::string::npos) << out2;
  EXPECT_NE(out2.find("last error: card declined\\n"), std::string::npos) << out2;
}

}  // namespace
}  // namespace sqlstreams::e2e
