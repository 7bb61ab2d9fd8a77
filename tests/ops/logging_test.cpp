// ops/logging: every JSON line is one valid JSON object with the event name and the leading
// key=value pairs as fields, the whole message kept; invalid UTF-8 and control characters do
// not break the line. Under journald (JOURNAL_STREAM names stderr) each line, text or JSON,
// starts with its syslog priority "<N>", and what follows is the line as without it.
#include "ops/logging.hpp"

#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <utility>
#include <vector>

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
  // A plugin error carrying producer text (docs/operating/security.md#logs-and-http): it tried
  // to rewrite stream and group.
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

TEST(JournalStream, MatchesOnlyTheDeviceAndInodeItNames) {
  EXPECT_TRUE(is_journal_stream("8:1234", 8, 1234));
  EXPECT_TRUE(is_journal_stream("0:18446744073709551615", 0, 18446744073709551615ull));
  EXPECT_FALSE(is_journal_stream("8:1234", 8, 1235)) << "another stream (a pipe, a file)";
  EXPECT_FALSE(is_journal_stream("9:1234", 8, 1234));
  for (const char* bad : {"", "8", "8:", ":1234", "8:1234x", "8:12 34", "-8:1234", "8;1234",
                          "8:1234:5", "0x8:1234", "8:18446744073709551616"}) {
    EXPECT_FALSE(is_journal_stream(bad, 8, 1234)) << bad;
  }
}

// Sets JOURNAL_STREAM for one test, and puts back what was there.
class ScopedJournalStream {
 public:
  explicit ScopedJournalStream(const std::string& value) {
    if (const char* v = ::getenv("JOURNAL_STREAM")) old_ = v;
    ::setenv("JOURNAL_STREAM", value.c_str(), 1);
  }
  ~ScopedJournalStream() {
    if (old_) {
      ::setenv("JOURNAL_STREAM", old_->c_str(), 1);
    } else {
      ::unsetenv("JOURNAL_STREAM");
    }
  }

 private:
  std::optional<std::string> old_;
};

TEST(JournalStream, StderrIsTheJournalOnlyWhenJournalStreamNamesIt) {
  struct stat st {};
  ASSERT_EQ(::fstat(STDERR_FILENO, &st), 0);
  const std::string self = std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino);
  {
    ScopedJournalStream env(self);
    EXPECT_TRUE(stderr_is_journal()) << self;
  }
  {
    ScopedJournalStream env(std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino + 1));
    EXPECT_FALSE(stderr_is_journal()) << "inherited by a process whose stderr is another file";
  }
  ScopedJournalStream env(self);
  ::unsetenv("JOURNAL_STREAM");
  EXPECT_FALSE(stderr_is_journal()) << "no JOURNAL_STREAM";
}

TEST(JournalStream, SyslogPrefixPerLevel) {
  EXPECT_EQ(syslog_prefix(spdlog::level::critical), "<2>");
  EXPECT_EQ(syslog_prefix(spdlog::level::err), "<3>");
  EXPECT_EQ(syslog_prefix(spdlog::level::warn), "<4>");
  EXPECT_EQ(syslog_prefix(spdlog::level::info), "<6>");
  EXPECT_EQ(syslog_prefix(spdlog::level::debug), "<7>");
  EXPECT_EQ(syslog_prefix(spdlog::level::trace), "<7>");
}

std::string log_one(std::unique_ptr<spdlog::formatter> formatter, spdlog::level::level_enum level,
                    const std::string& message) {
  std::ostringstream out;
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(out);
  spdlog::logger logger("test", sink);
  logger.set_level(spdlog::level::trace);
  logger.set_formatter(std::move(formatter));
  logger.log(level, "{}", message);
  return out.str();
}

TEST(JournalStream, EachLineStartsWithItsPriorityAndTheRestIsTheLineAsBefore) {
  const std::string message = "reload-rejected problems=1: the running configuration stays";
  for (auto [level, prefix] : std::vector<std::pair<spdlog::level::level_enum, std::string>>{
           {spdlog::level::err, "<3>"},
           {spdlog::level::warn, "<4>"},
           {spdlog::level::info, "<6>"},
           {spdlog::level::debug, "<7>"}}) {
    const std::string json = log_one(make_journal_formatter(make_json_formatter()), level, message);
    ASSERT_EQ(json.rfind(prefix + "{", 0), 0u) << json;
    EXPECT_EQ(json.find('\n'), json.size() - 1) << "one line: " << json;
    const auto parsed = nlohmann::json::parse(json.substr(prefix.size()));  // what journald keeps
    EXPECT_EQ(parsed["event"], "reload-rejected");
    EXPECT_EQ(parsed["msg"], message);

    const std::string text = log_one(make_journal_formatter(make_text_formatter()), level, message);
    ASSERT_EQ(text.rfind(prefix + "20", 0), 0u) << "then the timestamp: " << text;
    EXPECT_EQ(text.find('\n'), text.size() - 1) << "one line: " << text;
    EXPECT_EQ(text.find("<", 1), std::string::npos) << "one prefix: " << text;
    EXPECT_EQ(text.substr(text.size() - message.size() - 1), message + "\n") << text;
  }
  // clone() keeps the prefix (spdlog clones formatters per sink).
  auto cloned = make_journal_formatter(make_json_formatter())->clone();
  EXPECT_EQ(log_one(std::move(cloned), spdlog::level::warn, message).rfind("<4>{", 0), 0u);
}

}  // namespace
}  // namespace sqlstreams::ops
