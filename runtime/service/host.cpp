// Host: start-up, pipelines, drain, and the figures the HTTP endpoints read.
#include "service/host.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <nlohmann/json.hpp>
#include <thread>

#include "common/chaos_plant.hpp"
#include "common/duration.hpp"
#include "common/errors.hpp"
#include "common/host_name.hpp"
#include "isolation/isolation.hpp"
#include "maintain/fleet.hpp"
#include "maintain/worker.hpp"
#include "ops/crash_handler.hpp"
#include "ops/logging.hpp"
#include "service/reload_plan.hpp"
#include "store/schema/catalog.hpp"

namespace sqlstreams::service {
namespace {

std::string machine_name(const config::Config& config) {
  if (!config.host.name.empty()) return config.host.name;
  return machine_host_name();
}

}  // namespace

const char* state_name(HostState s) {
  switch (s) {
    case HostState::kStarting:
      return "starting";
    case HostState::kRunning:
      return "running";
    case HostState::kReloading:
      return "reloading";
    case HostState::kDraining:
      return "draining";
    case HostState::kStopped:
      return "stopped";
  }
  return "?";
}

Host::Host(HostOptions options)
    : options_(std::move(options)),
      holder_(fmt::format("{}:{}", machine_name(options_.config), getpid())),
      registry_(options_.registry
                    ? options_.registry
                    : std::make_shared<plugin_host::PluginRegistry>(options_.plugin_dir)),
      config_(options_.config) {
  if (!registry_->loads_from(options_.plugin_dir)) {
    throw std::invalid_argument(fmt::format(
        "service::Host: the plugin registry given loads from '{}', the host's plugin_dir is '{}'",
        registry_->plugin_dir().string(), options_.plugin_dir.string()));
  }
  if (!options_.load) options_.load = [](const auto& path) { return config::load_config(path); };
  for (auto& g : config_.groups) resolve_schema_versions(*registry_, g);
}

void resolve_schema_versions(plugin_host::PluginRegistry& registry, config::GroupConfig& group) {
  group.schema_versions = plugin_host::group_schema_versions(
      registry, group.plugin, group.handler, group.name,
      group.schema_versions_given ? std::optional(group.schema_versions) : std::nullopt);
}

void Host::set_tick(std::function<void()> tick) {
  tick_ = std::move(tick);
  registry_->set_load_probe_tick(tick_);
}

Host::~Host() {
  http_.reset();
  if (poller_) poller_->stop();
}

std::unique_ptr<plugin_host::HandlerInstance> Host::make_handler(const config::GroupConfig& g) {
  if (g.isolation == config::Isolation::kInProcess) {
    return registry_->create(g.plugin, g.handler, g.plugin_config_json, g.stream, g.name);
  }
  static constexpr const char* kFormats[] = {"auto", "text", "json"};  // config::LogFormat order
  isolation::IsolationOptions o;
  o.plugin_dir = options_.plugin_dir;
  o.plugin = g.plugin;
  o.handler = g.handler;
  o.stream = g.stream;
  o.group = g.name;
  o.config_json = g.plugin_config_json;
  // The children map this image (the staged one during a reload), never the file: what they
  // run changes only with a reload (runtime/plugin_host/README.md#upgrades-staging).
  const plugin_host::SealedImage image = registry_->image(g.plugin);
  o.image_fd = image.fd;
  o.image_sha256 = image.sha256;
  if (chaos_plant("child-loads-plugin-file")) {  // test builds: the children read the file
    o.image_fd = -1;
    o.image_sha256.clear();
  }
  o.children = g.concurrency;
  o.handler_timeout = g.handler_timeout;
  o.stderr_budget.lines_per_second = static_cast<size_t>(g.child_stderr_lines_per_second);
  o.stderr_budget.bytes_per_second = static_cast<size_t>(g.child_stderr_bytes_per_second);
  o.stderr_budget.burst_lines = 5 * o.stderr_budget.lines_per_second;  // 5 seconds' worth
  o.stderr_budget.burst_bytes = 5 * o.stderr_budget.bytes_per_second;
  {
    MutexLock lock(mu_);
    o.log_level = config_.host.log_level;
    o.log_format = kFormats[static_cast<int>(config_.host.log_format)];
  }
  return isolation::make_isolated_handler(std::move(o));
}

ops::PluginVersion Host::plugin_version(const config::GroupConfig& g) {
  const plugin_host::PluginInfo& info = registry_->load(g.plugin);
  return ops::PluginVersion{info.path, info.name, info.version, info.sha256};
}

void log_group_plugin(const config::GroupConfig& g, const ops::PluginVersion& p) {
  spdlog::info(
      "group-plugin stream={} group={} plugin={} version={} sha256={} file={} isolation={}",
      g.stream, g.name, ops::log_quoted(p.name), ops::log_quoted(p.version), p.sha256,
      ops::log_quoted(p.file),
      g.isolation == config::Isolation::kInProcess ? "inprocess" : "process");
}

std::unique_ptr<consume::GroupPipeline> Host::make_pipeline(
    store::Session& session, const config::Config& config, const config::GroupConfig& g,
    const store::GroupRef& ref, std::unique_ptr<plugin_host::HandlerInstance> handler) {
  const auto* stream = config.find_stream(g.stream);
  consume::PipelineOptions o;
  o.group = g;
  o.session = options_.session;
  o.session.application_name = "sqlstreams " + g.name;
  o.ref = ref;
  o.notify = stream && stream->notify;
  o.holder = holder_;
  o.run_advancer = false;  // the fleet's advancer worker runs it (maintain/)
  o.read_cache = read_caches_.for_stream(ref.stream_id, config.host.read_cache_bytes);
  // The streams it emits to, as the database has them (max_payload_bytes is the fleet's).
  for (const auto& name : g.emits) {
    auto target = store::find_stream(session, name);
    if (!target) {
      throw ControlPlaneError(ExitCode::kDatabase,
                              fmt::format("group {}/{} emits to stream {}, which is not declared",
                                          g.stream, g.name, name),
                              "run `sqlstreams declare --config FILE`");
    }
    o.emit_targets.push_back(*target);
  }
  return std::make_unique<consume::GroupPipeline>(std::move(o), std::move(handler));
}

std::unique_ptr<maintain::MaintenanceRunner> Host::make_maintenance(
    const config::Config& config, store::Session& session,
    const std::vector<store::GroupRef>& groups) {
  std::vector<store::StreamRef> streams;
  for (const auto& s : config.streams) {
    if (auto ref = store::find_stream(session, s.name)) streams.push_back(*ref);
  }
  maintain::RunnerOptions mo;
  mo.session = options_.session;
  mo.session.application_name = "sqlstreams maintenance";
  mo.holder = holder_;
  mo.host = store::HostInfo{machine_name(config), static_cast<int32_t>(getpid()), options_.version,
                            started_at_};
  mo.ttl = config.host.maintenance_ttl;
  mo.stats_json = [this] { return stats_json(); };
  mo.seen_groups = [this] {  // groups.last_seen_at of the groups this host runs
    return pipelines_.group_ids();
  };
  return std::make_unique<maintain::MaintenanceRunner>(
      std::move(mo), maintain::fleet_workers(config, streams, groups, holder_, janitor_counters_));
}

void Host::stop_poller() {
  if (!poller_) return;
  poller_->stop();
  poller_.reset();
}

void Host::start_poller(Millis interval) {
  store::SessionOptions o = options_.session;
  o.application_name = "sqlstreams status";
  poller_ = std::make_unique<ops::StatusPoller>(o, interval);
  // The history's counters: poller_ is destroyed before pipelines_ (declared after it).
  poller_->set_local_sampler([this] { return pipelines_.samples(); });
  poller_->start();
}

void Host::start() {
  started_at_ = SystemClock::instance().now();
  const config::Config config = this->config();
  {
    // Every plugin is loaded (constructor) and every handler created before the database is
    // written: a start that fails on a plugin leaves no trace there
    // (docs/operating/running.md#running-the-host).
    std::map<std::string, std::unique_ptr<plugin_host::HandlerInstance>> handlers;
    for (const auto& g : config.groups) handlers[group_key(g.stream, g.name)] = make_handler(g);
    store::Session session(options_.session);
    if (options_.prepare_database) options_.prepare_database(session, config);
    std::vector<store::GroupRef> refs;
    for (const auto& g : config.groups) {
      auto ref = store::find_group(session, g.stream, g.name);
      if (!ref) {
        throw ControlPlaneError(ExitCode::kDatabase,
                                fmt::format("group {}/{} is not declared", g.stream, g.name),
                                "run `sqlstreams declare --config FILE`");
      }
      Running r{
          g, *ref,
          make_pipeline(session, config, g, *ref, std::move(handlers[group_key(g.stream, g.name)])),
          plugin_version(g)};
      refs.push_back(*ref);
      pipelines_.add(group_key(g.stream, g.name), std::move(r), /*start=*/false);
    }
    maintenance_ = make_maintenance(config, session, refs);
  }
  // The fleet's status is read for the HTTP endpoints alone: a host without them reads nothing
  // (an ordered group's status costs in proportion to its open rows; tests/service reload_test).
  if (!config.host.http_listen.empty()) {
    start_poller(config.host.status_interval);
    try {
      start_http(config.host.http_listen);
    } catch (const ops::HttpError& e) {
      throw ControlPlaneError(ExitCode::kConfig, e.what(),
                              "free the port, pick another host.http_listen, or set it to \"\" "
                              "to run without the HTTP endpoints");
    }
  }
  pipelines_.start_all();
  maintenance_->start();
  state_ = HostState::kRunning;
  ops::rearm_exit_hook();  // newer than the plugins' statics and every logger/clock in use
  for (const auto& g : config.groups) {
    if (auto p = pipelines_.plugin(group_key(g.stream, g.name))) log_group_plugin(g, *p);
  }
  spdlog::info("host-ready holder={} groups={} http={}", holder_, group_count(),
               config.host.http_listen.empty() ? "off" : config.host.http_listen);
}

bool Host::drain(std::chrono::steady_clock::time_point deadline,
                 const std::function<void()>& tick) {
  state_ = HostState::kDraining;
  bool drained = pipelines_.stop(pipelines_.keys(), {}, deadline, tick);
  // civetweb takes up to 2 s to stop: meanwhile the last advancer pass runs and the leases go
  // back (after the pipelines' final commits).
  std::thread http_stopper([this] { http_.reset(); });
  if (maintenance_) maintenance_->stop();
  if (poller_) poller_->stop();
  http_stopper.join();
  state_ = HostState::kStopped;
  return drained;
}

config::Config Host::config() const {
  MutexLock lock(mu_);
  return config_;
}

size_t Host::group_count() const { return pipelines_.size(); }

std::string Host::summary() const {
  const size_t groups = pipelines_.size();
  MutexLock lock(mu_);
  return fmt::format("{} group(s) running; reloads: {} applied, {} rejected", groups,
                     reloads_applied_, reloads_rejected_);
}

bool Host::ready(std::string* why) const {
  HostState s = state_.load();
  if (s != HostState::kRunning && s != HostState::kReloading) {
    if (why) *why = std::string("host is ") + state_name(s);
    return false;
  }
  if (!poller_) {
    if (why) *why = "no status yet";
    return false;
  }
  // Two missed reads in a row (plus slack) make the database "unreachable".
  auto max_age = 2 * poller_->interval() + Millis(2000);
  if (!poller_->database_ok(max_age)) {
    std::string error = poller_->last_error();
    if (why) *why = "database unreachable" + (error.empty() ? "" : ": " + error);
    return false;
  }
  // A group paused by hung handlers, or a committer failing for longer than a lease (its work
  // is being reclaimed elsewhere).
  return pipelines_.healthy(why);
}

std::vector<ops::GroupSample> Host::samples() const { return pipelines_.samples(); }

ops::HostSample Host::host_sample() const {
  ops::HostSample h;
  h.version = options_.version;
  const auto& j = janitor_counters_;
  h.janitor_runs = j.runs.load();
  h.janitor_failures = j.failures.load();
  h.partitions_created = j.partitions_created.load();
  h.partitions_dropped = j.partitions_dropped.load();
  h.rows_swept = j.rows_swept.load();
  h.janitor_lock_busy = j.lock_busy.load();
  h.ready = ready(nullptr);
  if (poller_) {
    h.status_refresh_errors = poller_->errors();
    if (auto s = poller_->latest()) {
      h.status_age_seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - s->taken).count();
    }
  }
  MutexLock lock(mu_);
  h.name = machine_name(config_);
  h.reloads_applied = reloads_applied_;
  h.reloads_rejected = reloads_rejected_;
  return h;
}

ops::HostView Host::view() const {
  ops::HostView v;
  v.holder = holder_;
  v.version = options_.version;
  v.state = state_name(state_.load());
  v.started_at = started_at_;
  v.groups = samples();
  MutexLock lock(mu_);
  v.name = machine_name(config_);
  v.config_path = config_.path.string();
  v.reloads_applied = reloads_applied_;
  v.reloads_rejected = reloads_rejected_;
  v.last_reload_problems = last_reload_problems_;
  return v;
}

// The in-process counters the heartbeat publishes for `sqlstreams status` (per group id).
std::string Host::stats_json() const {
  nlohmann::json groups = nlohmann::json::object();
  for (const auto& [id, s] : pipelines_.samples_by_group_id()) {
    groups[std::to_string(id)] = {
        {"skipped_version", s[ops::GroupCounter::kSkippedVersion]},
        {"succeeded", s[ops::GroupCounter::kSucceeded]},
        {"dead", s[ops::GroupCounter::kDead]},
        {"fence_wait_ms", static_cast<int64_t>(s.fence_wait_seconds * 1000)},
        {"plugin",
         {{"name", s.plugin.name}, {"version", s.plugin.version}, {"sha256", s.plugin.sha256}}}};
  }
  return nlohmann::json{{"groups", groups}}.dump();
}

}  // namespace sqlstreams::service
