#include "maintain/fleet.hpp"

#include <algorithm>

namespace sqlstreams::maintain {

Schedule advancer_schedule() {
  Schedule s;
  s.period = Millis(1000);
  s.failure_backoff = Millis(500);
  s.max_failure_backoff = Millis(5000);
  return s;
}

std::vector<WorkerSpec> fleet_workers(const config::Config& config,
                                      const std::vector<store::StreamRef>& streams,
                                      const std::vector<store::GroupRef>& groups,
                                      const std::string& holder, JanitorCounters& counters) {
  std::vector<WorkerSpec> out;
  for (const auto& stream : streams) {
    JanitorOptions o;
    o.stream_id = stream.id;
    o.stream = stream.name;
    if (const auto* sc = config.find_stream(stream.name)) {
      o.settings.audit_retention = sc->audit_retention;
    }
    for (const auto& g : groups) {
      if (g.stream_id == stream.id) o.group_names[g.id] = g.name;
    }
    o.schedule.period = config.host.janitor_period;
    o.settings.janitor_period = config.host.janitor_period;
    o.schedule.max_failure_backoff = std::max(config.host.janitor_period, Millis(1000));
    JanitorCounters* c = &counters;
    out.push_back({janitor_key(stream.id), kJanitorLane, [o, c](store::Session& session) {
                     return std::make_unique<JanitorWorker>(session, o, *c);
                   }});
  }
  for (const auto& group : groups) {
    out.push_back({advancer_key(group.id), kAdvancerLane, [group, holder](store::Session& s) {
                     return std::make_unique<AdvancerWorker>(s, group, holder, advancer_schedule());
                   }});
  }
  return out;
}

}  // namespace sqlstreams::maintain
