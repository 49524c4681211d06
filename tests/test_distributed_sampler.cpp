// DistributedSampler: disjoint shards that together are the epoch's order,
// the same order on every rank, padding and drop_last, and the DataLoader.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <set>

#include "anvil/anvil.h"

namespace {

using namespace anvil;

TEST(DistributedSampler, ShardsAreDisjointAndInterleaveTheEpochOrder) {
  const std::int64_t n = 20;
  DataLoader one(zeros({n, 1}), zeros({n}), {.batch_size = 4, .shuffle = true, .seed = 9});
  for (std::int64_t epoch : {0, 1, 5}) {
    const auto order = one.order(epoch);
    std::set<std::int64_t> all;
    for (int r = 0; r < 4; ++r) {
      DistributedSampler s(n, 4, r, {.seed = 9});
      const auto mine = s.indices(epoch);
      ASSERT_EQ(static_cast<std::int64_t>(mine.size()), 5);
      for (std::size_t i = 0; i < mine.size(); ++i) {
        EXPECT_EQ(mine[i], order[i * 4 + static_cast<std::size_t>(r)]) << "rank " << r << " epoch " << epoch;
        EXPECT_TRUE(all.insert(mine[i]).second) << "index " << mine[i] << " is on two ranks";
      }
    }
    EXPECT_EQ(all.size(), static_cast<std::size_t>(n));
  }
  // One replica is the DataLoader's shuffle.
  EXPECT_EQ(DistributedSampler(n, 1, 0, {.seed = 9}).indices(3), one.order(3));
}

TEST(DistributedSampler, EpochsDifferAndAreReproducible) {
  DistributedSampler a(100, 2, 1, {.seed = 1});
  DistributedSampler b(100, 2, 1, {.seed = 1});
  EXPECT_EQ(a.indices(2), b.indices(2));
  EXPECT_NE(a.indices(0), a.indices(1));
  EXPECT_NE(a.indices(0), DistributedSampler(100, 2, 1, {.seed = 2}).indices(0));
  const auto plain = DistributedSampler(10, 2, 1, {.shuffle = false}).indices(7);
  EXPECT_EQ(plain, (std::vector<std::int64_t>{1, 3, 5, 7, 9}));
}

TEST(DistributedSampler, PadsByRepeatingOrDropsTheTail) {
  // 10 samples over 3 ranks: 4 each, padded with the first 2 of the order.
  std::vector<std::int64_t> got;
  for (int r = 0; r < 3; ++r) {
    DistributedSampler s(10, 3, r, {.shuffle = false});
    EXPECT_EQ(s.num_samples(), 4);
    EXPECT_EQ(s.total_size(), 12);
    for (auto i : s.indices(0)) got.push_back(i);
  }
  std::sort(got.begin(), got.end());
  EXPECT_EQ(got, (std::vector<std::int64_t>{0, 0, 1, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
  got.clear();
  for (int r = 0; r < 3; ++r) {
    DistributedSampler s(10, 3, r, {.shuffle = true, .seed = 4, .drop_last = true});
    EXPECT_EQ(s.num_samples(), 3);
    for (auto i : s.indices(1)) got.push_back(i);
  }
  EXPECT_EQ(std::set<std::int64_t>(got.begin(), got.end()).size(), 9u) << "disjoint after dropping the tail";
  // Fewer samples than ranks: padding repeats the order.
  EXPECT_EQ(DistributedSampler(2, 5, 4, {.shuffle = false}).indices(0), (std::vector<std::int64_t>{0}));
  EXPECT_TRUE(DistributedSampler(0, 2, 1).indices(0).empty());
}

TEST(DistributedSampler, TheDataLoaderTakesIt) {
  const std::int64_t n = 11;
  const Tensor x = arange(n, cpu(), i64).reshape({n, 1});
  const Tensor y = arange(n, cpu(), i64);
  DistributedSampler s(n, 2, 1, {.seed = 3});
  DataLoader loader(x, y, {.batch_size = 4, .sampler = s});
  EXPECT_EQ(loader.num_samples(), 6);
  EXPECT_EQ(loader.size(), 2);
  for (std::int64_t epoch = 0; epoch < 2; ++epoch) {
    std::vector<std::int64_t> seen;
    for (const auto& [bx, by] : loader)
      for (auto v : by.to_vector<std::int64_t>()) seen.push_back(v);
    EXPECT_EQ(seen, s.indices(epoch)) << "the loader's epoch counter feeds the sampler";
  }
  loader.set_epoch(0);
  std::vector<std::int64_t> again;
  for (const auto& [bx, by] : loader)
    for (auto v : bx.reshape({-1}).to_vector<std::int64_t>()) again.push_back(v);
  EXPECT_EQ(again, s.indices(0));
}

TEST(DistributedSampler, TypedErrors) {
  EXPECT_THROW(DistributedSampler(10, 0, 0), ValueError);
  EXPECT_THROW(DistributedSampler(10, 2, 2), ValueError);
  EXPECT_THROW(DistributedSampler(10, 2, -1), ValueError);
  EXPECT_THROW(DistributedSampler(-1, 2, 0), ValueError);
  EXPECT_THROW(DistributedSampler(10, 2, 0).indices(-1), ValueError);
  DistributedSampler s(10, 2, 0);
  EXPECT_THROW(DataLoader(zeros({10, 1}), zeros({10}), {.shuffle = true, .sampler = s}), ValueError);
  EXPECT_THROW(DataLoader(zeros({9, 1}), zeros({9}), {.sampler = s}), ValueError);
}

}  // namespace
