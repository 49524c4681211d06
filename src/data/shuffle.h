// The seeded, portable shuffle shared by DataLoader and DistributedSampler:
// the same (seed, epoch) gives the same permutation on every machine, so
// every rank of a distributed run agrees on an epoch's order.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace anvil::detail {

// Note [Portable shuffling]
// std::shuffle and std::uniform_int_distribution differ between standard
// libraries, so the same seed would give different orders on different
// machines. SplitMix64 and Lemire's bounded draw are fully specified here.
class SplitMix64 {
 public:
  explicit SplitMix64(std::uint64_t seed) : state_(seed) {}
  std::uint64_t next() {
    std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  // Uniform in [0, bound), bound > 0, without modulo bias: reject the
  // 2^64 mod bound lowest draws.
  std::uint64_t below(std::uint64_t bound) {
    const std::uint64_t threshold = (0 - bound) % bound;
    std::uint64_t r = next();
    while (r < threshold) r = next();
    return r % bound;
  }

 private:
  std::uint64_t state_;
};

// Fisher-Yates over `order` with the stream of (seed, epoch); see Note [Portable shuffling].
inline void shuffle_for_epoch(std::vector<std::int64_t>& order, std::uint64_t seed, std::int64_t epoch) {
  SplitMix64 mix(seed);
  SplitMix64 rng(mix.next() ^ (static_cast<std::uint64_t>(epoch) * 0xd1342543de82ef95ull + 0x2545f4914f6cdd1dull));
  for (std::size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[rng.below(i)]);
}

}  // namespace anvil::detail
