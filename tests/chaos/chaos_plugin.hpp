// tests/chaos — the chaos plugin's decision: which behaviour a message shows, as a pure function
// of (seed, group, message id), shared by the plugin (chaos.so) and the checker, so the checker
// knows what each message's end state must be without trusting the plugin's records.
// Threading: pure functions.
#pragma once

#include <cstdint>
#include <string_view>

namespace sqlstreams::chaos {

enum class Behaviour {
  kOk,         // OK at once
  kSlow,       // sleeps slow_ms, then OK
  kFlaky,      // RETRY on attempt 1, then OK
  kFail,       // RETRY on every attempt: dead after max_retries + 1 failures
  kTerminal,   // TERMINAL at once
  kDelayOnce,  // DELAY on attempt 1, then OK
  kDelayFail,  // DELAY on attempts 1 and 2, then RETRY: dead with delays not spending budget
  kTimeout,    // hangs past handler_timeout on attempt 1, then OK
};

inline uint64_t mix64(uint64_t x) {  // splitmix64 finaliser
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

inline uint64_t fnv1a(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ULL;
  return h;
}

inline Behaviour behaviour_of(uint64_t seed, std::string_view group, int64_t id) {
  const uint64_t h = mix64(seed ^ fnv1a(group) ^ mix64(static_cast<uint64_t>(id))) % 100;
  if (h < 60) return Behaviour::kOk;
  if (h < 68) return Behaviour::kSlow;
  if (h < 78) return Behaviour::kFlaky;
  if (h < 83) return Behaviour::kFail;
  if (h < 88) return Behaviour::kTerminal;
  if (h < 93) return Behaviour::kDelayOnce;
  if (h < 96) return Behaviour::kDelayFail;
  return Behaviour::kTimeout;
}

// The chain (tests/chaos/README.md#the-chain-chaosoptionschain-on-by-default): how many outputs a
// call of the emitting group that returns OK emits for message `id`: 1 or 2, and kManyOutputs for
// one message in kManyOutputsEvery, enough that its commit writes them by COPY
// (store::Producer::kCopyFromRows) whatever else it commits.
inline constexpr int kManyOutputs = 260;
inline constexpr int64_t kManyOutputsEvery = 397;
inline int outputs_of(int64_t id) {
  return id % kManyOutputsEvery == 0 ? kManyOutputs : 1 + static_cast<int>(id % 2);
}

// True for behaviours whose message must end dead (with no fault and no operator action).
inline bool ends_dead(Behaviour b) {
  return b == Behaviour::kFail || b == Behaviour::kTerminal || b == Behaviour::kDelayFail;
}

inline const char* name_of(Behaviour b) {
  switch (b) {
    case Behaviour::kOk:
      return "ok";
    case Behaviour::kSlow:
      return "slow";
    case Behaviour::kFlaky:
      return "flaky";
    case Behaviour::kFail:
      return "fail";
    case Behaviour::kTerminal:
      return "terminal";
    case Behaviour::kDelayOnce:
      return "delay-once";
    case Behaviour::kDelayFail:
      return "delay-fail";
    case Behaviour::kTimeout:
      return "timeout";
  }
  return "?";
}

}  // namespace sqlstreams::chaos
