// service/host — the running `sqlstreams run` process (DESIGN §12). Owns, for the life of the
// process:
//   pipelines    one consume::GroupPipeline per configured group, keyed "stream/group"; the
//                pipelines of one stream share its consume::ReadCache (host.read_cache_bytes)
//   maintenance  the maintain::MaintenanceRunner (janitors, advancers, heartbeat)
//   poller       ops::StatusPoller: the fleet's status, read every host.status_interval
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
// threads and take mu_ briefly. mu_ is never held while a pipeline or runner stops.
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
#include "ops/http_server.hpp"
#include "ops/metrics.hpp"
#include "ops/status_page.hpp"
#include "ops/status_poller.hpp"
#include "plugin_host/plugin_host.hpp"
#include "service/reload_plan.hpp"
#include "store/connection/session.hpp"

namespace sqlstreams::service {

struct HostOptions {
  config::Config config;
  store::SessionOptions session;       // resolved once at start (flags, environment, url_file)
  std::filesystem::path plugin_dir;    // where plugins load from for the life of the process
  bool plugin_dir_overridden = false;  // --plugin-dir: host.plugin_dir edits do not matter
  std::string version;
  // Run once by start() after every plugin loaded and every handler was created, before any
  // group is looked up: migrate, declare, check Rule 2 (cli/cmd_run.cpp). None = nothing.
  std::function<void(store::Session&, const config::Config&)> prepare_database;
  // Declares the config's streams and groups (idempotent); run at reload time.
  std::function<void(store::Session&, const config::Config&)> declare;
  // Re-reads the config file on SIGHUP (default: config::load_config).
  std::function<config::Config(const std::filesystem::path&)> load;
};

// Sets each group's schema_versions from its handler's declared version when the config
// omits it; throws plugin_host::PluginLoadError (exit 3) when a group asks for a version its
// handler does not declare (DESIGN §8). Run at start-up, on reload and by `config check`.
void resolve_schema_versions(plugin_host::PluginRegistry& registry, config::GroupConfig& group);

// The process's one PluginRegistry (plugins are never unloaded, R10), made on the first call
// with `dir`; later calls return the same one. `run` checks every group's plugin through it
// before the Host starts, so each plugin is loaded once.
plugin_host::PluginRegistry* process_registry(const std::filesystem::path& dir);

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

  // Hook for the reload drain (watchdog pings).
  void set_tick(std::function<void()> tick) { tick_ = std::move(tick); }

 private:
  struct Running {
    config::GroupConfig group;
    store::GroupRef ref;
    std::unique_ptr<consume::GroupPipeline> pipeline;
    std::string plugin_sha256;  // the plugin image its handler was created from
  };
  struct Prepared;  // what a reload builds before anything stops (host_reload.cpp)
  bool prepare(const config::Config& next, const ReloadPlan& plan, Prepared& out,
               std::vector<std::string>& problems);
  void apply(const config::Config& next, const ReloadPlan& plan, Prepared& prepared);
  void restart_http(const std::string& old_listen, const std::string& new_listen);

  std::unique_ptr<plugin_host::HandlerInstance> make_handler(const config::GroupConfig& group)
      SQLSTREAMS_EXCLUDES(mu_);
  std::unique_ptr<consume::GroupPipeline> make_pipeline(
      const config::Config& config, const config::GroupConfig& group, const store::GroupRef& ref,
      std::unique_ptr<plugin_host::HandlerInstance> handler);
  std::unique_ptr<maintain::MaintenanceRunner> make_maintenance(
      const config::Config& config, store::Session& session,
      const std::vector<store::GroupRef>& groups);
  void start_http(const std::string& listen);
  void start_poller(Millis interval);
  // Stops the named pipelines in parallel (moved to draining_ meanwhile); the final counts of
  // those in `carry` are folded into carried_. Returns false when one did not drain.
  bool stop_pipelines(const std::vector<std::string>& keys, const std::set<std::string>& carry,
                      std::chrono::steady_clock::time_point deadline,
                      const std::function<void()>& tick);
  void log_rejected(const std::vector<std::string>& problems);
  // SIGHUP: loads every changed plugin file of `next` beside its running version (logged as
  // plugin-upgraded); false with `problems` when a changed file is refused.
  bool refresh_plugins(const config::Config& next, std::vector<std::string>& problems);
  // Moves the unchanged groups whose handler runs an older image of its plugin to `retuned`.
  void plan_plugin_upgrades(const config::Config& next, ReloadPlan& plan);
  std::string plugin_sha256(const config::GroupConfig& group);
  ops::GroupSample sample_of(const std::string& key, const Running& r) const
      SQLSTREAMS_REQUIRES(mu_);

  HostOptions options_;
  std::string holder_;
  plugin_host::PluginRegistry* registry_;  // process-wide, never destroyed (plugins stay mapped)
  std::atomic<HostState> state_{HostState::kStarting};
  SysTime started_at_{};
  std::function<void()> tick_;

  mutable Mutex mu_;
  config::Config config_ SQLSTREAMS_GUARDED_BY(mu_);
  std::map<std::string, Running> running_ SQLSTREAMS_GUARDED_BY(mu_);
  std::map<std::string, Running> draining_ SQLSTREAMS_GUARDED_BY(mu_);
  // Counts of replaced pipelines.
  std::map<std::string, ops::GroupSample> carried_ SQLSTREAMS_GUARDED_BY(mu_);
  uint64_t reloads_applied_ SQLSTREAMS_GUARDED_BY(mu_) = 0;
  uint64_t reloads_rejected_ SQLSTREAMS_GUARDED_BY(mu_) = 0;
  std::vector<std::string> last_reload_problems_ SQLSTREAMS_GUARDED_BY(mu_);

  // The fan-out read cache of each stream, shared by its pipelines (consume/read_cache).
  consume::ReadCaches read_caches_;
  std::unique_ptr<maintain::MaintenanceRunner> maintenance_;
  std::unique_ptr<ops::StatusPoller> poller_;
  std::unique_ptr<ops::HttpServer> http_;
};

}  // namespace sqlstreams::service
