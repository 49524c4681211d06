// The OpenCL backend's environment switches, read through the one env_flag
// helper (src/core/env_flag.h): every spelling of "off" turns a default off.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "anvil/anvil.h"
#include "opencl_test_support.h"
#ifdef ANVIL_WITH_OPENCL
#include "backends/opencl/testing.h"
#endif

namespace {

using namespace anvil;
using anvil::testing::opencl_count;

#ifdef ANVIL_WITH_OPENCL

bool built_a_gemm_kernel(int index, const std::string& dtype) {
  const std::vector<std::string> built = opencl::testing::kernels_built(index);
  return std::any_of(built.begin(), built.end(),
                     [&](const std::string& k) { return k.rfind("gemm_" + dtype, 0) == 0; });
}

// ANVIL_OPENCL_CLBLAST=off was ignored (only "0" was read): matmul kept
// using CLBlast.
TEST(OpenCLEnvironment, ClblastOffUsesTheTiledKernel) {
  ANVIL_REQUIRE_OPENCL(1);
  const Device d(DeviceType::OpenCL, 0);
  manual_seed(5);
  const Tensor a = rand({64, 48}), b = rand({48, 32});
  const Tensor want = matmul(a, b);

  unsetenv("ANVIL_OPENCL_CLBLAST");
  EXPECT_TRUE(allclose(matmul(a.to(d), b.to(d)).cpu(), want, 1e-4, 1e-5));
#ifdef ANVIL_WITH_CLBLAST
  EXPECT_FALSE(built_a_gemm_kernel(0, "f32")) << "CLBlast is built in and on by default";
#endif

  setenv("ANVIL_OPENCL_CLBLAST", "off", 1);
  EXPECT_TRUE(allclose(matmul(a.to(d), b.to(d)).cpu(), want, 1e-4, 1e-5));
  unsetenv("ANVIL_OPENCL_CLBLAST");
  EXPECT_TRUE(built_a_gemm_kernel(0, "f32")) << "ANVIL_OPENCL_CLBLAST=off must use anvil's tiled GEMM";
}

// ANVIL_NO_FUSED=1 (what the test_nn_unfused and test_autograd_unfused
// ctest entries set) makes conv2d and max_pool2d take the composite path:
// no window kernel is built, and the results are the fused path's.
TEST(OpenCLEnvironment, NoFusedBuildsTheOpsFromPrimitives) {
  ANVIL_REQUIRE_OPENCL(1);
  const int index = opencl_count() - 1;  // the other tests here use opencl:0
  const Device d(DeviceType::OpenCL, index);
  auto window_kernels = [&] {
    const std::vector<std::string> built = opencl::testing::kernels_built(index);
    return std::count_if(built.begin(), built.end(), [](const std::string& k) { return k.rfind("window_", 0) == 0; });
  };
  manual_seed(9);
  const Tensor x = rand({2, 3, 9, 9}), w = rand({4, 3, 3, 3});
  auto run = [&] { return max_pool2d(conv2d(x.to(d), w.to(d)), {2, 2}, {2, 2}).cpu(); };

  setenv("ANVIL_NO_FUSED", "1", 1);
  const Tensor composite = run();
  unsetenv("ANVIL_NO_FUSED");
  EXPECT_EQ(window_kernels(), 0) << "ANVIL_NO_FUSED=1 must not use the fused window kernels";
  const Tensor fused = run();
  EXPECT_GT(window_kernels(), 0) << "without ANVIL_NO_FUSED, opencl uses its fused kernels";
  EXPECT_TRUE(allclose(composite, fused, 1e-4, 1e-5));
}

#endif

}  // namespace
