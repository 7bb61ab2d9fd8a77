// `sqlstreams config check FILE`: parse and validate, load every plugin, call each handler's
// validate() with its [groups.config] and check its schema_versions against the version the
// handler declares (each plugin is loaded first in a throwaway child: a constructor that crashes
// is refused, runtime/plugin_host/README.md#loading-step-by-step); parse (never print, never
// connect to) the database URL it would use; start nothing, write nothing. Every group's problem is
// reported at once (cli/group_plugins). Exit 0, 2 (config, including a [groups.config] a handler
// rejects) or 3 (plugin).
#include <fmt/format.h>

#include <cstdlib>

#include "cli/commands.hpp"
#include "cli/group_plugins.hpp"
#include "common/errors.hpp"
#include "plugin_host/plugin_host.hpp"

namespace sqlstreams::cli {
namespace {

// The URL the host would use, parsed but not connected to: SQLSTREAMS_DATABASE_URL when set,
// else database.url_file when that file exists (a config may be checked where its secrets are
// not installed). Never prints the URL.
void check_database_url(const config::Config& config) {
  const char* env = std::getenv("SQLSTREAMS_DATABASE_URL");
  std::error_code ec;
  if (env && *env) {
    check_conninfo(env, "SQLSTREAMS_DATABASE_URL", ExitCode::kUsage);
  } else if (config.database.url_file &&
             std::filesystem::exists(config::url_file_path(config), ec)) {
    check_conninfo(config::resolve_database_url(config),
                   config.path.string() + ": database.url_file (first line of " +
                       config::url_file_path(config).string() + ")",
                   ExitCode::kConfig);
  }
}

int check(const std::string& file, const std::string& plugin_dir_override) {
  config::Config config = config::load_config(file);  // ConfigError → exit 2 in main
  check_database_url(config);
  std::filesystem::path plugin_dir = plugin_dir_override.empty()
                                         ? config.plugin_dir()
                                         : std::filesystem::path(plugin_dir_override);
  plugin_host::PluginRegistry registry(plugin_dir);
  registry.set_load_probe(plugin_host::LoadProbe{"/proc/self/exe"});  // constructors run there
  check_group_plugins(registry, config);  // throws GroupProblems (exit 2 or 3) naming each
  std::printf("OK: %s: %zu stream(s), %zu group(s), plugins from %s\n", file.c_str(),
              config.streams.size(), config.groups.size(), plugin_dir.c_str());
  return 0;
}

}  // namespace

void register_config(CLI::App& app, Action& action) {
  auto* cmd = app.add_subcommand("config", "Configuration tools");
  cmd->require_subcommand(1);
  auto* chk = cmd->add_subcommand("check", "Validate a config file and its plugins; start nothing");
  auto file = std::make_shared<std::string>();
  auto plugin_dir = std::make_shared<std::string>();
  chk->add_option("file", *file, "TOML configuration file")->required();
  chk->add_option("--plugin-dir", *plugin_dir, "override host.plugin_dir");
  chk->callback([&action, file, plugin_dir] {
    action = [file, plugin_dir] { return check(*file, *plugin_dir); };
  });
  auto* schema = cmd->add_subcommand("schema", "Print every option as a Markdown table");
  schema->callback([&action] {
    action = [] {
      std::printf("%s", config::config_schema_markdown().c_str());
      return 0;
    };
  });
}

}  // namespace sqlstreams::cli
