// ops/logging: every JSON line is one valid JSON object with the event name and the leading
// key=value pairs as fields, the whole message kept; invalid UTF-8 and control characters do
// not break the line.
#include "ops/logging.hpp"

#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <nlohmann/json.hpp>
#include <sstream>

namespace sqlstreams::ops {
namespace {

nlohmann::json log_one_json(const std::string& message, spdlog::level::level_enum level) {
  std::ostringstream out;
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(out);
  spdlog::logger logger("test", sink);
  logger.set_formatter(make_json_formatter());
  logger.log(level, "{}", message);
  std::string line = out.str();
  EXPECT_EQ(line.back(), '\n');
  EXPECT_EQ(line.find('\n'), line.size() - 1) << "one line per message";
  return nlohmann::json::parse(line);  // throws (fails the test) when not valid JSON
}

nlohmann::json log_one_json_text(const std::string& message) {
  return log_one_json(message, spdlog::level::warn);
}

TEST(LogFields, EventAndLeadingPairs) {
  auto f = parse_log_message(
      "lease-lost stream=payments.requested group=charge-cards low=1 "
      "high=500: outcomes discarded");
  EXPECT_EQ(f.event, "lease-lost");
  ASSERT_EQ(f.fields.size(), 4u);
  EXPECT_EQ(f.fields[0], (std::pair<std::string, std::string>{"stream", "payments.requested"}));
  EXPECT_EQ(f.fields[1].second, "charge-cards");
  EXPECT_EQ(f.fields[3], (std::pair<std::string, std::string>{"high", "500"}));
}

TEST(LogFields, QuotedValuesKeepSpacesAndInnerQuotes) {
  auto f = parse_log_message("dead-lettered stream=s group=g message_id=4 attempts=1 error=" +
                             log_quoted("key \"currency\"x not found"));
  EXPECT_EQ(f.event, "dead-lettered");
  ASSERT_EQ(f.fields.size(), 5u);
  EXPECT_EQ(f.fields[2].second, "4");
  EXPECT_EQ(f.fields[4].second, "key \"currency\"x not found");
  auto g = parse_log_message("x-y a=\"one two\": rest b=1");
  ASSERT_EQ(g.fields.size(), 1u);
  EXPECT_EQ(g.fields[0].second, "one two");
}

TEST(LogFields, QuotedForeignTextCannotAddOrChangeFields) {
  // A plugin error carrying producer text (issue 27): it tried to rewrite stream and group.
  const std::string forged = "card \\\" declined\" stream=forged group=forged x=\"";
  const std::string message =
      "dead-lettered stream=s group=g message_id=4 attempts=1 error=" + log_quoted(forged);
  auto f = parse_log_message(message);
  ASSERT_EQ(f.fields.size(), 5u) << message;
  EXPECT_EQ(f.fields[0].second, "s");
  EXPECT_EQ(f.fields[1].second, "g");
  EXPECT_EQ(f.fields[4], (std::pair<std::string, std::string>{"error", forged}));
  auto j = log_one_json_text(message);
  EXPECT_EQ(j["stream"], "s");
  EXPECT_EQ(j["group"], "g");
  EXPECT_EQ(j["error"], forged);
  EXPECT_EQ(log_quoted("a\\b\"c"), "\"a\\\\b\\\"c\"");
}

TEST(JsonLog, ALaterDuplicateKeyNeverReplacesTheFirst) {
  auto j = log_one_json_text("dead-lettered stream=s group=g stream=forged group=forged");
  EXPECT_EQ(j["stream"], "s");
  EXPECT_EQ(j["group"], "g");
}

TEST(LogFields, FreeTextAfterAColonIsNotParsed) {
  auto f = parse_log_message("database-unavailable stream=s group=g kind=connection: x=1 y=2");
  ASSERT_EQ(f.fields.size(), 3u);
  EXPECT_EQ(f.fields[2].second, "connection");
  EXPECT_EQ(parse_log_message("host-stopped").event, "host-stopped");
  EXPECT_EQ(parse_log_message("reload-rejected: bad file").event, "reload-rejected");
  EXPECT_TRUE(parse_log_message("Some sentence").event.empty());
  EXPECT_TRUE(parse_log_message("").event.empty());
}

TEST(JsonLog, OneValidObjectPerLineWithStableFields) {
  auto j = log_one_json("range-quarantined stream=s group=g low=1 high=9 reclaims=3",
                        spdlog::level::warn);
  EXPECT_EQ(j["event"], "range-quarantined");
  EXPECT_EQ(j["stream"], "s");
  EXPECT_EQ(j["group"], "g");
  EXPECT_EQ(j["reclaims"], "3");
  EXPECT_EQ(j["level"], "warning");
  EXPECT_TRUE(j["pid"].is_number_integer());
  EXPECT_EQ(j["msg"], "range-quarantined stream=s group=g low=1 high=9 reclaims=3");
  std::string ts = j["ts"];
  EXPECT_EQ(ts.size(), 24u) << ts;  // 2026-11-29T20:25:58.123Z
  EXPECT_EQ(ts.back(), 'Z');
}

TEST(JsonLog, ControlCharactersAndInvalidUtf8StayValidJson) {
  auto j = log_one_json("handler-timeout error=\"a\tb\nc\x01\xff\xfe\"", spdlog::level::info);
  EXPECT_EQ(j["event"], "handler-timeout");
  std::string msg = j["msg"];
  EXPECT_NE(msg.find("a\tb\nc\x01"), std::string::npos);
}

TEST(JsonLog, ReservedNamesDoNotOverwriteTheEnvelope) {
  auto j = log_one_json("odd-event level=x msg=y pid=z", spdlog::level::info);
  EXPECT_EQ(j["level"], "info");
  EXPECT_EQ(j["level_"], "x");
  EXPECT_EQ(j["msg"], "odd-event level=x msg=y pid=z");
  EXPECT_EQ(j["msg_"], "y");
}

}  // namespace
}  // namespace sqlstreams::ops

namespace sqlstreams::ops {
namespace {

std::string log_one_text(const std::string& message) {
  std::ostringstream out;
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(out);
  spdlog::logger logger("test", sink);
  logger.set_formatter(make_text_formatter());
  logger.log(spdlog::level::warn, "{}", message);
  return out.str();
}

TEST(TextLog, AForgedNewlineInAPluginErrorStaysOnOneLine) {
  const std::string line = log_one_text(
      "dead-lettered group=charge-cards message_id=3: card declined\n"
      "2026-11-30 10:00:00.000 info  host-ready: forged");
  EXPECT_EQ(line.find('\n'), line.size() - 1) << "one line per message:\n" << line;
  EXPECT_NE(line.find("card declined\\n2026-11-30 10:00:00.000 info  host-ready: forged"),
            std::string::npos)
      << line;
  EXPECT_NE(line.find("warn"), std::string::npos) << "keeps timestamp and level: " << line;
}

TEST(TextLog, TerminalEscapeSequencesAndControlsAreShownNotSent) {
  const std::string line = log_one_text(
      "retry-failed: \x1b]0;owned\x07 \x1b[2J\x1b[31mred \xc2\x9b"
      "6n \x7f \r x");
  EXPECT_EQ(line.find('\x1b'), std::string::npos) << line;
  EXPECT_EQ(line.find('\x07'), std::string::npos) << line;
  EXPECT_EQ(line.find("\xc2\x9b"), std::string::npos) << line;
  EXPECT_EQ(line.find('\r'), std::string::npos) << line;
  EXPECT_NE(line.find("\\x1b]0;owned\\x07 \\x1b[2J\\x1b[31mred \\u009b6n \\x7f \\r x"),
            std::string::npos)
      << line;
}

TEST(TextLog, JsonLinesAreUnchangedByTheTextEscaping) {
  auto j = log_one_json("retry-failed: a\nb \x1b[31m", spdlog::level::info);
  EXPECT_EQ(j["msg"], "retry-failed: a\nb \x1b[31m");
}

}  // namespace
}  // namespace sqlstreams::ops
