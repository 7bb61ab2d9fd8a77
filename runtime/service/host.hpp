// service/host — the running `sqlstreams run` process (docs/design.md#the-host). No process-wide
// state: it owns, for its life:
//   registry     the plugin_host::PluginRegistry its groups' plugins load through (the one `run`
//                checked them with, or its own for plugin_dir) and its janitors' counters
//   pipelines    service::PipelineSet: one consume::GroupPipeline per configured group, keyed
//                "stream/group", running or draining, and the counts carried over a restart
//   read caches  the pipelines of one stream share its consume::ReadCache
//                (host.read_cache_bytes; consume/read_cache)
//   maintenance  the maintain::MaintenanceRunner (janitors, advancers, heartbeat)
//   poller       ops::StatusPoller: the fleet's status, read every host.status_interval, and
//                the last hour of it and of this host's counters for the page's charts
//   http         ops::HttpServer on host.http_listen (service/host_http.cpp routes it)
// start() runs everything; reload() applies a re-read config (SIGHUP): an invalid file, a
// plugin that does not load or a database error rejects the whole reload (every problem is
// logged, the running config stays); otherwise new groups start, removed groups drain,
// retuned groups drain and restart with their new settings, and unchanged groups are not
// touched. drain() stops everything within host.shutdown_timeout. reap_dropped() stops the
// pipelines of groups an operator dropped (`sqlstreams group drop`) while the host runs.
// Counters of a retuned group carry over to its new pipeline, so /metrics counters only grow.
// Threading: start(), reload() and drain() run on the control thread (service/run_host.cpp);
// the read accessors (ready, samples, view, stats_json) are called from HTTP and maintenance
// threads and take mu_ (config and reload figures) or the PipelineSet's lock briefly; neither is
// held while a pipeline or runner starts or stops.
#pragma once

#include <atomic>
#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "common/mutex.hpp"
#include "config/config.hpp"
#include "consume/group_pipeline.hpp"
#include "maintain/runner.hpp"
#include "maintain/worker.hpp"
#include "ops/http_server.hpp"
#include "ops/metrics.hpp"
#include "ops/status_page.hpp"
#include "ops/status_poller.hpp"
#include "plugin_host/plugin_host.hpp"
#include "service/pipeline_set.hpp"
#include "service/reload_plan.hpp"
#include "store/connection/session.hpp"

namespace sqlstreams::service {

struct HostOptions {
  config::Config config;
  store::SessionOptions session;     // resolved once at start (flags, environment, url_file)
  std::filesystem::path plugin_dir;  // where plugins load from for the life of the process
  // The registry the groups' plugins load through (plugins stay mapped, R10). `run` passes the
  // one it checked every group's plugin with, so each plugin is loaded once; none = the Host
  // makes its own for plugin_dir. A given registry must load from plugin_dir.
  std::shared_ptr<plugin_host::PluginRegistry> registry;
  bool plugin_dir_overridden = false;  // --plugin-dir: host.plugin_dir edits do not matter
  std::string version;
  // Run once by start() after every plugin loaded and every handler was created, before any
  // group is looked up: migrate, declare, check Rule 2 (service::prepare_database,
  // service/declare.hpp). None = nothing.
  std::function<void(store::Session&, const config::Config&)> prepare_database;
  // Declares the config's streams and groups (idempotent; service::declare_all); run at reload
  // time.
  std::function<void(store::Session&, const config::Config&)> declare;
  // Re-reads the config file on SIGHUP (default: config::load_config).
  std::function<config::Config(const std::filesystem::path&)> load;
};

// Logs `group-plugin`: the manifest name and version, the image's SHA-256 and the file a group
// runs (at start-up, and for each group a reload starts or restarts;
// docs/operating/service.md#which-version-runs).
void log_group_plugin(const config::GroupConfig& group, const ops::PluginVersion& plugin);

// Sets each group's schema_versions from its handler's declared version when the config
// omits it; throws plugin_host::PluginLoadError (exit 3) when a group asks for a version its
// handler does not declare (docs/design.md#payload-schema-versions). Run at start-up, on reload and
// by `config check`.
void resolve_schema_versions(plugin_host::PluginRegistry& registry, config::GroupConfig& group);

enum class HostState { kStarting, kRunning, kReloading, kDraining, kStopped };
const char* state_name(HostState s);

class Host {
 public:
  explicit Host(HostOptions options);
  ~Host();
  Host(const Host&) = delete;
  Host& operator=(const Host&) = delete;

  void start();
  // Returns true when the new config was applied, false when it was rejected.
  bool reload();
  // Drains every pipeline; false when handlers were still running at the deadline.
  // `tick` runs every ~50 ms while waiting (watchdog pings, second-signal check).
  bool drain(std::chrono::steady_clock::time_point deadline, const std::function<void()>& tick);

  // Readiness (/readyz): running (or reloading) and the database answered recently.
  bool ready(std::string* why) const;
  HostState state() const { return state_.load(); }
  std::string holder() const { return holder_; }
  const HostOptions& options() const { return options_; }
  config::Config config() const;
  size_t group_count() const;
  std::string summary() const;  // one line for systemd's STATUS=

  std::vector<ops::GroupSample> samples() const;
  ops::HostSample host_sample() const;
  ops::HostView view() const;
  std::string stats_json() const;  // published with each heartbeat (`sqlstreams status`)
  const ops::StatusPoller* poller() const { return poller_.get(); }

  // Stops the pipelines of groups an operator dropped (consume::GroupPipeline::dropped()) and
  // forgets them: their advancers go with a maintenance restart, and the next reload (SIGHUP)
  // with the group still in the file declares it again, as a new group. Control thread; cheap
  // when nothing was dropped. Returns the number of pipelines stopped (service/host_groups.cpp).
  size_t reap_dropped();

  // Hook for the control thread's waits during a reload (watchdog pings): the drain of removed
  // and retuned groups, and the throwaway child that loads a new plugin image first (up to its
  // 60 s; plugin_host::LoadProbe::while_waiting). Control thread, before reload().
  void set_tick(std::function<void()> tick);

 private:
  using Running = PipelineSet::Entry;
  struct Prepared;  // what a reload builds before anything stops (host_reload.cpp)
  bool prepare(const config::Config& next, const ReloadPlan& plan, Prepared& out,
               std::vector<std::string>& problems);
  void apply(const config::Config& next, const ReloadPlan& plan, Prepared& prepared);
  // Stops the HTTP server and starts it on `new_listen` (nothing when ""); the status poller runs
  // exactly while a server does (only /metrics, /readyz and the status page read it).
  void restart_http(const std::string& old_listen, const std::string& new_listen,
                    Millis status_interval);

  std::unique_ptr<plugin_host::HandlerInstance> make_handler(const config::GroupConfig& group)
      SQLSTREAMS_EXCLUDES(mu_);
  // Throws ControlPlaneError when a stream the group emits to is not in the database.
  std::unique_ptr<consume::GroupPipeline> make_pipeline(
      store::Session& session, const config::Config& config, const config::GroupConfig& group,
      const store::GroupRef& ref, std::unique_ptr<plugin_host::HandlerInstance> handler);
  std::unique_ptr<maintain::MaintenanceRunner> make_maintenance(
      const config::Config& config, store::Session& session,
      const std::vector<store::GroupRef>& groups);
  void start_http(const std::string& listen);
  void start_poller(Millis interval);
  void stop_poller();  // control thread, with no HTTP server running
  void log_rejected(const std::vector<std::string>& problems);
  // SIGHUP: stages every changed plugin file of `next` beside its running version (nothing
  // switches yet); false with `problems` when a changed file is refused.
  bool stage_plugins(const config::Config& next, std::vector<std::string>& problems);
  // The reload was accepted: the staged versions become current, each logged as plugin-upgraded.
  void commit_plugins(const config::Config& next);
  // Moves the unchanged groups whose handler runs an older image of its plugin to `retuned`.
  void plan_plugin_upgrades(const config::Config& next, ReloadPlan& plan);
  // The plugin image `group`'s handler is created from (the staged one during a reload).
  ops::PluginVersion plugin_version(const config::GroupConfig& group);

  HostOptions options_;
  std::string holder_;
  std::shared_ptr<plugin_host::PluginRegistry> registry_;  // options_.registry, or its own
  maintain::JanitorCounters janitor_counters_;  // this host's janitors (sqlstreams_janitor_total)
  std::atomic<HostState> state_{HostState::kStarting};
  SysTime started_at_{};
  std::function<void()> tick_;

  mutable Mutex mu_;
  config::Config config_ SQLSTREAMS_GUARDED_BY(mu_);
  uint64_t reloads_applied_ SQLSTREAMS_GUARDED_BY(mu_) = 0;
  uint64_t reloads_rejected_ SQLSTREAMS_GUARDED_BY(mu_) = 0;
  std::vector<std::string> last_reload_problems_ SQLSTREAMS_GUARDED_BY(mu_);

  // The fan-out read cache of each stream, shared by its pipelines (consume/read_cache);
  // declared before pipelines_, which hold pointers into it.
  consume::ReadCaches read_caches_;
  PipelineSet pipelines_;  // declared before maintenance_: its advancers read group ids
  std::unique_ptr<maintain::MaintenanceRunner> maintenance_;
  std::unique_ptr<ops::StatusPoller> poller_;
  std::unique_ptr<ops::HttpServer> http_;
};

}  // namespace sqlstreams::service
