#include <spdlog/spdlog.h>

#include <cstdlib>

#include "cli/commands.hpp"
#include "common/errors.hpp"
#include "store/migrate.hpp"

namespace sqlstreams::cli {

void DatabaseFlags::add_to(CLI::App* cmd, bool config_required) {
  auto* opt = cmd->add_option("-c,--config", config_file, "TOML configuration file");
  if (config_required) opt->required();
  opt->check(CLI::ExistingFile);
  cmd->add_option("--database-url", url,
                  "PostgreSQL URL (default: $SQLSTREAMS_DATABASE_URL, then database.url_file)");
  cmd->add_option("--schema", schema, "schema holding SQLStreams' tables (default: sqlstreams)");
}

std::optional<config::Config> maybe_load(const std::string& file) {
  if (file.empty()) return std::nullopt;
  return config::load_config(file);
}

store::SessionOptions DatabaseFlags::resolve(const std::optional<config::Config>& config) const {
  store::SessionOptions o;
  if (!url.empty()) {
    o.url = url;
  } else if (config) {
    o.url = config::resolve_database_url(*config);
  } else if (const char* env = std::getenv("SQLSTREAMS_DATABASE_URL"); env && *env) {
    o.url = env;
  } else {
    throw ControlPlaneError(ExitCode::kUsage, "no database given",
                            "pass --database-url, set SQLSTREAMS_DATABASE_URL, or pass --config "
                            "with database.url_file");
  }
  if (!schema.empty()) {
    o.schema = schema;
  } else if (config) {
    o.schema = config->database.schema;
  }
  if (config) o.connect_timeout = config->database.connect_timeout;
  return o;
}

void declare_all(store::Session& session, const config::Config& config) {
  for (const auto& s : config.streams) {
    store::StreamSpec spec{s.name,        s.partition_size,    s.retention,
                           s.allow_drop_past_committed, s.max_payload_bytes, s.notify};
    auto declared = store::declare_stream(session, spec);
    if (declared.created) {
      spdlog::info("stream-created stream={} id={} partition_size={}", s.name,
                   declared.stream.id, s.partition_size);
    }
  }
  for (const auto& g : config.groups) {
    auto stream = store::find_stream(session, g.stream);
    if (!stream) {
      throw ControlPlaneError(ExitCode::kDatabase, "stream '" + g.stream + "' vanished while declaring");
    }
    auto declared = store::declare_group(
        session, *stream, g.name,
        g.start == config::GroupStart::kHead ? store::StartAt::kHead : store::StartAt::kBeginning);
    if (declared.created) {
      spdlog::info("group-created stream={} group={} id={} start={}", g.stream, g.name,
                   declared.group.id, declared.start_position);
    }
  }
}

void register_migrate(CLI::App& app, Action& action) {
  auto* cmd = app.add_subcommand("migrate", "Apply pending schema migrations (safe to run from "
                                            "several hosts at once)");
  auto flags = std::make_shared<DatabaseFlags>();
  auto check = std::make_shared<bool>(false);
  flags->add_to(cmd, false);
  cmd->add_flag("--check", *check, "only report; exit 4 when migrations are pending");
  cmd->callback([&action, flags, check] {
    action = [flags, check] {
      auto config = maybe_load(flags->config_file);
      store::Session session(flags->resolve(config));
      if (*check) {
        auto st = store::migration_status(session);
        std::printf("database version %d, binary knows %d, %zu pending\n", st.database_version,
                    st.known_version, st.pending.size());
        return st.pending.empty() ? 0 : static_cast<int>(ExitCode::kDatabase);
      }
      auto applied = store::migrate(session);
      if (applied.empty()) {
        std::printf("schema %s is up to date\n", session.options().schema.c_str());
      }
      for (const auto& f : applied) std::printf("applied %s\n", f.c_str());
      return 0;
    };
  });
}

void register_declare(CLI::App& app, Action& action) {
  auto* cmd = app.add_subcommand(
      "declare", "Migrate, then create the config's streams and groups (idempotent; never moves "
                 "a cursor)");
  auto flags = std::make_shared<DatabaseFlags>();
  flags->add_to(cmd, true);
  cmd->callback([&action, flags] {
    action = [flags] {
      auto config = maybe_load(flags->config_file);
      store::Session session(flags->resolve(config));
      store::migrate(session);
      declare_all(session, *config);
      std::printf("declared %zu stream(s) and %zu group(s)\n", config->streams.size(),
                  config->groups.size());
      return 0;
    };
  });
}

}  // namespace sqlstreams::cli
