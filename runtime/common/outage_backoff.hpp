// common/outage_backoff — the one "the database went away" state machine of the runtime's loops
// (claimer, retrier, committer, maintenance runner;
// docs/design.md#signals-reload-and-a-lost-database: log once, back off, reconnect). Pure: it
// neither sleeps nor logs. A loop asks it, on each failed attempt, how long to wait and whether
// this failure is the first of an outage (then the loop logs its `…-unavailable` / `…-failed`
// line), and tells it of each success, which ends the outage (the loop then logs its
// `…-reconnected` / `…-recovered` line, once) and resets the delay. The first delay of an outage is
// `initial`; each later one doubles, at most `cap` (initial == cap: a constant delay).
// Threading: none (one loop owns one instance).
#pragma once

#include <algorithm>
#include <chrono>

namespace sqlstreams {

class OutageBackoff {
 public:
  // The longest wait of the consume loops between attempts while the database is away
  // (docs/design.md#signals-reload-and-a-lost-database: back off to 5 s).
  static constexpr std::chrono::milliseconds kMaxDelay{5000};

  struct Step {
    std::chrono::milliseconds delay;  // wait this long before the next attempt
    bool log_now;                     // the first failure of this outage: log it
  };

  // Both > 0 (a zero delay would never grow).
  OutageBackoff(std::chrono::milliseconds initial, std::chrono::milliseconds cap)
      : initial_(initial), cap_(cap), next_(initial) {}

  // One more failed attempt: the delay to wait now (the next one doubles, up to the cap).
  [[nodiscard]] Step on_failure() {
    Step step{next_, !down_};
    down_ = true;
    next_ = std::min(next_ * 2, cap_);
    return step;
  }

  // A successful attempt: true when it ends an outage (log the recovery now). Resets the delay.
  bool on_success() {
    const bool was_down = down_;
    down_ = false;
    next_ = initial_;
    return was_down;
  }

  bool down() const { return down_; }
  std::chrono::milliseconds next_delay() const { return next_; }

 private:
  std::chrono::milliseconds initial_;
  std::chrono::milliseconds cap_;
  std::chrono::milliseconds next_;
  bool down_ = false;
};

}  // namespace sqlstreams
