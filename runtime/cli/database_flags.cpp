#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <cstdlib>

#include "cli/commands.hpp"
#include "common/errors.hpp"
#include "common/identifier.hpp"
#include "service/declare.hpp"
#include "store/connection/conninfo.hpp"
#include "store/schema/migrate.hpp"

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
  std::string source;  // where the URL came from, for errors (never the URL itself)
  ExitCode code = ExitCode::kUsage;
  if (!url.empty()) {
    o.url = url;
    source = "--database-url";
  } else if (const char* env = std::getenv("SQLSTREAMS_DATABASE_URL"); env && *env) {
    o.url = env;
    source = "SQLSTREAMS_DATABASE_URL";
  } else if (config) {
    o.url = config::resolve_database_url(*config);
    source = config->path.string() + ": database.url_file (first line of " +
             config::url_file_path(*config).string() + ")";
    code = ExitCode::kConfig;
  } else {
    throw ControlPlaneError(ExitCode::kUsage, "no database given",
                            "pass --database-url, set SQLSTREAMS_DATABASE_URL, or pass --config "
                            "with database.url_file");
  }
  check_conninfo(o.url, source, code);
  if (!schema.empty()) {
    if (!is_valid_identifier(schema)) {
      throw ControlPlaneError(
          ExitCode::kUsage,
          "--schema: " + std::string(kIdentifierProblem) + " (got " + printable(schema) + ")",
          "schema names match " + std::string(kIdentifierPattern));
    }
    o.schema = schema;
  } else if (config) {
    o.schema = config->database.schema;  // checked by the config's identifier rule
  }
  if (config) o.connect_timeout = config->database.connect_timeout;
  return o;
}

void add_lock_timeout(CLI::App* cmd, DatabaseFlags& flags) {
  cmd->add_option("--lock-timeout", flags.lock_timeout,
                  "wait this long for the migrations' advisory lock, then name its holder and "
                  "exit 4 (default: database.migrate_lock_timeout, else 60s)");
}

Millis DatabaseFlags::migrate_lock_timeout(const std::optional<config::Config>& config) const {
  if (lock_timeout.empty()) {
    return config ? config->database.migrate_lock_timeout : store::kDefaultMigrateLockTimeout;
  }
  std::string error;
  auto d = parse_duration(lock_timeout, &error);
  if (!d || *d < Millis(1) || *d > Millis(86'400'000)) {
    throw ControlPlaneError(ExitCode::kUsage,
                            "--lock-timeout: " + (d ? std::string("must be > 0, <= 1d") : error) +
                                " (got " + printable(lock_timeout) + ")");
  }
  return *d;
}

void check_conninfo(const std::string& url, const std::string& source, ExitCode code) {
  try {
    store::parse_conninfo(url);
  } catch (const store::ConninfoError& e) {
    throw ControlPlaneError(code, source + ": " + e.what(),
                            "the password is never printed; see README \"Secrets and "
                            "configuration\"");
  }
}

std::string printable(std::string_view text) {
  std::string out = "\"";
  for (unsigned char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20 || c == 0x7f) {
      out += fmt::format("\\x{:02x}", c);
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

void register_migrate(CLI::App& app, Action& action) {
  auto* cmd = app.add_subcommand("migrate",
                                 "Apply pending schema migrations (safe to run from "
                                 "several hosts at once)");
  auto flags = std::make_shared<DatabaseFlags>();
  auto check = std::make_shared<bool>(false);
  flags->add_to(cmd, false);
  cmd->add_flag("--check", *check, "only report; exit 4 when migrations are pending");
  add_lock_timeout(cmd, *flags);
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
      auto applied = store::migrate(session, flags->migrate_lock_timeout(config));
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
      "declare",
      "Migrate, then create the config's streams and groups (idempotent; never moves "
      "a cursor)");
  auto flags = std::make_shared<DatabaseFlags>();
  flags->add_to(cmd, true);
  add_lock_timeout(cmd, *flags);
  cmd->callback([&action, flags] {
    action = [flags] {
      auto config = maybe_load(flags->config_file);
      store::Session session(flags->resolve(config));
      store::migrate(session, flags->migrate_lock_timeout(config));
      service::declare_all(session, *config);
      std::printf("declared %zu stream(s) and %zu group(s)\n", config->streams.size(),
                  config->groups.size());
      return 0;
    };
  });
}

}  // namespace sqlstreams::cli
