// service/reload_plan — what a SIGHUP reload changes
// (docs/design.md#signals-reload-and-a-lost-database): a pure comparison of the running config with
// the newly read one.
//   added / removed / retuned / unchanged   groups, by "stream/group". A group is retuned when
//       any of its settings (concurrency, batch_size, retry policy, plugin config, ...) or its
//       stream's `notify` changed: the host drains its pipeline and starts a new one. Unchanged
//       groups keep running untouched.
//   needs_restart   keys that only take effect on a restart (database.*, host.name,
//       host.plugin_dir, host.log_format, host.read_cache_bytes): the running values are kept
//       and the keys logged.
//   maintenance_changed   the janitor/advancer workers or their settings changed (streams,
//       the set of groups, host.maintenance_ttl, host.janitor_period): the runner restarts.
// Threading: pure.
#pragma once

#include <string>
#include <vector>

#include "config/config.hpp"

namespace sqlstreams::service {

struct ReloadPlan {
  std::vector<std::string> added;
  std::vector<std::string> removed;
  std::vector<std::string> retuned;
  std::vector<std::string> unchanged;
  std::vector<std::string> needs_restart;  // dotted keys, e.g. "host.name"
  bool maintenance_changed = false;
  bool http_changed = false;
  bool status_interval_changed = false;
  bool log_level_changed = false;
};

std::string group_key(const std::string& stream, const std::string& group);

ReloadPlan plan_reload(const config::Config& running, const config::Config& next);

// `next` with the running values put back for every key in plan.needs_restart.
config::Config effective_config(const config::Config& running, config::Config next);

}  // namespace sqlstreams::service
