// cli — the `sqlstreams` executable's subcommands. Each register_* adds one subcommand to the
// CLI11 app and, when parsed, stores the action to run in `action` (main runs it inside the one
// control-plane try/catch that maps errors to exit codes, docs/design.md#errors-and-trust).
// Threading: main thread only (run starts the pipelines).
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <optional>
#include <string>

#include "common/errors.hpp"
#include "config/config.hpp"
#include "store/connection/session.hpp"
#include "store/schema/catalog.hpp"

namespace sqlstreams::cli {

using Action = std::function<int()>;

// Where the database is: --database-url > SQLSTREAMS_DATABASE_URL > the config's url_file.
struct DatabaseFlags {
  std::string config_file;
  std::string url;
  std::string schema;
  std::string lock_timeout;  // --lock-timeout (migrate, declare)
  void add_to(CLI::App* cmd, bool config_required);
  // Validates the URL (parsed, never printed) and the schema name (config's identifier rule).
  store::SessionOptions resolve(const std::optional<config::Config>& config) const;
  // --lock-timeout > database.migrate_lock_timeout > store::kDefaultMigrateLockTimeout.
  Millis migrate_lock_timeout(const std::optional<config::Config>& config) const;
};
void add_lock_timeout(CLI::App* cmd, DatabaseFlags& flags);

// Parses `url` (store::parse_conninfo) without connecting; throws ControlPlaneError(code)
// prefixed with `source` ("--database-url", ...). Never prints the URL.
void check_conninfo(const std::string& url, const std::string& source, ExitCode code);
// JSON-style quoted text with control characters escaped, for echoing operator input.
std::string printable(std::string_view text);

// Loads the config (throws config::ConfigError) when a file was given.
std::optional<config::Config> maybe_load(const std::string& file);

void register_migrate(CLI::App& app, Action& action);
void register_declare(CLI::App& app, Action& action);
void register_produce(CLI::App& app, Action& action);
void register_config(CLI::App& app, Action& action);
void register_run(CLI::App& app, Action& action);
void register_dead(CLI::App& app, Action& action);
void register_group(CLI::App& app, Action& action);  // rewind (cmd_dead.cpp), then:
// `group pause|resume|drop GROUP --stream S` under the `group` subcommand (cmd_group.cpp).
void add_group_lifecycle(CLI::App* group, Action& action);
// "cli:<os user>@<machine>": who acts, as written into audit rows.
std::string operator_actor();
void register_status(CLI::App& app, Action& action);
void register_stream(CLI::App& app, Action& action);  // `stream set` (cmd_stream.cpp)
void register_plugin(CLI::App& app, Action& action);  // cmd_plugin.cpp

}  // namespace sqlstreams::cli
