// OpenCL memory (DESIGN §4.9): the caching allocator per device, a limit set
// in code or by ANVIL_MEMORY_LIMIT, and OutOfMemory that leaves every
// existing tensor intact and the device usable. (PoCL aborts the process on
// a failed huge clCreateBuffer, so a limit is how OOM is tested here.)
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "anvil/anvil.h"
#include "opencl_test_support.h"

namespace {

using namespace anvil;
using anvil::testing::opencl_count;

constexpr std::uint64_t kMiB = 1 << 20;

struct LimitGuard {
  Device d;
  ~LimitGuard() { set_memory_limit(d, 0); }
};

TEST(OpenCLMemory, OutOfMemoryUnderALimitLeavesTensorsIntact) {
  ANVIL_REQUIRE_OPENCL(1);
  for (int i = 0; i < std::min(opencl_count(), 2); ++i) {
    const Device d(DeviceType::OpenCL, i);
    SCOPED_TRACE(d.str());
    synchronize(d);
    empty_cache(d);
    LimitGuard guard{d};
    const std::uint64_t base = memory_stats(d).reserved;
    // 1 MiB of headroom for the small results read below.
    set_memory_limit(d, base + 49 * kMiB);
    Tensor a = full({8 * 1024 * 1024}, 1.5, d);  // 32 MiB
    Tensor b = full({4 * 1024 * 1024}, 2.5, d);  // 16 MiB: 1 MiB below the limit
    try {
      Tensor c = empty({4 * 1024 * 1024}, d);
      ADD_FAILURE() << "no error";
    } catch (const OutOfMemory& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find(d.str()), std::string::npos) << m;
      EXPECT_NE(m.find("limit"), std::string::npos) << m;
      EXPECT_NE(m.find("16.0 MiB"), std::string::npos) << "names the request: " << m;
    }
    // Everything that existed is intact and usable.
    EXPECT_DOUBLE_EQ(a.sum().item<double>(), 1.5 * 8 * 1024 * 1024);
    EXPECT_FLOAT_EQ(b.max().item<float>(), 2.5f);
    EXPECT_FLOAT_EQ(b.min().item<float>(), 2.5f);
    // Freeing makes room again.
    b = Tensor();
    Tensor c = full({4 * 1024 * 1024}, 3.0, d);
    EXPECT_FLOAT_EQ(c.max().item<float>(), 3.0f);
    EXPECT_LE(memory_stats(d).reserved, base + 49 * kMiB);
  }
}

TEST(OpenCLMemory, CacheIsPerDevice) {
  ANVIL_REQUIRE_OPENCL(2);
  const Device d0(DeviceType::OpenCL, 0), d1(DeviceType::OpenCL, 1);
  synchronize(d0);
  synchronize(d1);
  const MemoryStats s1 = memory_stats(d1);
  { Tensor x = empty({1 << 20}, d0); }
  EXPECT_EQ(memory_stats(d1).num_allocs, s1.num_allocs) << "opencl:1 is not touched by opencl:0's allocations";
  EXPECT_EQ(memory_stats(d1).reserved, s1.reserved);
  empty_cache(d0);
  EXPECT_EQ(memory_stats(d0).reserved, memory_stats(d0).allocated);
}

TEST(OpenCLMemoryChild, EnvLimit) {
  if (!anvil::testing::in_child()) GTEST_SKIP() << "runs as a child of LimitFromTheEnvironment";
  const Device d(DeviceType::OpenCL, 0);
  std::printf("RESULT limit=%llu\n", static_cast<unsigned long long>(memory_stats(d).limit));
  try {
    Tensor x = empty({8 * 1024 * 1024}, d);  // 32 MiB > 16 MiB
    std::printf("RESULT oom=no\n");
  } catch (const OutOfMemory&) {
    std::printf("RESULT oom=yes\n");
  }
  Tensor small = full({1024}, 1.0, d);
  std::printf("RESULT small=%g\n", static_cast<double>(small.sum().item<float>()));
}

TEST(OpenCLMemory, LimitFromTheEnvironment) {
  ANVIL_REQUIRE_OPENCL(1);
  const std::string out = anvil::testing::run_child("ANVIL_MEMORY_LIMIT=opencl:0=16M", "OpenCLMemoryChild.EnvLimit");
  EXPECT_NE(out.find("RESULT limit=16777216"), std::string::npos) << out;
  EXPECT_NE(out.find("RESULT oom=yes"), std::string::npos) << out;
  EXPECT_NE(out.find("RESULT small=1024"), std::string::npos) << out;
}

}  // namespace
