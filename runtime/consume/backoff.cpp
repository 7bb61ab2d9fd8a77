#include "consume/backoff.hpp"

#include <algorithm>
#include <cmath>

namespace sqlstreams::consume {

Millis next_backoff(const config::RetryPolicy& policy, int failures, double random01) {
  double ms;
  if (failures <= 1) {
    ms = static_cast<double>(policy.initial_backoff.count());
  } else {
    double k = static_cast<double>(failures - 1);
    ms = static_cast<double>(policy.base_delay.count()) * std::pow(policy.exponent, k - 1.0);
    ms = std::min(ms, static_cast<double>(policy.max_delay.count()));  // also guards overflow
  }
  if (policy.jitter > 0) {
    double r = std::clamp(random01, 0.0, 1.0);
    ms *= 1.0 + policy.jitter * (2.0 * r - 1.0);
    ms = std::min(ms,
                  static_cast<double>(std::max(policy.max_delay, policy.initial_backoff).count()));
  }
  return Millis(static_cast<int64_t>(std::max(0.0, std::round(ms))));
}

}  // namespace sqlstreams::consume
