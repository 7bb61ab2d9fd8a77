#include "ops/log_limiter.hpp"

#include <algorithm>

namespace sqlstreams::ops {

LogLimiter::LogLimiter(Millis window, size_t max_keys, const Clock* clock)
    : window_(window), max_keys_(std::max<size_t>(1, max_keys)), clock_(clock) {}

std::optional<uint64_t> LogLimiter::admit(std::string_view key) {
  const SysTime now = clock_->now();
  std::lock_guard lock(mu_);
  auto it = entries_.find(key);
  if (it == entries_.end()) {
    if (entries_.size() >= max_keys_) evict_one();
    entries_.emplace(std::string(key), Entry{now, 0});
    return uint64_t{0};
  }
  Entry& e = it->second;
  if (now - e.logged_at < window_) {
    e.suppressed++;
    return std::nullopt;
  }
  uint64_t suppressed = e.suppressed;
  e = Entry{now, 0};
  return suppressed;
}

std::map<std::string, uint64_t> LogLimiter::take_expired_suppressed() {
  const SysTime now = clock_->now();
  std::map<std::string, uint64_t> out;
  std::lock_guard lock(mu_);
  for (auto& [key, e] : entries_) {
    if (e.suppressed > 0 && now - e.logged_at >= window_) {
      out[key] = e.suppressed;
      e = Entry{now, 0};
    }
  }
  return out;
}

void LogLimiter::evict_one() {
  auto stalest = std::min_element(
      entries_.begin(), entries_.end(),
      [](const auto& a, const auto& b) { return a.second.logged_at < b.second.logged_at; });
  if (stalest != entries_.end()) entries_.erase(stalest);
}

std::string suppressed_suffix(uint64_t n) {
  return n == 0 ? std::string() : " suppressed=" + std::to_string(n);
}

}  // namespace sqlstreams::ops
