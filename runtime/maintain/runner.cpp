#include "maintain/runner.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <random>
#include <set>

#include "common/outage_backoff.hpp"
#include "common/thread.hpp"
#include "maintain/fair_share.hpp"

namespace sqlstreams::maintain {
namespace {

constexpr Millis kMinTick{20};
constexpr Millis kOutageBackoff{500};

}  // namespace

MaintenanceRunner::MaintenanceRunner(RunnerOptions options, std::vector<WorkerSpec> workers)
    : options_(std::move(options)) {
  for (auto& w : workers) {
    auto slot = std::make_unique<WorkerSlot>();
    slot->spec = std::move(w);
    slots_.push_back(std::move(slot));
  }
}

MaintenanceRunner::~MaintenanceRunner() { stop(); }

double MaintenanceRunner::random01() {
  if (options_.random01) return options_.random01();
  return rng_.next01();
}

void MaintenanceRunner::start() {
  std::set<std::string> lanes;
  for (const auto& s : slots_) lanes.insert(s->spec.lane);
  lease_thread_ = start_thread("ss-maint", [this] { lease_loop(); });
  for (const auto& lane : lanes) {
    lanes_.push_back(start_thread("ss-" + lane, [this, lane] { lane_loop(lane); }));
  }
}

void MaintenanceRunner::stop() {
  {
    MutexLock lock(mu_);
    stop_lanes_ = true;
  }
  lane_cv_.notify_all();
  for (auto& t : lanes_) t.join();
  lanes_.clear();
  {
    MutexLock lock(mu_);
    stop_leases_ = true;
  }
  lease_cv_.notify_all();
  if (lease_thread_.joinable()) lease_thread_.join();
}

void MaintenanceRunner::abandon() {
  {
    MutexLock lock(mu_);
    abandoned_ = true;
  }
  stop();
}

std::vector<store::WorkerKey> MaintenanceRunner::held() const {
  MutexLock lock(mu_);
  std::vector<store::WorkerKey> out;
  for (const auto& s : slots_) {
    if (s->lease) out.push_back(s->spec.key);
  }
  return out;
}

void MaintenanceRunner::lose(WorkerSlot& slot, const std::string& why) {
  spdlog::warn("worker-lost kind={} owner={} holder={}: {}", slot.spec.key.kind,
               slot.spec.key.owner, options_.holder, why);
  slot.lease.reset();
  slot.failures = 0;
  lane_cv_.notify_all();
}

void MaintenanceRunner::lease_loop() {
  store::Session session(options_.session);
  const Millis ttl = options_.ttl;
  const Millis beat_every = std::max(kMinTick, ttl / 3);
  // Looking for free leases is one cheap query: at least once a second, even with a long TTL.
  const Millis acquire_every = std::clamp(ttl / 4, kMinTick, Millis(1000));
  auto next_beat = steady_now();
  auto next_acquire = steady_now();
  // A constant delay (initial == cap): the leases' renewals and the heartbeat need a quick retry.
  OutageBackoff outage(kOutageBackoff, kOutageBackoff);
  MutexLock lock(mu_);
  while (!stop_leases_) {
    const bool acquiring = !stop_lanes_;
    lock.unlock();
    const SteadyTime turn = steady_now();  // an outage's delay counts from here
    SteadyTime wake;
    // Each step on its own: a failing heartbeat must not keep leases from being renewed (or
    // from being given up: renew_due() stops the work of every lease it could not renew).
    std::optional<std::string> failure;
    if (options_.host && steady_now() >= next_beat) {
      try {
        heartbeat(session);
        next_beat = steady_now() + beat_every;
      } catch (const store::StoreError& e) {
        failure = e.what();
      }
    }
    renew_due(session);
    if (acquiring && steady_now() >= next_acquire) {
      try {
        acquire_free(session);
        next_acquire =
            steady_now() +
            Millis(static_cast<int64_t>(acquire_every.count() * (0.75 + 0.5 * random01())));
      } catch (const store::StoreError& e) {
        failure = e.what();
      }
    }
    if (failure) {
      const auto step = outage.on_failure();
      if (step.log_now) {
        spdlog::error("maintenance-database-unavailable holder={}: {}", options_.holder, *failure);
      }
      wake = turn + step.delay;
    } else {
      if (outage.on_success()) {
        spdlog::info("maintenance-database-recovered holder={}", options_.holder);
      }
      wake = steady_now() + acquire_every;
      if (options_.host) wake = std::min(wake, next_beat);
      if (acquiring) wake = std::min(wake, next_acquire);
    }
    lock.lock();
    for (const auto& s : slots_) {
      if (!s->lease) continue;
      wake = std::min(wake, std::max(steady_now(), s->renew_at));
    }
    lease_cv_.wait_until(lock.native(), options_.steady_clock->to_real(wake),
                         [&]() SQLSTREAMS_REQUIRES(mu_) { return stop_leases_; });
  }
  const bool abandoned = abandoned_;
  lock.unlock();
  if (!abandoned) shutdown_leases(session);
}

void MaintenanceRunner::lane_loop(const std::string& lane) {
  store::Session session(options_.session);
  std::map<WorkerSlot*, std::unique_ptr<MaintenanceWorker>> workers;
  for (const auto& s : slots_) {
    if (s->spec.lane == lane) workers[s.get()] = s->spec.make(session);
  }
  MutexLock lock(mu_);
  while (!stop_lanes_) {
    WorkerSlot* due = nullptr;
    for (auto& [slot, worker] : workers) {
      if (slot->lease && (!due || slot->next_run < due->next_run)) due = slot;
    }
    if (!due) {
      lane_cv_.wait(lock.native());
      continue;
    }
    if (due->next_run > steady_now()) {
      lane_cv_.wait_until(lock.native(), options_.steady_clock->to_real(due->next_run));
      continue;
    }
    lock.unlock();
    run_slot(*due, *workers[due]);
    lock.lock();
  }
  if (abandoned_) return;
  // A last pass of the workers that want one, while their leases are still held.
  for (auto& [slot, worker] : workers) {
    if (!slot->lease || !worker->run_at_stop()) continue;
    const store::WorkerFence fence{slot->lease->id, slot->lease->token};
    lock.unlock();
    try {
      worker->run(options_.clock->now(), &fence);
    } catch (const std::exception& e) {
      spdlog::debug("maintenance-final-pass-failed kind={} owner={}: {}", slot->spec.key.kind,
                    slot->spec.key.owner, e.what());
    }
    lock.lock();
  }
}

void MaintenanceRunner::run_slot(WorkerSlot& slot, MaintenanceWorker& worker) {
  std::string token;
  store::WorkerFence fence;
  {
    MutexLock lock(mu_);
    if (!slot.lease) return;
    token = slot.lease->token;
    fence = {slot.lease->id, token};
  }
  std::optional<std::string> error;
  bool fenced_out = false;
  try {
    worker.run(options_.clock->now(), &fence);
  } catch (const store::FencedOut& e) {
    fenced_out = true;
    error = e.what();
  } catch (const std::exception& e) {
    error = e.what();
  }
  MutexLock lock(mu_);
  if (!slot.lease || slot.lease->token != token) return;  // lost meanwhile
  const auto& key = slot.spec.key;
  if (fenced_out) {
    lose(slot, *error);
    return;
  }
  if (error) {
    ++slot.failures;
    const Millis delay = next_run_delay(worker.schedule(), slot.failures, random01());
    if (slot.failures == 1) {
      spdlog::warn("maintenance-failed kind={} owner={} retry_in_ms={}: {}", key.kind, key.owner,
                   delay.count(), *error);
    } else {
      spdlog::debug("maintenance-failed kind={} owner={} failures={} retry_in_ms={}: {}", key.kind,
                    key.owner, slot.failures, delay.count(), *error);
    }
    slot.next_run = steady_now() + delay;
    return;
  }
  if (slot.failures > 0) {
    spdlog::info("maintenance-recovered kind={} owner={} after {} failure(s)", key.kind, key.owner,
                 slot.failures);
  }
  slot.failures = 0;
  slot.next_run = steady_now() + next_run_delay(worker.schedule(), 0, random01());
}

void MaintenanceRunner::heartbeat(store::Session& session) {
  const std::string stats = options_.stats_json ? options_.stats_json() : std::string();
  int64_t host_id = 0;
  {
    MutexLock lock(mu_);
    host_id = host_id_;
  }
  if (host_id == 0) {
    host_id = store::register_host(session, *options_.host, options_.ttl);
    MutexLock lock(mu_);
    host_id_ = host_id;
  }
  const std::vector<int64_t> groups =
      options_.seen_groups ? options_.seen_groups() : std::vector<int64_t>{};
  auto hb = store::heartbeat_host(session, host_id, *options_.host, options_.ttl, stats, groups);
  MutexLock lock(mu_);
  host_id_ = hb.host_id;
}

void MaintenanceRunner::renew_due(store::Session& session) {
  // Taken before the renewal is sent: the next renewal is due before the database's expiry.
  const SteadyTime now = steady_now();
  std::vector<store::WorkerLease> due;
  {
    MutexLock lock(mu_);
    for (const auto& s : slots_) {
      if (s->lease && s->renew_at <= now) due.push_back(*s->lease);
    }
  }
  if (due.empty()) return;
  std::vector<int64_t> kept;
  std::string failure;
  try {
    kept = store::renew_worker_leases(session, due, options_.ttl);
  } catch (const store::StoreError& e) {
    failure = std::string("renewal failed: ") + e.what();
  }
  MutexLock lock(mu_);
  for (const auto& s : slots_) {
    if (!s->lease) continue;
    auto it = std::find_if(due.begin(), due.end(),
                           [&](const store::WorkerLease& l) { return l.token == s->lease->token; });
    if (it == due.end()) continue;
    if (std::find(kept.begin(), kept.end(), s->lease->id) != kept.end()) {
      s->renew_at = now + options_.ttl / 2;
    } else {
      lose(*s, failure.empty() ? "renewal refused: the lease expired or moved to another host"
                               : failure);
    }
  }
}

void MaintenanceRunner::acquire_free(store::Session& session) {
  const SteadyTime now = steady_now();
  std::vector<store::WorkerKey> unheld;
  int64_t held = 0;
  {
    MutexLock lock(mu_);
    for (const auto& s : slots_) {
      if (s->lease) {
        ++held;
      } else {
        unheld.push_back(s->spec.key);
      }
    }
  }
  if (unheld.empty()) return;
  auto free = store::free_worker_keys(session, unheld);
  const int64_t live = options_.host ? store::live_host_count(session) : 1;
  const int64_t total = static_cast<int64_t>(slots_.size());
  // A random order, so that hosts starting together do not all reach for the same keys.
  for (size_t i = free.size(); i > 1; --i) {
    size_t j = static_cast<size_t>(random01() * static_cast<double>(i));
    std::swap(free[i - 1], free[std::min(j, i - 1)]);
  }
  std::vector<store::WorkerKey> wanted;
  {
    MutexLock lock(mu_);
    for (const auto& s : slots_) {
      bool is_free = std::find(free.begin(), free.end(), s->spec.key) != free.end();
      if (!is_free || s->lease) s->free_since.reset();
      if (is_free && !s->free_since) s->free_since = now;
    }
    std::vector<bool> overdue;
    for (const auto& key : free) {
      auto s = std::find_if(slots_.begin(), slots_.end(),
                            [&](const auto& slot) { return slot->spec.key == key; });
      overdue.push_back(s != slots_.end() && (*s)->free_since &&
                        now - *(*s)->free_since >= options_.ttl);
    }
    for (size_t i : pick_free_workers(total, live, held, overdue)) wanted.push_back(free[i]);
  }
  if (wanted.empty()) return;
  auto won = store::acquire_worker_leases(session, options_.holder, wanted, options_.ttl);
  MutexLock lock(mu_);
  for (auto& lease : won) {
    for (const auto& s : slots_) {
      if (s->spec.key != lease.key || s->lease) continue;
      spdlog::info("worker-acquired kind={} owner={} holder={}", lease.key.kind, lease.key.owner,
                   options_.holder);
      s->lease = lease;
      s->free_since.reset();
      s->renew_at = now + options_.ttl / 2;
      s->next_run = steady_now();
      s->failures = 0;
    }
  }
  if (!won.empty()) lane_cv_.notify_all();
}

void MaintenanceRunner::shutdown_leases(store::Session& session) {
  std::vector<store::WorkerLease> held;
  int64_t host_id = 0;
  {
    MutexLock lock(mu_);
    for (const auto& s : slots_) {
      if (s->lease) held.push_back(*s->lease);
      s->lease.reset();
    }
    host_id = host_id_;
  }
  try {
    store::release_worker_leases(session, held);
    for (const auto& l : held) {
      spdlog::info("worker-released kind={} owner={} holder={}", l.key.kind, l.key.owner,
                   options_.holder);
    }
    if (host_id != 0) store::unregister_host(session, host_id);
  } catch (const store::StoreError& e) {
    spdlog::warn("worker-release-failed holder={}: {} (the leases expire after {} ms)",
                 options_.holder, e.what(), options_.ttl.count());
  }
}

}  // namespace sqlstreams::maintain
