// consume/backoff — the retry delay as a pure function of (policy, failure count, random).
// docs/design.md#retries-exception-rows-and-dead-letters: the first failure waits
// `initial_backoff`; the k-th later failure (k = 1, 2, …) waits min(base_delay × exponent^(k-1),
// max_delay). With the defaults (5s, 1s, ×2, 5m):
//   failure 1 → 5s, 2 → 1s, 3 → 2s, 4 → 4s, 5 → 8s, …, capped at 5m.
// Jitter j spreads the delay uniformly over [d × (1 - j), d × (1 + j)], never above max_delay
// (and never below zero). `random01` is an injected uniform value in [0, 1).
// Threading: pure.
#pragma once

#include "common/duration.hpp"
#include "config/config.hpp"

namespace sqlstreams::consume {

Millis next_backoff(const config::RetryPolicy& policy, int failures, double random01);

}  // namespace sqlstreams::consume
