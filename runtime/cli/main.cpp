// sqlstreams — the host daemon and operator CLI. One try/catch maps control-plane errors to
// exit codes: 2 config, 3 plugin load, 4 database/migrations, 64 usage, 65 bad data, 1 other.
// Crash handlers go in first (ops/crash_handler): a plugin fault names the message in flight,
// and an exit() the host did not decide on (a plugin's exit(0)) ends with status 70, not 0.
// The error lines start with "<3>" when stderr is journald's stream (ops/logging.hpp).
#include <CLI/CLI.hpp>
#include <cstdio>

#include "cli/commands.hpp"
#include "cli/group_plugins.hpp"
#include "common/errors.hpp"
#include "common/version.hpp"
#include "config/config.hpp"
#include "isolation/isolation.hpp"
#include "ops/crash_handler.hpp"
#include "ops/logging.hpp"
#include "plugin_host/load_probe.hpp"
#include "plugin_host/plugin_host.hpp"
#include "store/errors.hpp"

namespace {

// The error lines below, each with journald's error priority when stderr is the journal (a
// unit's start-up refused: `journalctl -p err` shows why; ops/logging.hpp).
void error_line(const std::string& line) {
  std::fprintf(stderr, "%s%s\n", sqlstreams::ops::stderr_is_journal() ? "<3>" : "", line.c_str());
}

int report(sqlstreams::ExitCode code, const std::string& message, const std::string& hint) {
  error_line("sqlstreams: " + message);
  if (!hint.empty()) error_line("  hint: " + hint);
  return static_cast<int>(code);
}

// Hidden: the child process of an `isolation = "process"` group (runtime/isolation/).
void register_handler_child(CLI::App& app, sqlstreams::cli::Action& action) {
  struct Flags {
    int fd = -1;
    int parent = 0;
    int image_fd = -1;  // the host's sealed plugin image (isolation/child_process.hpp)
    std::string label, log_level = "info", log_format = "auto";
  };
  auto flags = std::make_shared<Flags>();
  auto* cmd = app.add_subcommand("__handler-child", "")->group("");
  cmd->add_option("--fd", flags->fd)->required();
  cmd->add_option("--parent-pid", flags->parent)->required();
  cmd->add_option("--image-fd", flags->image_fd);
  cmd->add_option("--label", flags->label);  // names the group in `ps`
  cmd->add_option("--log-level", flags->log_level);
  cmd->add_option("--log-format", flags->log_format);
  cmd->callback([flags, &action] {
    action = [flags] {
      using sqlstreams::config::LogFormat;
      const LogFormat format = flags->log_format == "json"   ? LogFormat::kJson
                               : flags->log_format == "text" ? LogFormat::kText
                                                             : LogFormat::kAuto;
      sqlstreams::ops::setup_logging(flags->log_level, format);
      sqlstreams::ops::mark_handler_process();  // its fault line names the child, not the host
      return sqlstreams::isolation::run_handler_child(flags->fd, flags->parent, flags->image_fd);
    };
  });
}

// Hidden: the throwaway child that loads a new plugin image before a host maps it
// (plugin_host/load_probe.hpp): the sealed image at --image-fd, the answer to --answer-fd.
void register_plugin_probe(CLI::App& app, sqlstreams::cli::Action& action) {
  struct Flags {
    int image_fd = -1, answer_fd = -1, parent = 0;
    std::string file;
  };
  auto flags = std::make_shared<Flags>();
  auto* cmd = app.add_subcommand("__plugin-probe", "")->group("");
  cmd->add_option("--image-fd", flags->image_fd)->required();
  cmd->add_option("--answer-fd", flags->answer_fd)->required();
  cmd->add_option("--file", flags->file)->required();
  cmd->add_option("--parent-pid", flags->parent)->required();
  cmd->callback([flags, &action] {
    action = [flags]() -> int {
      sqlstreams::plugin_host::run_load_probe(flags->image_fd, flags->answer_fd, flags->file,
                                              flags->parent);
    };
  });
}

int run_cli(int argc, char** argv) {
  using namespace sqlstreams;
  CLI::App app{
      "SQLStreams worker runtime: streams, consumer groups and handler plugins on "
      "PostgreSQL"};
  app.set_version_flag("--version", std::string("sqlstreams ") + kVersion);
  app.require_subcommand(1);
  cli::Action action;
  cli::register_run(app, action);
  cli::register_migrate(app, action);
  cli::register_declare(app, action);
  cli::register_produce(app, action);
  cli::register_config(app, action);
  cli::register_dead(app, action);
  cli::register_group(app, action);
  cli::register_status(app, action);
  cli::register_stream(app, action);
  cli::register_plugin(app, action);
  register_handler_child(app, action);
  register_plugin_probe(app, action);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : static_cast<int>(ExitCode::kUsage);
  }
  try {
    return action ? action() : 0;
  } catch (const config::ConfigError& e) {
    for (const auto& p : e.problems()) error_line(p);
    return report(ExitCode::kConfig,
                  std::to_string(e.problems().size()) + " configuration problem(s)",
                  "fix the lines above; `sqlstreams config check FILE` re-checks without "
                  "starting anything");
  } catch (const cli::GroupProblems& e) {
    for (const auto& line : e.lines()) error_line(line);
    for (const auto& hint : e.hints()) error_line("  hint: " + hint);
    return report(e.code(), e.what(),
                  "fix the lines above; `sqlstreams config check FILE` re-checks without "
                  "starting anything");
  } catch (const plugin_host::PluginLoadError& e) {
    return report(ExitCode::kPlugin, e.what(), e.hint());
  } catch (const store::StoreError& e) {
    if (e.schema_missing()) {
      return report(ExitCode::kDatabase,
                    std::string("the database has no SQLStreams schema yet (") + e.what() + ")",
                    "run `sqlstreams migrate` (or `sqlstreams declare --config FILE`) first");
    }
    return report(ExitCode::kDatabase, e.what(),
                  e.kind() == store::StoreError::Kind::kConnection
                      ? "check that PostgreSQL is reachable and the URL is right"
                      : "");
  } catch (const ControlPlaneError& e) {
    return report(e.code(), e.what(), e.hint());
  } catch (const std::exception& e) {
    return report(ExitCode::kOther, e.what(), "");
  }
}

}  // namespace

int main(int argc, char** argv) {
  sqlstreams::ops::install_crash_handlers();
  const int code = run_cli(argc, argv);
  sqlstreams::ops::mark_deciding_to_exit();
  return code;
}
