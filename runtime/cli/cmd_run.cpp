// `sqlstreams run --config FILE`: parses the flags, checks every group's plugin, then runs
// service::Host (which loads the handlers, then migrates or refuses, declares and checks Rule 2
// through service::prepare_database, then runs pipelines, maintenance, HTTP, systemd notify)
// and its control loop: SIGHUP reloads, SIGTERM/SIGINT drains within host.shutdown_timeout, a
// second signal exits at once.
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>

#include "cli/commands.hpp"
#include "cli/group_plugins.hpp"
#include "common/errors.hpp"
#include "common/version.hpp"
#include "ops/logging.hpp"
#include "ops/signals.hpp"
#include "service/declare.hpp"
#include "service/host.hpp"
#include "service/run_host.hpp"
#include "store/connection/conninfo.hpp"

namespace sqlstreams::cli {
namespace {

struct RunFlags {
  DatabaseFlags db;
  std::string plugin_dir;
};

// The soft limit of open files up to the hard one (systemd's default soft limit is 1024, its
// hard limit 524288, and it asks programs that need more to raise the soft limit themselves): an
// asynchronous handler such as http.so holds a socket per message in flight (max_in_flight).
void raise_open_files_limit() {
  struct rlimit limit {};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur >= limit.rlim_max) return;
  const rlim_t before = limit.rlim_cur;
  limit.rlim_cur = limit.rlim_max;
  if (::setrlimit(RLIMIT_NOFILE, &limit) == 0) {
    spdlog::debug("open-files-limit raised from={} to={}", before, limit.rlim_cur);
  }
}

int run(const RunFlags& f) {
  config::Config config = config::load_config(f.db.config_file);
  ops::setup_logging(config.host.log_level, config.host.log_format);
  raise_open_files_limit();
  ops::block_signals();  // before any thread exists (a plugin's constructor may start one)
  const std::filesystem::path plugin_dir =
      f.plugin_dir.empty() ? config.plugin_dir() : std::filesystem::path(f.plugin_dir);
  // Every group's plugin, config and versions, all reported at once, before the database. The
  // Host then runs its groups from this registry: each plugin is loaded once.
  auto registry = std::make_shared<plugin_host::PluginRegistry>(plugin_dir);
  // Each new image (now and at every SIGHUP) loads first in a throwaway child
  // (runtime/plugin_host/README.md#loading-step-by-step).
  registry->set_load_probe(plugin_host::LoadProbe{"/proc/self/exe"});
  check_group_plugins(*registry, config);
  auto session_options = f.db.resolve(config);
  spdlog::info("host-starting config={} database={} schema={}", config.path.string(),
               store::describe_conninfo(session_options.url), session_options.schema);
  service::HostOptions o;
  // Only once every plugin loaded and every handler was created (Host::start): a start that
  // fails on a plugin writes nothing to the database.
  o.prepare_database = service::prepare_database;
  o.plugin_dir = plugin_dir;
  o.registry = std::move(registry);
  o.plugin_dir_overridden = !f.plugin_dir.empty();
  o.config = std::move(config);
  o.session = session_options;
  o.version = kVersion;
  o.declare = service::declare_all;
  service::Host host(std::move(o));  // pipelines, maintenance, HTTP, reload (service/host.hpp)
  return service::run_host(host);
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
