// Memory (DESIGN §4.9) on every device: memory_stats, the caching allocator's
// reuse, empty_cache, set_memory_limit and OutOfMemory; the process and every
// existing tensor stay usable after running out.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "device_test.h"
#include "reference.h"

namespace {

using namespace anvil;

// Restores the device's limit (none) however the test ends.
struct LimitGuard {
  Device d;
  ~LimitGuard() { set_memory_limit(d, 0); }
};

class Memory : public anvil::testing::DeviceTest {};

constexpr std::uint64_t kMiB = 1 << 20;

TEST_P(Memory, AllocatedGrowsAndShrinks) {
  const Device d = device();
  synchronize(d);
  const MemoryStats s0 = memory_stats(d);
  EXPECT_LE(s0.allocated, s0.reserved);
  std::uint64_t a1 = 0;
  {
    auto x = empty({16 * 1024 * 1024 / 4}, d);  // 16 MiB
    const MemoryStats s1 = memory_stats(d);
    a1 = s1.allocated;
    EXPECT_GE(s1.allocated, s0.allocated + 16 * kMiB);
    EXPECT_LE(s1.allocated, s0.allocated + 20 * kMiB) << "at most 25% rounding";
    EXPECT_GE(s1.reserved, s1.allocated);
    EXPECT_GE(s1.peak_allocated, s1.allocated);
    EXPECT_EQ(s1.num_allocs, s0.num_allocs + 1);
    // A view allocates nothing.
    auto v = x.reshape({1024, 4096}).t();
    EXPECT_EQ(memory_stats(d).allocated, s1.allocated);
  }
  synchronize(d);
  const MemoryStats s2 = memory_stats(d);
  EXPECT_EQ(s2.allocated, s0.allocated);
  EXPECT_EQ(s2.num_frees, s0.num_frees + 1);
  EXPECT_GE(s2.peak_allocated, a1);
  // Freed memory stays reserved, cached for reuse.
  EXPECT_GE(s2.reserved, s2.allocated + 16 * kMiB);
}

TEST_P(Memory, RepeatedSameSizeAllocationHitsTheCache) {
  const Device d = device();
  { auto warm = empty({1000003}, d); }
  synchronize(d);
  const MemoryStats s0 = memory_stats(d);
  for (int i = 0; i < 10; ++i) {
    auto x = empty({1000003}, d);  // an odd size: served from its size class
    (void)x;
  }
  synchronize(d);
  const MemoryStats s1 = memory_stats(d);
  EXPECT_GE(s1.cache_hits, s0.cache_hits + 10);
  EXPECT_EQ(s1.num_allocs, s0.num_allocs + 10);
  EXPECT_EQ(s1.reserved, s0.reserved) << "a cached block was reused, nothing new reserved";
  // A loop that allocates a result every step (c = a + b) reuses too.
  auto a = ones({100000}, d), b = ones({100000}, d);
  { auto c = a + b; }
  const MemoryStats s2 = memory_stats(d);
  for (int i = 0; i < 20; ++i) {
    auto c = a + b;
    (void)c;
  }
  synchronize(d);
  EXPECT_EQ(memory_stats(d).reserved, s2.reserved);
  EXPECT_GE(memory_stats(d).cache_hits, s2.cache_hits + 20);
}

TEST_P(Memory, EmptyCacheReleasesFreeBlocks) {
  const Device d = device();
  { auto x = empty({8 * 1024 * 1024 / 4}, d); }
  synchronize(d);
  EXPECT_GT(memory_stats(d).reserved, memory_stats(d).allocated);
  empty_cache(d);
  const MemoryStats s = memory_stats(d);
  EXPECT_EQ(s.reserved, s.allocated);
  // Live tensors are untouched.
  auto keep = full({1000}, 3.0, d);
  empty_cache(d);
  EXPECT_TRUE(ref::exact(keep, ref::Array::filled({1000}, 3.0)));
}

TEST_P(Memory, ResetPeak) {
  const Device d = device();
  { auto x = empty({4 * 1024 * 1024}, d); }
  synchronize(d);
  EXPECT_GT(memory_stats(d).peak_allocated, memory_stats(d).allocated);
  reset_peak_memory_stats(d);
  EXPECT_EQ(memory_stats(d).peak_allocated, memory_stats(d).allocated);
}

TEST_P(Memory, LimitRaisesOutOfMemoryAndEverythingStaysUsable) {
  const Device d = device();
  LimitGuard guard{d};
  auto keep = arange(0, 1000, 1, d, f32);  // exists before the failure
  empty_cache(d);
  const MemoryStats s0 = memory_stats(d);
  set_memory_limit(d, s0.reserved + 8 * kMiB);
  EXPECT_EQ(memory_stats(d).limit, s0.reserved + 8 * kMiB);
  // 4 MiB fits.
  auto small = ones({1024 * 1024}, d);
  // 64 MiB does not.
  const std::int64_t n = 16 * 1024 * 1024;
  try {
    auto big = empty({n}, d);
    ADD_FAILURE() << "allocated " << big.nbytes() << " bytes past the limit";
  } catch (const OutOfMemory& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find(d.str()), std::string::npos) << "should name the device: " << m;
    EXPECT_TRUE(m.find("64.0 MiB") != std::string::npos || m.find(std::to_string(n * 4)) != std::string::npos)
        << "should name the request: " << m;
    EXPECT_NE(m.find("allocated"), std::string::npos) << m;
    EXPECT_NE(m.find("reserved"), std::string::npos) << m;
  }
  // Nothing leaked by the failed allocation.
  EXPECT_EQ(memory_stats(d).allocated, s0.allocated + small.nbytes());
  // Existing tensors are intact and ops on them work.
  std::vector<double> want(1000);
  for (std::size_t i = 0; i < want.size(); ++i) want[i] = static_cast<double>(i);
  EXPECT_TRUE(ref::exact(keep, ref::Array({1000}, want)));
  EXPECT_EQ(small.sum().item<float>(), 1024.0f * 1024.0f);
  // An op whose result does not fit fails cleanly too.
  EXPECT_THROW(ones({n}, d), OutOfMemory);
  EXPECT_THROW((void)(small.expand({64, 1024 * 1024}) + 1), OutOfMemory);
  // Raising the limit makes it work again.
  set_memory_limit(d, s0.reserved + 128 * kMiB);
  EXPECT_NO_THROW({
    auto big = empty({n}, d);
    (void)big;
  });
  // As does removing it.
  set_memory_limit(d, 0);
  auto big = ones({n}, d);
  EXPECT_EQ(big.sum().item<float>(), static_cast<float>(n));
}

TEST_P(Memory, FreeingMakesRoomUnderALimit) {
  const Device d = device();
  LimitGuard guard{d};
  empty_cache(d);
  const MemoryStats s0 = memory_stats(d);
  set_memory_limit(d, s0.reserved + 40 * kMiB);
  auto a = empty({8 * 1024 * 1024}, d);  // 32 MiB
  EXPECT_THROW(empty({8 * 1024 * 1024}, d), OutOfMemory);
  a = Tensor();  // free it
  synchronize(d);
  // The freed block is cached and reused for the same size...
  EXPECT_NO_THROW({ auto b = empty({8 * 1024 * 1024}, d); });
  // ...and a different size gets room once the cache is emptied by the retry.
  EXPECT_NO_THROW({ auto c = empty({9 * 1024 * 1024}, d); });
}

ANVIL_INSTANTIATE_DEVICE_TEST(Memory);

}  // namespace
