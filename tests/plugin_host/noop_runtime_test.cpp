// Runtime test of plugins/noop: the real noop.so through PluginRegistry.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "test_support.hpp"

namespace {

using plugin_host_test::kPluginDir;
using plugin_host_test::Message;
using sqlstreams::plugin_host::OutcomeKind;
using sqlstreams::plugin_host::PluginLoadError;
using sqlstreams::plugin_host::PluginRegistry;

TEST(Noop, ReturnsOkForAnyPayloadWithoutDecoding) {
  PluginRegistry registry(kPluginDir);
  const auto& info = registry.load("noop.so");
  EXPECT_EQ(info.name, "noop");
  EXPECT_EQ(info.handlers, std::vector<std::string>{"noop"});
  auto h = registry.create("noop.so", "noop", "{}", "bench", "noop");
  EXPECT_TRUE(h->concurrent());
  EXPECT_EQ(h->handle(Message{.payload = "not even json"}.view()).kind, OutcomeKind::kOk);
  EXPECT_EQ(h->handle(Message{.payload = ""}.view()).kind, OutcomeKind::kOk);
}

TEST(Noop, RecordsWhenAsked) {
  const auto path = std::filesystem::temp_directory_path() /
                    ("sqlstreams-noop-" + std::to_string(::getpid()) + ".txt");
  std::filesystem::remove(path);
  {
    PluginRegistry registry(kPluginDir);
    auto h = registry.create("noop.so", "noop", R"({"record_file": ")" + path.string() + R"("})",
                             "bench", "noop");
    h->handle(Message{.payload = "{}", .attempt = 1, .id = 5, .group = "noop"}.view());
    h->handle(Message{.payload = "{}", .attempt = 2, .id = 6, .group = "noop"}.view());
  }
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_EQ(text.str(), "noop 5 1 ok\nnoop 6 2 ok\n");
  std::filesystem::remove(path);
}

TEST(Noop, RejectsUnknownConfig) {
  PluginRegistry registry(kPluginDir);
  EXPECT_THROW(registry.validate("noop.so", "noop", R"({"sleep": 1})"), PluginLoadError);
}

}  // namespace
