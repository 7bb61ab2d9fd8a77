// `sqlstreams run --config FILE`: migrate (or refuse, by setting), check Rule 2, declare
// streams and groups, load plugins, run one pipeline per group until SIGTERM/SIGINT, then
// drain within host.shutdown_timeout. A second signal exits at once.
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <signal.h>
#include <unistd.h>

#include <thread>

#include "cli/commands.hpp"
#include "common/errors.hpp"
#include "common/url.hpp"
#include "consume/group_pipeline.hpp"
#include "ops/logging.hpp"
#include "ops/signals.hpp"
#include "plugin_host/plugin_host.hpp"
#include "store/migrate.hpp"

namespace sqlstreams::cli {
namespace {

struct RunFlags {
  DatabaseFlags db;
  std::string plugin_dir;
};

void prepare_database(store::Session& session, const config::Config& config) {
  if (config.database.migrate == config::MigrateMode::kAuto) {
    for (const auto& f : store::migrate(session)) spdlog::info("migration-applied file={}", f);
  } else {
    auto st = store::migration_status(session);
    if (!st.pending.empty()) {
      throw ControlPlaneError(ExitCode::kDatabase,
                              fmt::format("database schema is at version {}, this host needs {} "
                                          "({} pending) and database.migrate = \"check\"",
                                          st.database_version, st.known_version, st.pending.size()),
                              "run `sqlstreams migrate --config FILE` first");
    }
  }
  declare_all(session, config);
  auto bad = store::streams_violating_cache_rule(session);
  if (!bad.empty()) {
    std::string names;
    for (const auto& b : bad) names += (names.empty() ? "" : ", ") + b;
    throw ControlPlaneError(
        ExitCode::kDatabase,
        fmt::format("refusing to run: the id sequence of stream(s) {} is not CACHE 1; cached "
                    "ids are drawn out of time order and the claim fence could skip messages",
                    names),
        "ALTER SEQUENCE <schema>.messages_<id>_id_seq CACHE 1");
  }
}

std::string host_name(const config::Config& config) {
  if (!config.host.name.empty()) return config.host.name;
  char buf[256] = {};
  gethostname(buf, sizeof buf - 1);
  return buf;
}

int run(const RunFlags& f) {
  config::Config config = config::load_config(f.db.config_file);
  ops::setup_logging(config.host.log_level, config.host.log_format);
  ops::block_signals();  // before any thread exists
  auto session_options = f.db.resolve(config);
  spdlog::info("host-starting config={} database={} schema={}", config.path.string(),
               mask_url(session_options.url), session_options.schema);
  {
    store::Session session(session_options);
    prepare_database(session, config);
  }
  std::filesystem::path plugin_dir =
      f.plugin_dir.empty() ? config.plugin_dir() : std::filesystem::path(f.plugin_dir);
  // Declared before the pipelines so the libraries outlive every handler instance.
  static plugin_host::PluginRegistry* registry = new plugin_host::PluginRegistry(plugin_dir);
  std::string holder = fmt::format("{}:{}", host_name(config), getpid());
  std::vector<std::unique_ptr<consume::GroupPipeline>> pipelines;
  {
    store::Session session(session_options);
    for (const auto& g : config.groups) {
      auto ref = store::find_group(session, g.stream, g.name);
      const auto* stream = config.find_stream(g.stream);
      auto handler = registry->create(g.plugin, g.handler, g.plugin_config_json, g.stream, g.name);
      consume::PipelineOptions o;
      o.group = g;
      o.session = session_options;
      o.session.application_name = "sqlstreams " + g.name;
      o.ref = *ref;
      o.notify = stream && stream->notify;
      o.holder = holder;
      pipelines.push_back(std::make_unique<consume::GroupPipeline>(std::move(o), std::move(handler)));
    }
  }
  for (auto& p : pipelines) p->start();
  spdlog::info("host-ready holder={} groups={}", holder, pipelines.size());

  int sig = 0;
  for (;;) {
    auto s = ops::wait_for_signal(std::chrono::seconds(60));
    if (!s) continue;
    if (*s == SIGHUP) {
      spdlog::warn("reload-unsupported: SIGHUP received; this version applies config changes on "
                   "restart only");
      continue;
    }
    sig = *s;
    break;
  }
  auto deadline = std::chrono::steady_clock::now() + config.host.shutdown_timeout;
  spdlog::info("host-draining signal={} shutdown_timeout={}", sig,
               format_duration(config.host.shutdown_timeout));
  std::atomic<int> undrained{0};
  std::atomic<int> remaining{static_cast<int>(pipelines.size())};
  std::vector<std::thread> stoppers;
  for (auto& p : pipelines) {
    stoppers.emplace_back([&, pp = p.get()] {
      if (!pp->stop(deadline)) undrained++;
      remaining--;
    });
  }
  while (remaining.load() > 0) {
    if (auto s = ops::wait_for_signal(std::chrono::milliseconds(50)); s && *s != SIGHUP) {
      spdlog::warn("host-exit-now: second signal {} during drain", *s);
      spdlog::default_logger()->flush();
      std::_Exit(1);
    }
  }
  for (auto& t : stoppers) t.join();
  for (auto& p : pipelines) {
    const auto& m = p->metrics();
    spdlog::info("group-stopped stream={} group={} succeeded={} retried={} dead={} lease_lost={} "
                 "reclaimed={} handed_back={}",
                 p->options().ref.stream, p->options().ref.name, m.succeeded.load(),
                 m.retried.load(), m.dead.load(), m.lease_lost.load(), m.ranges_reclaimed.load(),
                 m.ranges_handed_back.load());
  }
  if (undrained.load() > 0) {
    spdlog::warn("host-stopped with handlers still running; their messages were handed back");
    spdlog::default_logger()->flush();
    std::_Exit(0);  // stuck handler threads cannot be joined; leases are already handed back
  }
  spdlog::info("host-stopped");
  return 0;
}

}  // namespace

void register_run(CLI::App& app, Action& action) {
  auto f = std::make_shared<RunFlags>();
  auto* cmd = app.add_subcommand("run", "Run every group of the config until SIGTERM/SIGINT");
  f->db.add_to(cmd, true);
  cmd->add_option("--plugin-dir", f->plugin_dir, "override host.plugin_dir");
  cmd->callback([&action, f] { action = [f] { return run(*f); }; });
}

}  // namespace sqlstreams::cli
