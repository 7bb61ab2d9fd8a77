// Host: start-up, pipelines, drain, and the figures the HTTP endpoints read.
#include "service/host.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <nlohmann/json.hpp>
#include <thread>

#include "common/duration.hpp"
#include "common/errors.hpp"
#include "isolation/isolation.hpp"
#include "maintain/fleet.hpp"
#include "maintain/worker.hpp"
#include "ops/crash_handler.hpp"
#include "service/reload_plan.hpp"
#include "store/schema/catalog.hpp"

namespace sqlstreams::service {
namespace {

std::string machine_name(const config::Config& config) {
  if (!config.host.name.empty()) return config.host.name;
  char buf[256] = {};
  gethostname(buf, sizeof buf - 1);
  return buf;
}

void add_into(ops::GroupSample& into, const ops::GroupSample& from) {
  for (size_t i = 0; i < ops::kGroupCounters; ++i) into.counters[i] += from.counters[i];
  auto& a = into.handler_seconds;
  const auto& b = from.handler_seconds;
  if (a.upper_bounds.empty()) a.upper_bounds = b.upper_bounds;
  a.counts.resize(std::max(a.counts.size(), b.counts.size()));
  for (size_t i = 0; i < b.counts.size(); ++i) a.counts[i] += b.counts[i];
  a.count += b.count;
  a.sum += b.sum;
}

ops::GroupSample sample_of_metrics(const consume::GroupMetrics& m) {
  using C = ops::GroupCounter;
  ops::GroupSample s;
  s[C::kMessagesClaimed] = m.messages_claimed.load();
  s[C::kSucceeded] = m.succeeded.load();
  s[C::kRetried] = m.retried.load();
  s[C::kDelayed] = m.delayed.load();
  s[C::kDead] = m.dead.load();
  s[C::kSkippedVersion] = m.skipped_version.load();
  s[C::kRangesClaimed] = m.ranges_claimed.load();
  s[C::kRangesCommitted] = m.ranges_committed.load();
  s[C::kRangesReclaimed] = m.ranges_reclaimed.load();
  s[C::kRangesQuarantined] = m.ranges_quarantined.load();
  s[C::kRangesHandedBack] = m.ranges_handed_back.load();
  s[C::kLeaseLost] = m.lease_lost.load();
  s[C::kRetriesClaimed] = m.retries_claimed.load();
  s[C::kRetryLeaseLost] = m.retry_lease_lost.load();
  s[C::kHandlerTimeouts] = m.handler_timeouts.load();
  s[C::kWorkersAbandoned] = m.workers_abandoned.load();
  s[C::kStoreErrors] = m.store_errors.load();
  s[C::kCommitRejected] = m.commit_rejected.load();
  s[C::kCommitsInDoubt] = m.commits_in_doubt.load();
  const auto& h = m.handler_seconds;
  s.handler_seconds.upper_bounds.assign(h.kUpperBounds.begin(), h.kUpperBounds.end());
  for (const auto& b : h.buckets) s.handler_seconds.counts.push_back(b.load());
  s.handler_seconds.count = h.count.load();
  s.handler_seconds.sum = static_cast<double>(h.sum_micros.load()) / 1e6;
  return s;
}

}  // namespace

// Plugins are never unloaded (R10): one registry for the process, never destroyed.
plugin_host::PluginRegistry* process_registry(const std::filesystem::path& dir) {
  static plugin_host::PluginRegistry* registry = new plugin_host::PluginRegistry(dir);
  return registry;
}

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
      registry_(process_registry(options_.plugin_dir)),
      config_(options_.config) {
  if (!options_.load) options_.load = [](const auto& path) { return config::load_config(path); };
  for (auto& g : config_.groups) resolve_schema_versions(*registry_, g);
}

void resolve_schema_versions(plugin_host::PluginRegistry& registry, config::GroupConfig& group) {
  group.schema_versions = plugin_host::group_schema_versions(
      registry, group.plugin, group.handler, group.name,
      group.schema_versions_given ? std::optional(group.schema_versions) : std::nullopt);
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
  o.children = g.concurrency;
  o.handler_timeout = g.handler_timeout;
  {
    MutexLock lock(mu_);
    o.log_level = config_.host.log_level;
    o.log_format = kFormats[static_cast<int>(config_.host.log_format)];
  }
  return isolation::make_isolated_handler(std::move(o));
}

std::string Host::plugin_sha256(const config::GroupConfig& g) {
  return registry_->load(g.plugin).sha256;
}

std::unique_ptr<consume::GroupPipeline> Host::make_pipeline(
    const config::Config& config, const config::GroupConfig& g, const store::GroupRef& ref,
    std::unique_ptr<plugin_host::HandlerInstance> handler) {
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
    MutexLock lock(mu_);
    std::vector<int64_t> ids;
    for (const auto& [key, r] : running_) ids.push_back(r.ref.id);
    return ids;
  };
  return std::make_unique<maintain::MaintenanceRunner>(
      std::move(mo), maintain::fleet_workers(config, streams, groups, holder_));
}

void Host::start_poller(Millis interval) {
  store::SessionOptions o = options_.session;
  o.application_name = "sqlstreams status";
  poller_ = std::make_unique<ops::StatusPoller>(o, interval);
  poller_->start();
}

void Host::start() {
  started_at_ = SystemClock::instance().now();
  const config::Config config = this->config();
  {
    // Every plugin is loaded (constructor) and every handler created before the database is
    // written: a start that fails on a plugin leaves no trace there (issue 13).
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
      Running r{g, *ref,
                make_pipeline(config, g, *ref, std::move(handlers[group_key(g.stream, g.name)])),
                plugin_sha256(g)};
      refs.push_back(*ref);
      MutexLock lock(mu_);
      running_.emplace(group_key(g.stream, g.name), std::move(r));
    }
    maintenance_ = make_maintenance(config, session, refs);
  }
  start_poller(config.host.status_interval);
  if (!config.host.http_listen.empty()) {
    try {
      start_http(config.host.http_listen);
    } catch (const ops::HttpError& e) {
      throw ControlPlaneError(ExitCode::kConfig, e.what(),
                              "free the port, pick another host.http_listen, or set it to \"\" "
                              "to run without the HTTP endpoints");
    }
  }
  {
    MutexLock lock(mu_);
    for (auto& [key, r] : running_) r.pipeline->start();
  }
  maintenance_->start();
  state_ = HostState::kRunning;
  ops::rearm_exit_hook();  // newer than the plugins' statics and every logger/clock in use
  spdlog::info("host-ready holder={} groups={} http={}", holder_, group_count(),
               config.host.http_listen.empty() ? "off" : config.host.http_listen);
}

bool Host::stop_pipelines(const std::vector<std::string>& keys, const std::set<std::string>& carry,
                          std::chrono::steady_clock::time_point deadline,
                          const std::function<void()>& tick) {
  std::vector<consume::GroupPipeline*> stopping;
  {
    MutexLock lock(mu_);
    for (const auto& key : keys) {
      auto it = running_.find(key);
      if (it == running_.end()) continue;
      stopping.push_back(it->second.pipeline.get());
      draining_.insert_or_assign(key, std::move(it->second));
      running_.erase(it);
    }
  }
  std::atomic<int> undrained{0};
  std::atomic<int> remaining{static_cast<int>(stopping.size())};
  std::vector<std::thread> stoppers;
  for (auto* p : stopping) {
    stoppers.emplace_back([&, p] {
      if (!p->stop(deadline)) undrained++;
      remaining--;
    });
  }
  while (remaining.load() > 0) {
    if (tick) tick();
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  for (auto& t : stoppers) t.join();
  MutexLock lock(mu_);
  for (const auto& key : keys) {
    auto it = draining_.find(key);
    if (it == draining_.end()) continue;
    const auto& m = it->second.pipeline->metrics();
    spdlog::info(
        "group-stopped stream={} group={} succeeded={} retried={} dead={} lease_lost={} "
        "reclaimed={} handed_back={}",
        it->second.ref.stream, it->second.ref.name, m.succeeded.load(), m.retried.load(),
        m.dead.load(), m.lease_lost.load(), m.ranges_reclaimed.load(), m.ranges_handed_back.load());
    if (carry.count(key)) {
      add_into(carried_[key], sample_of_metrics(m));
    } else {
      carried_.erase(key);
    }
    draining_.erase(it);  // safe even when undrained: written-off workers no longer touch it
  }
  return undrained.load() == 0;
}

bool Host::drain(std::chrono::steady_clock::time_point deadline,
                 const std::function<void()>& tick) {
  state_ = HostState::kDraining;
  std::vector<std::string> keys;
  {
    MutexLock lock(mu_);
    for (const auto& [key, r] : running_) keys.push_back(key);
  }
  bool drained = stop_pipelines(keys, {}, deadline, tick);
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

size_t Host::group_count() const {
  MutexLock lock(mu_);
  return running_.size();
}

std::string Host::summary() const {
  MutexLock lock(mu_);
  return fmt::format("{} group(s) running; reloads: {} applied, {} rejected", running_.size(),
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
  // A committer failing for longer than a lease: its work is being reclaimed elsewhere.
  MutexLock lock(mu_);
  for (const auto& [key, r] : running_) {
    if (r.pipeline->paused()) {
      if (why) {
        *why = fmt::format(
            "group {} paused: {} hung handler thread(s) still running "
            "(max_hung_handlers {})",
            key, r.pipeline->hung_handlers(), r.group.max_hung_handlers);
      }
      return false;
    }
    auto stalled = r.pipeline->metrics().commit_stalled_for();
    if (stalled > r.group.lease_ttl) {
      if (why) {
        *why = fmt::format("committer of {} failing for {:.1f}s (lease_ttl {})", key,
                           std::chrono::duration<double>(stalled).count(),
                           format_duration(r.group.lease_ttl));
      }
      return false;
    }
  }
  return true;
}

ops::GroupSample Host::sample_of(const std::string& key, const Running& r) const {
  ops::GroupSample s = sample_of_metrics(r.pipeline->metrics());
  if (auto it = carried_.find(key); it != carried_.end()) add_into(s, it->second);
  s.stream = r.ref.stream;
  s.group = r.ref.name;
  s.concurrency = r.group.concurrency;
  s.live_workers = r.pipeline->live_workers();
  s.ranges_in_flight = static_cast<int64_t>(r.pipeline->ranges_in_flight());
  s.commit_stalled_seconds =
      std::chrono::duration<double>(r.pipeline->metrics().commit_stalled_for()).count();
  s.hung_handlers = r.pipeline->hung_handlers();
  s.paused = r.pipeline->paused();
  return s;
}

std::vector<ops::GroupSample> Host::samples() const {
  MutexLock lock(mu_);
  std::vector<ops::GroupSample> out;
  for (const auto* set : {&running_, &draining_}) {
    for (const auto& [key, r] : *set) out.push_back(sample_of(key, r));
  }
  return out;
}

ops::HostSample Host::host_sample() const {
  ops::HostSample h;
  h.version = options_.version;
  const auto& j = maintain::janitor_counters();
  h.janitor_runs = j.runs.load();
  h.janitor_failures = j.failures.load();
  h.partitions_created = j.partitions_created.load();
  h.partitions_dropped = j.partitions_dropped.load();
  h.rows_swept = j.rows_swept.load();
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
  MutexLock lock(mu_);
  for (const auto& [key, r] : running_) {
    auto s = sample_of(key, r);
    groups[std::to_string(r.ref.id)] = {{"skipped_version", s[ops::GroupCounter::kSkippedVersion]},
                                        {"succeeded", s[ops::GroupCounter::kSucceeded]},
                                        {"dead", s[ops::GroupCounter::kDead]}};
  }
  return nlohmann::json{{"groups", groups}}.dump();
}

}  // namespace sqlstreams::service
