// Host::reap_dropped — a group dropped by an operator while this host runs it
// (docs/operating/service.md#group-lifecycle). Its pipeline noticed (consume/ logs `group-dropped`
// once and stops claiming); here it is stopped and forgotten: removed from the running config, so
// that the next reload (SIGHUP) with the group still in the file plans it as added and declares it
// again (a new group, at its start position), and the maintenance runner restarts without its
// advancer.
#include <spdlog/spdlog.h>

#include <algorithm>

#include "service/host.hpp"

namespace sqlstreams::service {

size_t Host::reap_dropped() {
  const std::vector<std::string> keys = pipelines_.dropped();
  if (keys.empty()) return 0;
  const auto deadline = std::chrono::steady_clock::now() + config().host.shutdown_timeout;
  pipelines_.stop(keys, {}, deadline, tick_);
  config::Config remaining;
  std::vector<store::GroupRef> refs;
  {
    MutexLock lock(mu_);
    std::erase_if(config_.groups, [&](const config::GroupConfig& g) {
      return std::find(keys.begin(), keys.end(), group_key(g.stream, g.name)) != keys.end();
    });
    remaining = config_;
  }
  refs = pipelines_.refs();
  for (const auto& key : keys) {
    spdlog::info(
        "group-forgotten group={}: its pipeline stopped; reload (SIGHUP) or restart with it in "
        "the config to declare it again",
        key);
  }
  try {
    store::Session session(options_.session);
    auto next = make_maintenance(remaining, session, refs);
    if (maintenance_) maintenance_->stop();  // releases its leases: the new runner takes them
    maintenance_ = std::move(next);
    maintenance_->start();
  } catch (const std::exception& e) {
    spdlog::warn(
        "maintenance-restart-failed: {} (a dropped group's advancer finds nothing to do until "
        "the next reload)",
        e.what());
  }
  return keys.size();
}

}  // namespace sqlstreams::service
