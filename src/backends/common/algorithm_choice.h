// Benchmark mode's choice among a library's convolution algorithms (cuDNN's
// today, any vendor library's tomorrow), as a plain function of what was
// measured, so that the rule is tested without a GPU
// (tests/test_conv_algorithm_choice.cpp).
//
//   std::vector<AlgorithmCandidate> c = ...;   // the heuristics' top few, in their order
//   for (auto& x : c) if (x.usable && x.workspace <= cap) x.median_ms = median(times of x);
//   const int i = choose_algorithm(c, cap);     // -1: the caller falls back to its heuristics
//
// Note [Benchmark mode's choice]
// cudnnFind*AlgorithmEx timed every algorithm once, on operands just
// written (hot in L2), with any workspace that could be allocated: on an
// H200 it made a TF32 ResNet-18 step slower (8.6 against 6.2 ms, issue 38).
// Like PyTorch's cudnn.benchmark should: only the heuristics' top
// kBenchmarkCandidates, only those within a workspace cap, each run once to
// warm up and then kBenchmarkRuns times, the median kept. The fastest wins;
// a tie goes to the heuristics' earlier rank. Where none could be timed, the
// heuristics' first usable one within the cap; else -1 (the caller takes
// its heuristics' choice as without benchmark mode).
#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

namespace anvil::device_common {

inline constexpr int kBenchmarkCandidates = 5;  // the heuristics' top few that are timed
inline constexpr int kBenchmarkRuns = 5;        // timed runs per candidate, after one warm-up run

struct AlgorithmCandidate {
  int algo = 0;               // the library's enum value
  std::size_t workspace = 0;  // bytes it asks for
  bool usable = false;        // supported here, in the math allowed (no tensor ops with TF32 off)
  double median_ms = -1;      // its median time; negative: not timed (over the cap, failed, past the top few)
};

// The median of `ms` (the mean of the middle two for an even count); -1 for none.
inline double median_ms(std::vector<double> ms) {
  if (ms.empty()) return -1;
  std::sort(ms.begin(), ms.end());
  const std::size_t n = ms.size();
  return n % 2 == 1 ? ms[n / 2] : 0.5 * (ms[n / 2 - 1] + ms[n / 2]);
}

// The index in `c` (the heuristics' order) of the algorithm to run, by Note
// [Benchmark mode's choice]; -1 when no usable one is within `workspace_cap`.
inline int choose_algorithm(const std::vector<AlgorithmCandidate>& c, std::size_t workspace_cap) {
  int best = -1;
  for (std::size_t i = 0; i < c.size(); ++i) {
    const AlgorithmCandidate& x = c[i];
    if (!x.usable || x.workspace > workspace_cap || x.median_ms < 0) continue;
    if (best < 0 || x.median_ms < c[static_cast<std::size_t>(best)].median_ms) best = static_cast<int>(i);
  }
  if (best >= 0) return best;
  for (std::size_t i = 0; i < c.size(); ++i)
    if (c[i].usable && c[i].workspace <= workspace_cap) return static_cast<int>(i);
  return -1;
}

}  // namespace anvil::device_common
