#include "maintain/schedule.hpp"

#include <algorithm>
#include <cmath>

namespace sqlstreams::maintain {

Millis next_run_delay(const Schedule& schedule, int failures, double random01) {
  double base = static_cast<double>(schedule.period.count());
  if (failures > 0) {
    const double cap = static_cast<double>(schedule.max_failure_backoff.count());
    const double first = static_cast<double>(schedule.failure_backoff.count());
    base = std::min(cap, first * std::pow(2.0, std::min(failures - 1, 40)));
  }
  const double jitter = std::clamp(schedule.jitter, 0.0, 1.0);
  const double r = std::clamp(random01, 0.0, 1.0);
  const double spread = base * (1.0 + jitter * (2.0 * r - 1.0));
  return Millis(std::max<int64_t>(1, std::llround(spread)));
}

}  // namespace sqlstreams::maintain
