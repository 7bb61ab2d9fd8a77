// A plugin's own log lines (sqlstreams_host_log_fn) carry plugin, handler, stream and group as
// structured fields: JSON lines get them as fields (event "plugin-log"), text lines as
// key=value, both escaped like every other line (ops/logging). c_ok.so's c-echo logs
// "c-echo created" from create().
#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <nlohmann/json.hpp>
#include <sstream>

#include "ops/logging.hpp"
#include "test_support.hpp"

namespace {

using plugin_host_test::kFixtureDir;
using sqlstreams::plugin_host::PluginRegistry;

// Runs `fn` with the default logger writing into a string through `formatter`.
template <class Fn>
std::string capture(std::unique_ptr<spdlog::formatter> formatter, Fn&& fn) {
  std::ostringstream out;
  auto previous = spdlog::default_logger();
  auto logger = std::make_shared<spdlog::logger>(
      "capture", std::make_shared<spdlog::sinks::ostream_sink_mt>(out));
  logger->set_formatter(std::move(formatter));
  spdlog::set_default_logger(logger);
  fn();
  spdlog::set_default_logger(previous);
  return out.str();
}

TEST(PluginLog, JsonLinesCarryPluginHandlerStreamAndGroupAsFields) {
  PluginRegistry registry(kFixtureDir);
  const std::string out = capture(sqlstreams::ops::make_json_formatter(), [&] {
    auto h = registry.create("c_ok.so", "c-echo", "{}", "payments.requested", "charge-cards");
  });
  ASSERT_EQ(out.find('\n'), out.size() - 1) << out;
  const auto line = nlohmann::json::parse(out);
  EXPECT_EQ(line["event"], "plugin-log");
  EXPECT_EQ(line["plugin"], "c-fixture");
  EXPECT_EQ(line["handler"], "c-echo");
  EXPECT_EQ(line["stream"], "payments.requested");
  EXPECT_EQ(line["group"], "charge-cards");
  EXPECT_EQ(line["level"], "info");
  EXPECT_EQ(line["msg"],
            "plugin-log plugin=c-fixture handler=c-echo stream=payments.requested "
            "group=charge-cards: c-echo created");
}

TEST(PluginLog, TextLinesKeepKeyValuePairsAndEscapeOddNames) {
  PluginRegistry registry(kFixtureDir);
  // Names the config grammar would refuse still cannot forge a field or a line.
  const std::string out = capture(sqlstreams::ops::make_text_formatter(), [&] {
    auto h = registry.create("c_ok.so", "c-echo", "{}", "s", "g \"x\" y=1\nforged");
  });
  EXPECT_NE(out.find("plugin-log plugin=c-fixture handler=c-echo stream=s group=\"g 'x' y=1"),
            std::string::npos)
      << out;
  EXPECT_EQ(out.find('\n'), out.size() - 1) << "one line:\n" << out;
  EXPECT_NE(out.find(": c-echo created"), std::string::npos) << out;
  const auto fields = sqlstreams::ops::parse_log_message(
      "plugin-log plugin=c-fixture handler=c-echo stream=s group=\"g 'x' y=1\": text");
  ASSERT_EQ(fields.fields.size(), 4u);
  EXPECT_EQ(fields.fields[3].second, "g 'x' y=1");
}

}  // namespace
