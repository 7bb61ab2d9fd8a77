// maintain/fleet — the maintenance workers a host's configuration asks for: a janitor per
// declared stream (its period, host.janitor_period; its audit_retention) and a cursor
// advancer per group (about once a second, docs/design.md#the-committed-cursor-and-the-advancer).
// Every host lists the workers of its own config; the leases decide which host runs each. The
// janitors count their passes in the caller's JanitorCounters, which must outlive the workers made
// from the specs.
// Threading: pure.
#pragma once

#include <string>
#include <vector>

#include "config/config.hpp"
#include "maintain/runner.hpp"
#include "maintain/worker.hpp"
#include "store/schema/catalog.hpp"

namespace sqlstreams::maintain {

inline constexpr const char* kJanitorLane = "janitor";
inline constexpr const char* kAdvancerLane = "advancer";

Schedule advancer_schedule();

std::vector<WorkerSpec> fleet_workers(const config::Config& config,
                                      const std::vector<store::StreamRef>& streams,
                                      const std::vector<store::GroupRef>& groups,
                                      const std::string& holder, JanitorCounters& counters);

}  // namespace sqlstreams::maintain
