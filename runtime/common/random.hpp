// common/random — the default injected randomness: a seeded splitmix64 returning uniform
// values in [0, 1) for jitter. Never rand()/srand(); tests inject their own source instead.
// Threading: RandomSource is internally synchronised.
#pragma once

#include <cstdint>
#include <mutex>
#include <random>

namespace sqlstreams {

class RandomSource {
 public:
  RandomSource()
      : state_(std::random_device{}() ^ (static_cast<uint64_t>(std::random_device{}()) << 32)) {}
  explicit RandomSource(uint64_t seed) : state_(seed) {}

  double next01() {
    std::lock_guard lock(mu_);
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    return static_cast<double>(z >> 11) / 9007199254740992.0;  // 2^53
  }

 private:
  std::mutex mu_;
  uint64_t state_;
};

}  // namespace sqlstreams
