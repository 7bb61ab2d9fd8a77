// service/pipeline_set — the pipelines a host runs: one consume::GroupPipeline per group, keyed
// "stream/group" (store::group_key). Owns
//   running   the pipelines serving their group now;
//   draining  the pipelines being stopped (by a drain, a reload or a reaped drop): still shown
//             on /metrics and the status page until they stopped;
//   carried   the final counts of stopped pipelines whose group restarts (a retuned group), added
//             to their successor's, so /metrics counters only grow.
// Threading: add(), start_all() and stop() run on the host's control thread (start, reload,
// drain, reap); every reader (samples, ready, keys, ...) may run on any thread (HTTP,
// maintenance). mu_ guards the three maps and is never held while a pipeline starts or stops.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/mutex.hpp"
#include "config/config.hpp"
#include "consume/group_pipeline.hpp"
#include "ops/metrics.hpp"
#include "store/schema/catalog.hpp"

namespace sqlstreams::service {

class PipelineSet {
 public:
  struct Entry {
    config::GroupConfig group;
    store::GroupRef ref;
    std::unique_ptr<consume::GroupPipeline> pipeline;
    ops::PluginVersion plugin;  // the plugin image its handler was created from
  };

  PipelineSet() = default;
  PipelineSet(const PipelineSet&) = delete;
  PipelineSet& operator=(const PipelineSet&) = delete;

  // Puts `entry` in the running set under `key` (replacing what ran under it) and, when
  // `start`, starts its pipeline (outside the lock).
  void add(const std::string& key, Entry entry, bool start) SQLSTREAMS_EXCLUDES(mu_);
  // Starts every running pipeline (the host's start, after HTTP and the poller are up).
  void start_all() SQLSTREAMS_EXCLUDES(mu_);
  // Stops the named running pipelines in parallel (in the draining set meanwhile; `tick` runs
  // every ~50 ms while waiting); the final counts of those in `carry` are kept for their
  // successors, the others' forgotten. False when one did not drain by `deadline`.
  bool stop(const std::vector<std::string>& keys, const std::set<std::string>& carry,
            std::chrono::steady_clock::time_point deadline, const std::function<void()>& tick)
      SQLSTREAMS_EXCLUDES(mu_);

  size_t size() const SQLSTREAMS_EXCLUDES(mu_);
  std::vector<std::string> keys() const SQLSTREAMS_EXCLUDES(mu_);
  // The running groups an operator dropped (consume::GroupPipeline::dropped()).
  std::vector<std::string> dropped() const SQLSTREAMS_EXCLUDES(mu_);
  std::vector<store::GroupRef> refs() const SQLSTREAMS_EXCLUDES(mu_);
  std::vector<int64_t> group_ids() const SQLSTREAMS_EXCLUDES(mu_);
  // The plugin image the running pipeline of `key` was created from; nullopt when none runs.
  std::optional<std::string> plugin_sha256(const std::string& key) const SQLSTREAMS_EXCLUDES(mu_);
  std::optional<ops::PluginVersion> plugin(const std::string& key) const SQLSTREAMS_EXCLUDES(mu_);

  // Running, then draining pipelines, with the counts carried over.
  std::vector<ops::GroupSample> samples() const SQLSTREAMS_EXCLUDES(mu_);
  // The running pipelines' samples by group id (the heartbeat's stats).
  std::map<int64_t, ops::GroupSample> samples_by_group_id() const SQLSTREAMS_EXCLUDES(mu_);
  // False (and why) when a group is paused by max_hung_handlers or its committer has been
  // failing for longer than its lease_ttl.
  bool healthy(std::string* why) const SQLSTREAMS_EXCLUDES(mu_);

 private:
  ops::GroupSample sample_of(const std::string& key, const Entry& e) const SQLSTREAMS_REQUIRES(mu_);

  mutable Mutex mu_;
  std::map<std::string, Entry> running_ SQLSTREAMS_GUARDED_BY(mu_);
  std::map<std::string, Entry> draining_ SQLSTREAMS_GUARDED_BY(mu_);
  std::map<std::string, ops::GroupSample> carried_ SQLSTREAMS_GUARDED_BY(mu_);
};

}  // namespace sqlstreams::service
