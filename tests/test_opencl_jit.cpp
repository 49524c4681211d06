// PoCL compiles each kernel's work-group function lazily, on a device worker
// thread, when the command first runs. With a cold kernel cache a process
// that exits while that is still going on used to crash inside LLVM, whose
// static state the exit had already destroyed (see docs/opencl.md, "PoCL:
// kernels compiling at exit", and Note [A kernel's first run waits on CPU
// devices] in launch.h). These tests run this binary as a child
// with an empty POCL_CACHE_DIR and two PoCL devices, launching a handful of
// first-time kernels on opencl:0 and opencl:1 from two threads at once, and
// check that the child exits 0.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "anvil/anvil.h"
#include "opencl_test_support.h"

namespace {

using namespace anvil;
using anvil::testing::opencl_count;

bool is_child() { return anvil::testing::in_child(); }

// Different kernels (fill, arange, random, elementwise, reductions, index,
// tiled matmul, strided copy), each launched for the first time on `d`.
// Returns a checksum that does not depend on the device.
float first_launches(const Device& d) {
  const Tensor a = arange(0, 64, 1, d, f32).reshape({8, 8});
  const Tensor b = ones({8, 8}, d);
  const Tensor r = rand({8, 8}, d);
  const Tensor c = exp(a * 0.01f) + b;
  const Tensor m = matmul(c, b);           // small: anvil's tiled kernel, not CLBlast
  const Tensor w = where(r < 2.0f, m, b);  // r < 2 everywhere: w == m
  const Tensor s = w.permute({1, 0}).contiguous();
  const Tensor idx = tensor(std::vector<std::int64_t>{0, 7, 3}, d);
  const Tensor g = index_select(s, 0, idx);
  return g.sum().item<float>() + max(a).item<float>();
}

// Queues a few more first-time kernels (CLBlast's GEMM among them) and
// returns without waiting for them.
void queue_without_waiting(const Device& d, std::vector<Tensor>& keep) {
  const Tensor x = arange(0, 1000, 1, d, f32);
  keep.push_back(sqrt(abs(x - 3.0f)));
  keep.push_back(sum(tanh(x).reshape({10, 100}), {1}));
  keep.push_back(minimum(x.reshape({10, 100}).permute({1, 0}), 500.0f));
  keep.push_back(matmul(x.reshape({10, 100}), x.reshape({100, 10})));  // CLBlast's kernels, where it is built in
}

void run_on_two_devices(bool wait_at_the_end) {
  const Device d0(DeviceType::OpenCL, 0), d1(DeviceType::OpenCL, 1);
  float sums[2] = {0, 0};
  std::vector<Tensor> keep[2];
  auto work = [&](int i, const Device& d) {
    sums[i] = first_launches(d);
    queue_without_waiting(d, keep[i]);
    if (wait_at_the_end) synchronize(d);
  };
  std::thread t0(work, 0, d0), t1(work, 1, d1);
  t0.join();
  t1.join();
  std::printf("RESULT sums=%s\n", sums[0] == sums[1] && sums[0] > 0 ? "equal" : "differ");
  std::fflush(stdout);
  // With wait_at_the_end false the process exits here, kernels still queued.
}

TEST(OpenCLJitChild, TwoThreadsTwoDevices) {
  if (!is_child()) GTEST_SKIP() << "runs as a child of OpenCLJit.ColdCache...";
  ASSERT_GE(opencl_count(), 2);
  run_on_two_devices(true);
}

TEST(OpenCLJitChild, TwoThreadsTwoDevicesExitWithWorkQueued) {
  if (!is_child()) GTEST_SKIP() << "runs as a child of OpenCLJit.ColdCache...";
  ASSERT_GE(opencl_count(), 2);
  run_on_two_devices(false);
}

bool has_pocl_device() {
  for (int i = 0; i < opencl_count(); ++i)
    if (properties(Device(DeviceType::OpenCL, i)).runtime_version.find("PoCL") != std::string::npos) return true;
  return false;
}

// Runs `filter` in a child with a fresh, empty PoCL cache and two PoCL CPU
// devices; returns its output and exit status.
std::string run_cold(const std::string& filter, int* status) {
  std::string dir = (std::filesystem::temp_directory_path() / "anvil-pocl-cold-XXXXXX").string();
  if (mkdtemp(dir.data()) == nullptr) {
    ADD_FAILURE() << "mkdtemp failed for " << dir;
    return "";
  }
  const std::string out = anvil::testing::run_child(
      "POCL_CACHE_DIR='" + dir + "' POCL_DEVICES='pthread pthread' ANVIL_OPENCL_CPU=1", filter, status);
  std::error_code ignored;
  std::filesystem::remove_all(dir, ignored);
  return out;
}

void expect_clean_exit(const std::string& filter) {
  int status = -1;
  const std::string out = run_cold(filter, &status);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << (WIFSIGNALED(status) ? "killed by signal " + std::to_string(WTERMSIG(status))
                              : "exit status " + std::to_string(WEXITSTATUS(status)))
      << "\n"
      << out;
  EXPECT_NE(out.find("RESULT sums=equal"), std::string::npos) << out;
}

TEST(OpenCLJit, ColdCacheTwoDevicesLaunchingAtOnce) {
  if (is_child()) GTEST_SKIP();
  ANVIL_REQUIRE_OPENCL(1);
  if (!has_pocl_device()) GTEST_SKIP() << "needs PoCL (the child asks it for two pthread devices)";
  expect_clean_exit("OpenCLJitChild.TwoThreadsTwoDevices");
}

TEST(OpenCLJit, ColdCacheExitWhileKernelsAreStillQueued) {
  if (is_child()) GTEST_SKIP();
  ANVIL_REQUIRE_OPENCL(1);
  if (!has_pocl_device()) GTEST_SKIP() << "needs PoCL (the child asks it for two pthread devices)";
  expect_clean_exit("OpenCLJitChild.TwoThreadsTwoDevicesExitWithWorkQueued");
}

}  // namespace
