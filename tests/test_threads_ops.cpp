// Threads (DESIGN §4.13), the cases PyTorch documents as safe: ops on
// distinct tensors from many threads (elementwise, every matmul shape class,
// reductions), one model per thread with its own optimiser, the caching
// allocator under churn, and one shared model under no_grad. Each thread
// checks its answers bitwise against the same work done first on one thread.
// The suite's name starts with test_threads so the ThreadSanitizer run
// (CMakePresets.json's tsan) selects it.
#include <gtest/gtest.h>

#include <cstdint>
#include <latch>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "anvil/anvil.h"
#include "device_test.h"
#include "threads_test_support.h"

namespace {

using namespace anvil;
using anvil::testing::ints;
using anvil::testing::on_threads;

class ThreadsOps : public anvil::testing::DeviceTest {};

constexpr int kThreads = 8;

// One thread's work: elementwise chains, matmuls of the shapes that take
// different routes (tiny, square, ragged, transposed operand, batched) and
// reductions, every result read back to the host.
std::vector<std::vector<float>> op_mix(int salt, Device d) {
  const Tensor a = ints({33, 40}, salt, d);
  const Tensor b = ints({33, 40}, salt + 1, d);
  const Tensor w = ints({40, 24}, salt + 2, d);
  std::vector<Tensor> out;
  out.push_back(relu(a * b + a) - b);
  out.push_back(exp(a * 0.25f));
  out.push_back(matmul(ints({4, 5}, salt, d), ints({5, 3}, salt + 3, d)));
  out.push_back(matmul(a, w));
  out.push_back(matmul(ints({64, 64}, salt, d), ints({64, 64}, salt + 4, d)));
  out.push_back(matmul(ints({24, 40}, salt + 5, d).transpose(0, 1), ints({24, 9}, salt + 6, d)));
  out.push_back(bmm(ints({3, 7, 11}, salt, d), ints({3, 11, 5}, salt + 7, d)));
  out.push_back(sum(a, {1}));
  out.push_back(sum(a * b));
  out.push_back(amax(b, {0}));
  out.push_back(argmax(a * b, 1));
  out.push_back(cumsum(a, 0));
  std::vector<std::vector<float>> host;
  for (const Tensor& t : out) host.push_back(t.to(DType::F32).to_vector<float>());
  return host;
}

TEST_P(ThreadsOps, OpsOnDistinctTensorsFromEightThreads) {
  const Device d = GetParam();
  std::vector<std::vector<std::vector<float>>> expected;
  for (int t = 0; t < kThreads; ++t) expected.push_back(op_mix(t, d));
  on_threads(kThreads, [&](int t) {
    for (int round = 0; round < 3; ++round)
      EXPECT_EQ(op_mix(t, d), expected[static_cast<std::size_t>(t)]) << "thread " << t;
  });
}

std::shared_ptr<nn::Sequential> small_model(Device d, int salt) {
  auto net = std::make_shared<nn::Sequential>(nn::Linear(12, 16), nn::ReLU(), nn::Linear(16, 4));
  net->to(d);
  NoGradGuard no_grad;
  for (Tensor p : net->parameters()) p.copy_(ints(p.shape(), salt++, d) * 0.125f);
  return net;
}

// A model and an SGD with momentum, trained for a few steps; returns the
// parameters afterwards.
std::vector<std::vector<float>> train_one_model(int salt, Device d) {
  auto net = small_model(d, salt);
  optim::SGD opt(net->parameters(), optim::SGDOptions{.lr = 0.0625, .momentum = 0.5});
  for (int step = 0; step < 4; ++step) {
    opt.zero_grad();
    const Tensor x = ints({8, 12}, salt + step, d) * 0.5f;
    const Tensor y = ints({8, 4}, salt - step, d);
    ((*net)(x)-y).square().mean().backward();
    opt.step();
  }
  std::vector<std::vector<float>> params;
  for (const Tensor& p : net->parameters()) params.push_back(p.to_vector<float>());
  return params;
}

TEST_P(ThreadsOps, OneModelPerThreadTrainsAsOnOneThread) {
  const Device d = GetParam();
  std::vector<std::vector<std::vector<float>>> expected;
  for (int t = 0; t < kThreads; ++t) expected.push_back(train_one_model(t, d));
  on_threads(kThreads,
             [&](int t) { EXPECT_EQ(train_one_model(t, d), expected[static_cast<std::size_t>(t)]) << "thread " << t; });
}

TEST_P(ThreadsOps, SharedModelUnderNoGradFromEightThreads) {
  const Device d = GetParam();
  auto net = small_model(d, 3);
  std::vector<std::vector<float>> expected;
  {
    NoGradGuard no_grad;
    for (int t = 0; t < kThreads; ++t) expected.push_back((*net)(ints({6, 12}, t, d)).to_vector<float>());
  }
  on_threads(kThreads, [&](int t) {
    NoGradGuard no_grad;
    for (int round = 0; round < 4; ++round) {
      const Tensor y = (*net)(ints({6, 12}, t, d));
      EXPECT_FALSE(y.requires_grad());
      EXPECT_EQ(y.to_vector<float>(), expected[static_cast<std::size_t>(t)]) << "thread " << t;
    }
  });
  for (const Tensor& p : net->parameters()) EXPECT_FALSE(p.grad().defined());
}

// Allocations of many sizes made and freed on eight threads at once: every
// tensor holds what was written to it, and afterwards the device's counters
// balance (as many frees as allocations, `allocated` back where it was).
TEST_P(ThreadsOps, CachingAllocatorChurnKeepsItsBooks) {
  const Device d = GetParam();
  synchronize(d);
  const MemoryStats before = memory_stats(d);
  on_threads(kThreads, [&](int t) {
    for (int i = 0; i < 60; ++i) {
      const std::int64_t n = 1 + (i * 37 + t * 101) % 5000;
      Tensor x = full({n}, static_cast<float>(t * 100 + i % 7), d);
      Tensor y = x + 1.0f;
      const std::vector<float> v = y.to_vector<float>();
      ASSERT_EQ(v.size(), static_cast<std::size_t>(n));
      EXPECT_EQ(v.front(), static_cast<float>(t * 100 + i % 7 + 1));
      EXPECT_EQ(v.back(), v.front());
    }
  });
  synchronize(d);
  const MemoryStats after = memory_stats(d);
  EXPECT_EQ(after.allocated, before.allocated);
  EXPECT_EQ(after.num_allocs - before.num_allocs, after.num_frees - before.num_frees);
  EXPECT_GE(after.num_allocs - before.num_allocs, static_cast<std::uint64_t>(kThreads * 60 * 2));
}

INSTANTIATE_TEST_SUITE_P(Devices, ThreadsOps, ::testing::ValuesIn(anvil::testing::test_devices()),
                         anvil::testing::device_param_name);

}  // namespace
