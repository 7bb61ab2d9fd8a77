// PipelineSet: the running and draining pipelines of a host and the counts carried over.
#include "service/pipeline_set.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <thread>

#include "common/duration.hpp"

namespace sqlstreams::service {
namespace {

// What a pipeline counted; the rest of a GroupSample is filled by sample_of.
ops::GroupSample counts_of(const consume::GroupPipeline& p) {
  ops::GroupSample s;
  s.counters = p.metrics().snapshot();
  s.handler_seconds = p.metrics().handler_seconds.snapshot();
  s.completions_dropped = p.completions_dropped();
  s.stderr_lines_dropped = p.stderr_lines_dropped();
  s.stderr_bytes_dropped = p.stderr_bytes_dropped();
  return s;
}

}  // namespace

void PipelineSet::add(const std::string& key, Entry entry, bool start) {
  consume::GroupPipeline* p = entry.pipeline.get();
  {
    MutexLock lock(mu_);
    running_.insert_or_assign(key, std::move(entry));
  }
  if (start) p->start();  // only the control thread removes entries: p stays valid
}

void PipelineSet::start_all() {
  std::vector<consume::GroupPipeline*> all;
  {
    MutexLock lock(mu_);
    for (auto& [key, e] : running_) all.push_back(e.pipeline.get());
  }
  for (auto* p : all) p->start();
}

bool PipelineSet::stop(const std::vector<std::string>& keys, const std::set<std::string>& carry,
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
    const ops::GroupSample counts = counts_of(*it->second.pipeline);
    using C = ops::GroupCounter;
    spdlog::info(
        "group-stopped stream={} group={} succeeded={} retried={} dead={} lease_lost={} "
        "reclaimed={} handed_back={}",
        it->second.ref.stream, it->second.ref.name, counts[C::kSucceeded], counts[C::kRetried],
        counts[C::kDead], counts[C::kLeaseLost], counts[C::kRangesReclaimed],
        counts[C::kRangesHandedBack]);
    if (carry.count(key)) {
      carried_[key].add_counts(counts);
    } else {
      carried_.erase(key);
    }
    draining_.erase(it);  // safe even when undrained: written-off workers no longer touch it
  }
  return undrained.load() == 0;
}

size_t PipelineSet::size() const {
  MutexLock lock(mu_);
  return running_.size();
}

std::vector<std::string> PipelineSet::keys() const {
  MutexLock lock(mu_);
  std::vector<std::string> out;
  for (const auto& [key, e] : running_) out.push_back(key);
  return out;
}

std::vector<std::string> PipelineSet::dropped() const {
  MutexLock lock(mu_);
  std::vector<std::string> out;
  for (const auto& [key, e] : running_) {
    if (e.pipeline->dropped()) out.push_back(key);
  }
  return out;
}

std::vector<store::GroupRef> PipelineSet::refs() const {
  MutexLock lock(mu_);
  std::vector<store::GroupRef> out;
  for (const auto& [key, e] : running_) out.push_back(e.ref);
  return out;
}

std::vector<int64_t> PipelineSet::group_ids() const {
  MutexLock lock(mu_);
  std::vector<int64_t> out;
  for (const auto& [key, e] : running_) out.push_back(e.ref.id);
  return out;
}

std::optional<std::string> PipelineSet::plugin_sha256(const std::string& key) const {
  MutexLock lock(mu_);
  auto it = running_.find(key);
  if (it == running_.end()) return std::nullopt;
  return it->second.plugin.sha256;
}

std::optional<ops::PluginVersion> PipelineSet::plugin(const std::string& key) const {
  MutexLock lock(mu_);
  auto it = running_.find(key);
  if (it == running_.end()) return std::nullopt;
  return it->second.plugin;
}

ops::GroupSample PipelineSet::sample_of(const std::string& key, const Entry& e) const {
  ops::GroupSample s = counts_of(*e.pipeline);
  if (auto it = carried_.find(key); it != carried_.end()) s.add_counts(it->second);
  s.stream = e.ref.stream;
  s.group = e.ref.name;
  s.concurrency = e.group.concurrency;
  s.live_workers = e.pipeline->live_workers();
  s.ranges_in_flight = static_cast<int64_t>(e.pipeline->ranges_in_flight());
  s.queued_bytes = e.pipeline->metrics().queued_bytes.load();
  s.commit_stalled_seconds =
      std::chrono::duration<double>(e.pipeline->metrics().commit_stalled_for()).count();
  s.fence_wait_seconds =
      std::chrono::duration<double>(e.pipeline->metrics().fence_wait_for()).count();
  s.hung_handlers = e.pipeline->hung_handlers();
  s.plugin = e.plugin;
  s.paused = e.pipeline->paused();
  s.in_flight = static_cast<int64_t>(e.pipeline->in_flight());
  s.peak_in_flight = static_cast<int64_t>(e.pipeline->peak_in_flight());
  return s;
}

std::vector<ops::GroupSample> PipelineSet::samples() const {
  MutexLock lock(mu_);
  std::vector<ops::GroupSample> out;
  for (const auto* set : {&running_, &draining_}) {
    for (const auto& [key, e] : *set) out.push_back(sample_of(key, e));
  }
  return out;
}

std::map<int64_t, ops::GroupSample> PipelineSet::samples_by_group_id() const {
  MutexLock lock(mu_);
  std::map<int64_t, ops::GroupSample> out;
  for (const auto& [key, e] : running_) out[e.ref.id] = sample_of(key, e);
  return out;
}

bool PipelineSet::healthy(std::string* why) const {
  MutexLock lock(mu_);
  for (const auto& [key, e] : running_) {
    if (e.pipeline->paused()) {
      if (why) {
        *why = fmt::format(
            "group {} paused: {} hung handler thread(s) still running "
            "(max_hung_handlers {})",
            key, e.pipeline->hung_handlers(), e.group.max_hung_handlers);
      }
      return false;
    }
    const auto fence_wait = e.pipeline->metrics().fence_wait_for();
    if (e.group.fence_fails_readyz && fence_wait >= e.group.fence_warn_after) {
      if (why) {
        *why = fmt::format(
            "claims of {} held for {:.1f}s by an open producer of the stream (fence-held in "
            "the log names it; fence_fails_readyz)",
            key, std::chrono::duration<double>(fence_wait).count());
      }
      return false;
    }
    auto stalled = e.pipeline->metrics().commit_stalled_for();
    if (stalled > e.group.lease_ttl) {
      if (why) {
        *why = fmt::format("committer of {} failing for {:.1f}s (lease_ttl {})", key,
                           std::chrono::duration<double>(stalled).count(),
                           format_duration(e.group.lease_ttl));
      }
      return false;
    }
  }
  return true;
}

}  // namespace sqlstreams::service
