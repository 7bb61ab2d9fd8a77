#include "ops/status_poller.hpp"

#include <spdlog/spdlog.h>

#include "common/thread.hpp"
#include "store/errors.hpp"

namespace sqlstreams::ops {

using Steady = std::chrono::steady_clock;

StatusPoller::StatusPoller(store::SessionOptions session, Millis interval, const Clock* clock,
                           HistoryLimits history)
    : session_options_(std::move(session)), interval_(interval), clock_(clock), history_(history) {}

void StatusPoller::set_local_sampler(std::function<std::vector<GroupSample>()> sampler) {
  local_sampler_ = std::move(sampler);
}

StatusPoller::~StatusPoller() { stop(); }

void StatusPoller::start() {
  {
    std::lock_guard lock(mu_);
    stop_ = false;
  }
  thread_ = start_thread("ss-status", [this] { loop(); });
}

void StatusPoller::stop() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::shared_ptr<const StatusSnapshot> StatusPoller::latest() const {
  std::lock_guard lock(mu_);
  return latest_;
}

bool StatusPoller::database_ok(std::chrono::milliseconds max_age) const {
  std::lock_guard lock(mu_);
  return last_ok_ && Steady::now() - last_ok_at_ <= max_age;
}

std::string StatusPoller::last_error() const {
  std::lock_guard lock(mu_);
  return last_error_;
}

GroupHistories StatusPoller::history(size_t max_points_per_group) const {
  std::lock_guard lock(mu_);
  return history_.all(max_points_per_group);
}

std::vector<HistoryPoint> StatusPoller::history(const std::string& stream,
                                                const std::string& group) const {
  std::lock_guard lock(mu_);
  return history_.points(stream, group);
}

HistoryStats StatusPoller::history_stats() const {
  std::lock_guard lock(mu_);
  return history_.stats();
}

Millis StatusPoller::interval() const {
  std::lock_guard lock(mu_);
  return interval_;
}

void StatusPoller::set_interval(Millis interval) {
  {
    std::lock_guard lock(mu_);
    interval_ = interval;
  }
  cv_.notify_all();
}

void StatusPoller::loop() {
  store::Session session(session_options_);
  for (;;) {
    refresh(session);
    std::unique_lock lock(mu_);
    if (cv_.wait_for(lock, interval_, [&] { return stop_; })) return;
  }
}

void StatusPoller::record_history(SysTime at, bool read_ok) {
  // The sampler takes the host's pipeline lock: not under mu_.
  std::vector<GroupSample> local = local_sampler_ ? local_sampler_() : std::vector<GroupSample>{};
  std::lock_guard lock(mu_);
  history_.record(at, history_inputs(latest_ ? &latest_->fleet : nullptr, read_ok, local));
}

void StatusPoller::refresh(store::Session& session) {
  const SysTime now = clock_->now();
  bool ok = false;
  try {
    auto fleet = store::read_status(session, now);
    auto snapshot = std::make_shared<StatusSnapshot>();
    snapshot->taken = Steady::now();
    snapshot->fleet = std::move(fleet);
    std::lock_guard lock(mu_);
    if (latest_) {
      double seconds = std::chrono::duration<double>(snapshot->taken - latest_->taken).count();
      std::map<int64_t, int64_t> before;
      for (const auto& s : latest_->fleet.streams) {
        for (const auto& g : s.groups) before[g.id] = g.committed;
      }
      for (const auto& s : snapshot->fleet.streams) {
        for (const auto& g : s.groups) {
          auto it = before.find(g.id);
          if (it != before.end() && seconds > 0) {
            snapshot->commit_rate[g.id] = std::max<double>(0, g.committed - it->second) / seconds;
          }
        }
      }
    }
    if (!last_ok_ && !last_error_.empty()) spdlog::info("status-refresh-recovered");
    latest_ = std::move(snapshot);
    last_ok_ = true;
    last_ok_at_ = Steady::now();
    last_error_.clear();
    ok = true;
  } catch (const std::exception& e) {
    errors_++;
    session.reset();
    std::lock_guard lock(mu_);
    if (last_ok_ || last_error_.empty()) spdlog::warn("status-refresh-failed: {}", e.what());
    last_ok_ = false;
    last_error_ = e.what();
  }
  record_history(now, ok);
}

}  // namespace sqlstreams::ops
