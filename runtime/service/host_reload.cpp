// Host::reload — SIGHUP (docs/design.md#signals-reload-and-a-lost-database). Everything that can
// fail (reading and validating the file, loading plugins and creating handler instances, declaring
// new streams and groups, looking up the maintenance workers) happens before anything stops; then
// new groups start, removed and retuned groups drain in parallel, retuned groups restart, and the
// maintenance runner restarts when its workers changed. Unchanged groups are never touched.
// Plugin upgrades (runtime/plugin_host/README.md#upgrades-staging): a plugin file whose bytes
// changed since it was loaded is loaded beside the running version first, as a staged version
// (PluginRegistry::stage: ELF check, a throwaway child's load, manifest); the groups whose handler
// runs the old image are then retuned — drained and restarted on the new version. A reload is
// transactional (runtime/plugin_host/README.md#upgrades-staging): only once everything was prepared
// does the registry switch (commit_staged) and the log line plugin-upgraded name both versions,
// their SHA-256 prefixes and the groups; a reload rejected at any step (a refused new file, a
// group's config, schema versions, the database) discards what it staged, and the running versions
// stay what later loads and reloads see.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>

#include "ops/crash_handler.hpp"
#include "service/host.hpp"
#include "store/schema/catalog.hpp"

namespace sqlstreams::service {
namespace {

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& i : items) out += (out.empty() ? "" : ",") + i;
  return out.empty() ? "-" : out;
}

bool contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

}  // namespace

struct Host::Prepared {
  std::map<std::string, Running> fresh;  // added and retuned groups, not started
  std::unique_ptr<maintain::MaintenanceRunner> maintenance;  // when the workers changed
};

void Host::log_rejected(const std::vector<std::string>& problems) {
  for (const auto& p : problems) spdlog::error("reload-rejected: {}", p);
  spdlog::error("reload-rejected problems={}: the running configuration stays", problems.size());
  MutexLock lock(mu_);
  reloads_rejected_++;
  last_reload_problems_ = problems;
}

bool Host::prepare(const config::Config& next, const ReloadPlan& plan, Prepared& out,
                   std::vector<std::string>& problems) {
  std::map<std::string, std::unique_ptr<plugin_host::HandlerInstance>> handlers;
  for (const auto& g : next.groups) {
    std::string key = group_key(g.stream, g.name);
    if (!contains(plan.added, key) && !contains(plan.retuned, key)) continue;
    try {
      handlers[key] = make_handler(g);
    } catch (const plugin_host::PluginLoadError& e) {
      problems.push_back(fmt::format("{}:{}:{}: group {}: {}{}", g.pos.file, g.pos.line,
                                     g.pos.column, key, e.what(),
                                     e.hint().empty() ? "" : " (" + e.hint() + ")"));
    }
  }
  if (!problems.empty()) return false;
  try {
    store::Session session(options_.session);
    if (options_.declare) options_.declare(session, next);
    std::vector<store::GroupRef> refs;
    for (const auto& g : next.groups) {
      std::string key = group_key(g.stream, g.name);
      auto ref = store::find_group(session, g.stream, g.name);
      if (!ref) {
        problems.push_back("group " + key + " is not in the database after declaring it");
        continue;
      }
      refs.push_back(*ref);
      if (auto h = handlers.find(key); h != handlers.end()) {
        out.fresh.emplace(
            key, Running{g, *ref, make_pipeline(session, next, g, *ref, std::move(h->second)),
                         plugin_version(g)});
      }
    }
    if (plan.maintenance_changed && problems.empty()) {
      out.maintenance = make_maintenance(next, session, refs);
    }
  } catch (const std::exception& e) {
    problems.push_back(std::string("database: ") + e.what());
  }
  return problems.empty();
}

void Host::apply(const config::Config& next, const ReloadPlan& plan, Prepared& prepared) {
  const std::string old_listen = config().host.http_listen;
  {
    MutexLock lock(mu_);
    config_ = next;
  }
  if (plan.log_level_changed) {
    spdlog::default_logger()->set_level(spdlog::level::from_str(next.host.log_level));
  }
  for (const auto& key : plan.added) {
    auto node = prepared.fresh.extract(key);
    if (node.empty()) continue;
    consume::GroupPipeline* p = node.mapped().pipeline.get();
    log_group_plugin(node.mapped().group, node.mapped().plugin);
    pipelines_.add(key, std::move(node.mapped()), /*start=*/true);
    spdlog::info("group-started stream={} group={} reason=added", p->options().ref.stream,
                 p->options().ref.name);
  }
  std::vector<std::string> stopping = plan.removed;
  stopping.insert(stopping.end(), plan.retuned.begin(), plan.retuned.end());
  const auto deadline = std::chrono::steady_clock::now() + next.host.shutdown_timeout;
  std::set<std::string> carry(plan.retuned.begin(), plan.retuned.end());
  if (!pipelines_.stop(stopping, carry, deadline, tick_)) {
    spdlog::warn(
        "reload-drain-timeout: handler(s) of a removed or retuned group were still "
        "running after host.shutdown_timeout; their work was handed back");
  }
  for (const auto& key : plan.retuned) {
    auto node = prepared.fresh.extract(key);
    if (node.empty()) continue;
    consume::GroupPipeline* p = node.mapped().pipeline.get();
    log_group_plugin(node.mapped().group, node.mapped().plugin);
    pipelines_.add(key, std::move(node.mapped()), /*start=*/true);
    spdlog::info("group-started stream={} group={} reason=retuned concurrency={} batch_size={}",
                 p->options().ref.stream, p->options().ref.name, p->options().group.concurrency,
                 p->options().group.batch_size);
  }
  if (prepared.maintenance) {
    if (maintenance_) maintenance_->stop();  // releases its leases: the new runner takes them
    maintenance_ = std::move(prepared.maintenance);
    maintenance_->start();
  }
  if (plan.status_interval_changed && poller_) poller_->set_interval(next.host.status_interval);
  if (plan.http_changed) restart_http(old_listen, next.host.http_listen, next.host.status_interval);
}

void Host::restart_http(const std::string& old_listen, const std::string& new_listen,
                        Millis status_interval) {
  http_.reset();
  if (new_listen.empty()) {
    stop_poller();
    spdlog::info("http-stopped: host.http_listen is \"\"");
    return;
  }
  if (!poller_) start_poller(status_interval);
  try {
    start_http(new_listen);
  } catch (const std::exception& e) {
    spdlog::error("http-failed listen={}: {}; serving on {} again", new_listen, e.what(),
                  old_listen.empty() ? "nothing" : old_listen);
    if (!old_listen.empty()) {
      try {
        start_http(old_listen);
      } catch (const std::exception& again) {
        spdlog::error("http-failed listen={}: {}", old_listen, again.what());
      }
    }
  }
  if (!http_) stop_poller();  // nothing serves: nothing reads the status
}

bool Host::stage_plugins(const config::Config& next, std::vector<std::string>& problems) {
  std::map<std::string, const config::GroupConfig*> files;  // plugin file → first group using it
  for (const auto& g : next.groups) files.emplace(g.plugin, &g);
  for (const auto& [file, g] : files) {
    try {
      registry_->stage(file);
    } catch (const plugin_host::PluginLoadError& e) {
      problems.push_back(fmt::format("{}:{}:{}: group {}: {}{} (the running version stays)",
                                     g->pos.file, g->pos.line, g->pos.column,
                                     group_key(g->stream, g->name), e.what(),
                                     e.hint().empty() ? "" : " (" + e.hint() + ")"));
    }
  }
  return problems.empty();
}

void Host::commit_plugins(const config::Config& next) {
  for (const auto& upgrade : registry_->commit_staged()) {
    std::vector<std::string> users;
    for (const auto& g : next.groups) {
      const std::filesystem::path file(g.plugin);  // as the registry resolves it
      const std::filesystem::path path =
          (file.is_absolute() ? file : registry_->plugin_dir() / file).lexically_normal();
      if (path.string() == upgrade.to.path) users.push_back(group_key(g.stream, g.name));
    }
    spdlog::info(
        "plugin-upgraded file={} from=\"{} {}\" from_sha256={} to=\"{} {}\" to_sha256={} "
        "groups={}: the groups restart on the new version",
        upgrade.to.path, upgrade.from.name, upgrade.from.version, upgrade.from.sha256.substr(0, 16),
        upgrade.to.name, upgrade.to.version, upgrade.to.sha256.substr(0, 16), join(users));
  }
}

void Host::plan_plugin_upgrades(const config::Config& next, ReloadPlan& plan) {
  std::vector<std::string> still_unchanged;
  for (const auto& key : plan.unchanged) {
    const config::GroupConfig* g = nullptr;
    for (const auto& candidate : next.groups) {
      if (group_key(candidate.stream, candidate.name) == key) g = &candidate;
    }
    const std::string running_sha = pipelines_.plugin_sha256(key).value_or("");
    if (g != nullptr && !running_sha.empty() && running_sha != plugin_version(*g).sha256) {
      plan.retuned.push_back(key);  // drains, then restarts on the new image
    } else {
      still_unchanged.push_back(key);
    }
  }
  plan.unchanged = std::move(still_unchanged);
}

bool Host::reload() {
  state_ = HostState::kReloading;
  const config::Config running = config();
  spdlog::info("reload-started config={}", running.path.string());
  // Every rejection ends here: what was staged is forgotten, nothing switched.
  auto reject = [this](const std::vector<std::string>& problems) {
    registry_->discard_staged();
    log_rejected(problems);
    state_ = HostState::kRunning;
    return false;
  };
  config::Config next;
  try {
    next = options_.load(running.path);
  } catch (const config::ConfigError& e) {
    return reject(e.problems());
  } catch (const std::exception& e) {
    return reject({e.what()});
  }
  // First the plugin files: a changed one is staged beside the running version, so that what
  // follows (schema versions, new handler instances) sees the new version; it becomes current
  // only when the whole reload is accepted.
  std::vector<std::string> plugin_problems;
  if (!stage_plugins(next, plugin_problems)) return reject(plugin_problems);
  // Before planning: a group whose config omits schema_versions gets its handler's version,
  // exactly as at start-up, so an unchanged group compares equal.
  std::vector<std::string> version_problems;
  for (auto& g : next.groups) {
    try {
      resolve_schema_versions(*registry_, g);
    } catch (const plugin_host::PluginLoadError& e) {
      version_problems.push_back(fmt::format("{}:{}:{}: group {}: {}", g.pos.file, g.pos.line,
                                             g.pos.column, group_key(g.stream, g.name), e.what()));
    }
  }
  if (!version_problems.empty()) return reject(version_problems);
  ReloadPlan plan = plan_reload(running, next);
  plan_plugin_upgrades(next, plan);
  if (options_.plugin_dir_overridden) std::erase(plan.needs_restart, "host.plugin_dir");
  for (const auto& key : plan.needs_restart) {
    spdlog::warn("reload-needs-restart key={}: the running value stays until the host restarts",
                 key);
  }
  next = effective_config(running, std::move(next));
  Prepared prepared;
  std::vector<std::string> problems;
  if (!prepare(next, plan, prepared, problems)) return reject(problems);
  commit_plugins(next);  // accepted: nothing below rejects it
  apply(next, plan, prepared);
  ops::rearm_exit_hook();  // newer than the statics of the plugins just created
  {
    MutexLock lock(mu_);
    reloads_applied_++;
    last_reload_problems_.clear();
  }
  state_ = HostState::kRunning;
  spdlog::info("reload-applied added={} removed={} retuned={} unchanged={}", join(plan.added),
               join(plan.removed), join(plan.retuned), plan.unchanged.size());
  return true;
}

}  // namespace sqlstreams::service
