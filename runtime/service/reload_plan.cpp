#include "service/reload_plan.hpp"

#include <map>

namespace sqlstreams::service {
namespace {

config::GroupConfig without_position(config::GroupConfig g) {
  g.pos = {};
  return g;
}

config::StreamConfig stream_without_position(config::StreamConfig s) {
  s.pos = {};
  return s;
}

bool stream_notify(const config::Config& c, const std::string& stream) {
  const auto* s = c.find_stream(stream);
  return s != nullptr && s->notify;
}

bool same_database(const config::DatabaseConfig& a, const config::DatabaseConfig& b) {
  return a.url_file == b.url_file && a.schema == b.schema &&
         a.connect_timeout == b.connect_timeout && a.migrate == b.migrate;
}

}  // namespace

std::string group_key(const std::string& stream, const std::string& group) {
  return stream + "/" + group;
}

ReloadPlan plan_reload(const config::Config& running, const config::Config& next) {
  ReloadPlan plan;
  std::map<std::string, const config::GroupConfig*> before, after;
  for (const auto& g : running.groups) before[group_key(g.stream, g.name)] = &g;
  for (const auto& g : next.groups) after[group_key(g.stream, g.name)] = &g;
  for (const auto& [key, g] : after) {
    auto it = before.find(key);
    if (it == before.end()) {
      plan.added.push_back(key);
    } else if (without_position(*it->second) != without_position(*g) ||
               stream_notify(running, g->stream) != stream_notify(next, g->stream)) {
      plan.retuned.push_back(key);
    } else {
      plan.unchanged.push_back(key);
    }
  }
  for (const auto& [key, g] : before) {
    if (!after.count(key)) plan.removed.push_back(key);
  }

  if (!same_database(running.database, next.database)) plan.needs_restart.push_back("database");
  if (running.host.name != next.host.name) plan.needs_restart.push_back("host.name");
  if (running.plugin_dir() != next.plugin_dir()) plan.needs_restart.push_back("host.plugin_dir");
  if (running.host.log_format != next.host.log_format) {
    plan.needs_restart.push_back("host.log_format");
  }
  if (running.host.read_cache_bytes != next.host.read_cache_bytes) {
    plan.needs_restart.push_back("host.read_cache_bytes");
  }

  std::vector<config::StreamConfig> streams_before, streams_after;
  for (const auto& s : running.streams) streams_before.push_back(stream_without_position(s));
  for (const auto& s : next.streams) streams_after.push_back(stream_without_position(s));
  plan.maintenance_changed = !plan.added.empty() || !plan.removed.empty() ||
                             streams_before != streams_after ||
                             running.host.maintenance_ttl != next.host.maintenance_ttl ||
                             running.host.janitor_period != next.host.janitor_period;
  plan.http_changed = running.host.http_listen != next.host.http_listen;
  plan.status_interval_changed = running.host.status_interval != next.host.status_interval;
  plan.log_level_changed = running.host.log_level != next.host.log_level;
  return plan;
}

config::Config effective_config(const config::Config& running, config::Config next) {
  next.database = running.database;
  next.host.name = running.host.name;
  next.host.plugin_dir = running.host.plugin_dir;
  next.host.log_format = running.host.log_format;
  next.host.read_cache_bytes = running.host.read_cache_bytes;
  if (next.path.parent_path() != running.path.parent_path()) {
    // plugin_dir is relative to the config's folder: keep resolving it as before.
    next.host.plugin_dir = running.plugin_dir().string();
  }
  return next;
}

}  // namespace sqlstreams::service
