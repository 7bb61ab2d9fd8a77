// maintain/schedule — when a maintenance worker runs next, as a pure function (STYLE R15, R16).
// After a successful pass: the period, spread by ±jitter (default 25%) so that hosts and
// workers do not fall into step. After the n-th consecutive failure: failure_backoff ×
// 2^(n-1), capped at max_failure_backoff, spread the same way. `random01` is an injected
// uniform value in [0, 1).
// Threading: pure.
#pragma once

#include "common/duration.hpp"

namespace sqlstreams::maintain {

struct Schedule {
  Millis period{30'000};
  double jitter = 0.25;
  Millis failure_backoff{1000};
  Millis max_failure_backoff{60'000};
};

Millis next_run_delay(const Schedule& schedule, int failures, double random01);

}  // namespace sqlstreams::maintain
