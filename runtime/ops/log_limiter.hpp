// ops/log_limiter — rate-limits repeated identical warnings (docs/design.md#the-host). The first
// occurrence of a key is logged at once; later ones within `window` are only counted; the first
// one after the window is logged again with the number suppressed in between
// (`... suppressed=N`). Keys are what makes two warnings "identical" — e.g. the event name plus
// stream and group, not the message id. At most `max_keys` keys are remembered (the stalest
// is forgotten first), so a flood of distinct keys cannot grow memory.
//   static ops::LogLimiter limiter;  // one per warn site, or shared
//   if (auto n = limiter.admit("lease-lost " + stream + "/" + group))
//     spdlog::warn("lease-lost stream={} group={} ...{}", ..., ops::suppressed_suffix(*n));
// Threading: thread-safe (one mutex; admit() is a map lookup).
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "common/clock.hpp"
#include "common/duration.hpp"

namespace sqlstreams::ops {

class LogLimiter {
 public:
  explicit LogLimiter(Millis window = Millis(10'000), size_t max_keys = 1024,
                      const Clock* clock = &SystemClock::instance());

  // nullopt: stay silent (counted). Otherwise log now; the value is how many were suppressed
  // since this key was last logged (0 the first time).
  std::optional<uint64_t> admit(std::string_view key);

  // Keys with suppressed occurrences whose window has passed, with their counts; they are
  // reset (for a periodic "…suppressed=N" summary when the repeats stopped).
  std::map<std::string, uint64_t> take_expired_suppressed();

 private:
  struct Entry {
    SysTime logged_at{};
    uint64_t suppressed = 0;
  };
  void evict_one();

  Millis window_;
  size_t max_keys_;
  const Clock* clock_;
  std::mutex mu_;
  std::map<std::string, Entry, std::less<>> entries_;
};

// " suppressed=N" when n > 0, "" otherwise: append to the logged message.
std::string suppressed_suffix(uint64_t n);

}  // namespace sqlstreams::ops
