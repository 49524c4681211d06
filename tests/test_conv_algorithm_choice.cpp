// Benchmark mode's choice of a convolution algorithm (Note [Benchmark mode's
// choice] in src/backends/common/algorithm_choice.h): a plain function of
// the candidates' times and workspaces, tested here without a GPU; the CUDA
// backend's cuDNN glue feeds it (cudnn_conv.cpp).
#include <gtest/gtest.h>

#include <vector>

#include "backends/common/algorithm_choice.h"

namespace {

using anvil::device_common::AlgorithmCandidate;
using anvil::device_common::choose_algorithm;
using anvil::device_common::median_ms;

constexpr std::size_t kMiB = std::size_t{1} << 20;

TEST(ConvAlgorithmChoice, TheFastestWithinTheCapWins) {
  const std::vector<AlgorithmCandidate> c{
      {.algo = 1, .workspace = 0, .usable = true, .median_ms = 0.30},
      {.algo = 6, .workspace = 8 * kMiB, .usable = true, .median_ms = 0.12},
      {.algo = 0, .workspace = 0, .usable = true, .median_ms = 0.50},
  };
  EXPECT_EQ(choose_algorithm(c, 64 * kMiB), 1);
}

TEST(ConvAlgorithmChoice, AFasterOneOverTheCapIsNotTaken) {
  // What cudnnFind did on the H200: the fastest algorithm whatever its
  // workspace. Under the cap the next fastest that fits wins.
  const std::vector<AlgorithmCandidate> c{
      {.algo = 1, .workspace = 4 * kMiB, .usable = true, .median_ms = 0.30},
      {.algo = 4, .workspace = 900 * kMiB, .usable = true, .median_ms = 0.10},
      {.algo = 0, .workspace = 0, .usable = true, .median_ms = 0.40},
  };
  EXPECT_EQ(choose_algorithm(c, 256 * kMiB), 0);
  EXPECT_EQ(choose_algorithm(c, 900 * kMiB), 1);  // the cap is inclusive
}

TEST(ConvAlgorithmChoice, UnusableCandidatesAreNeverChosen) {
  // A tensor-op algorithm with TF32 off, or one the library refused.
  const std::vector<AlgorithmCandidate> c{
      {.algo = 7, .workspace = 0, .usable = false, .median_ms = 0.01},
      {.algo = 1, .workspace = 0, .usable = true, .median_ms = 0.20},
  };
  EXPECT_EQ(choose_algorithm(c, 0), 1);
}

TEST(ConvAlgorithmChoice, TiesGoToTheHeuristicsEarlierRank) {
  const std::vector<AlgorithmCandidate> c{
      {.algo = 2, .workspace = 0, .usable = true, .median_ms = 0.25},
      {.algo = 1, .workspace = 0, .usable = true, .median_ms = 0.25},
      {.algo = 5, .workspace = 0, .usable = true, .median_ms = 0.25},
  };
  EXPECT_EQ(choose_algorithm(c, 0), 0);
}

TEST(ConvAlgorithmChoice, NoneTimedFallsBackToTheFirstThatFits) {
  // Nothing could be timed (each run failed): the heuristics' first usable
  // one within the cap, which here is the zero-workspace algorithm.
  const std::vector<AlgorithmCandidate> c{
      {.algo = 6, .workspace = 512 * kMiB, .usable = true},
      {.algo = 3, .workspace = 0, .usable = false},
      {.algo = 0, .workspace = 0, .usable = true},
      {.algo = 1, .workspace = 1 * kMiB, .usable = true},
  };
  EXPECT_EQ(choose_algorithm(c, 64 * kMiB), 2);
}

TEST(ConvAlgorithmChoice, NothingWithinTheCapIsMinusOne) {
  const std::vector<AlgorithmCandidate> c{
      {.algo = 6, .workspace = 512 * kMiB, .usable = true, .median_ms = 0.1},
      {.algo = 0, .workspace = 0, .usable = false},
  };
  EXPECT_EQ(choose_algorithm(c, 64 * kMiB), -1);
  EXPECT_EQ(choose_algorithm({}, 64 * kMiB), -1);
}

TEST(ConvAlgorithmChoice, MedianOfTheTimedRuns) {
  EXPECT_DOUBLE_EQ(median_ms({0.9, 0.1, 0.3}), 0.3);  // one slow outlier ignored
  EXPECT_DOUBLE_EQ(median_ms({0.4, 0.1, 0.3, 0.2}), 0.25);
  EXPECT_DOUBLE_EQ(median_ms({0.7}), 0.7);
  EXPECT_DOUBLE_EQ(median_ms({}), -1);
}

}  // namespace
