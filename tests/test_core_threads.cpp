// Threads: one thread budget for anvil's loops and BLAS (issue 2). Results do
// not depend on the thread count beyond rounding, and distinct tensors can be
// used from distinct threads.
#include <gtest/gtest.h>

#include <cmath>
#include <thread>
#include <vector>

#include "device_test.h"
#include "reference.h"

namespace {

using namespace anvil;
using ref::Domain;
using ref::Layout;

// Restores the thread count however the test ends.
struct ThreadsGuard {
  int saved = num_threads();
  ~ThreadsGuard() { set_num_threads(saved); }
};

class Threads : public anvil::testing::DeviceTest {};

TEST(ThreadCount, SetAndGet) {
  ThreadsGuard guard;
  EXPECT_GE(num_threads(), 1);
  set_num_threads(1);
  EXPECT_EQ(num_threads(), 1);
  set_num_threads(2);
  EXPECT_EQ(num_threads(), 2);
  set_num_threads(3);
  EXPECT_EQ(num_threads(), 3);
  EXPECT_THROW(set_num_threads(0), ValueError);
  EXPECT_THROW(set_num_threads(-2), ValueError);
  EXPECT_EQ(num_threads(), 3) << "a rejected value leaves the setting alone";
}

TEST_P(Threads, ResultsDoNotDependOnTheThreadCount) {
  const Device d = device();
  ThreadsGuard guard;
  const auto big = ref::make_input({1000003}, Layout::Contiguous, f32, d, Domain{-1, 1}, 1);
  const auto a = ref::make_input({257, 311}, Layout::Transposed, f32, d, Domain{-1, 1}, 2);
  const auto b = ref::make_input({311, 263}, Layout::Contiguous, f32, d, Domain{-1, 1}, 3);
  const auto m = ref::make_input({300, 1001}, Layout::Stepped, f64, d, Domain{-1, 1}, 4);
  struct Results {
    Tensor sum, mean, max, argmax, rowsum, colsum, mm, exp, norm, var;
  };
  auto run = [&] {
    Results r;
    r.sum = big.t.sum();
    r.mean = big.t.mean();
    r.max = big.t.max();
    r.argmax = argmax(big.t);
    r.rowsum = sum(m.t, {1});
    r.colsum = sum(m.t, {0});
    r.mm = matmul(a.t, b.t);
    r.exp = exp(big.t) * big.t;
    r.norm = norm(m.t);
    r.var = var(m.t, {0});
    return r;
  };
  set_num_threads(1);
  const Results one = run();
  set_num_threads(2);
  const Results two = run();
  set_num_threads(4);
  const Results four = run();
  for (const Results* r : {&two, &four}) {
    EXPECT_TRUE(allclose(r->sum.cpu(), one.sum.cpu(), 1e-5, 1e-3));
    EXPECT_TRUE(allclose(r->mean.cpu(), one.mean.cpu(), 1e-5, 1e-8));
    EXPECT_TRUE(equal(r->max.cpu(), one.max.cpu()));
    EXPECT_TRUE(equal(r->argmax.cpu(), one.argmax.cpu()));
    EXPECT_TRUE(allclose(r->rowsum.cpu(), one.rowsum.cpu(), 1e-12, 1e-12));
    EXPECT_TRUE(allclose(r->colsum.cpu(), one.colsum.cpu(), 1e-12, 1e-12));
    EXPECT_TRUE(allclose(r->mm.cpu(), one.mm.cpu(), 1e-5, 1e-5));
    EXPECT_TRUE(equal(r->exp.cpu(), one.exp.cpu())) << "elementwise results are bitwise identical";
    EXPECT_TRUE(allclose(r->norm.cpu(), one.norm.cpu(), 1e-12, 1e-12));
    EXPECT_TRUE(allclose(r->var.cpu(), one.var.cpu(), 1e-12, 1e-12));
  }
  // And all agree with the reference.
  EXPECT_TRUE(ref::close(two.sum, ref::sum(big.r), ref::Tolerance{1e-4, 1e-2}));
  EXPECT_TRUE(ref::close(two.mm, ref::matmul(a.r, b.r), ref::Tolerance{1e-4, 1e-3}));
  EXPECT_TRUE(ref::close(two.rowsum, ref::sum(m.r, {1}), ref::Tolerance{1e-10, 1e-10}));
}

TEST_P(Threads, DistinctTensorsFromDistinctThreads) {
  const Device d = device();
  constexpr int kThreads = 4;
  std::vector<std::thread> threads;
  std::vector<int> ok(kThreads, 0);
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      try {
        bool good = true;
        for (int i = 0; i < 20; ++i) {
          auto x = full({100, 100}, static_cast<double>(t + 1), d);
          auto y = matmul(x, x).sum();  // 100 * 100 * 100 * (t+1)^2
          const float want = 1e6f * static_cast<float>((t + 1) * (t + 1));
          good = good && std::abs(y.item<float>() - want) <= want * 1e-5f;
          auto z = (x + static_cast<double>(i)).exp().log();
          good = good && std::abs(z.mean().item<float>() - static_cast<float>(t + 1 + i)) <=
                             1e-3f * static_cast<float>(t + 1 + i);
        }
        ok[static_cast<std::size_t>(t)] = good ? 1 : 0;
      } catch (...) {
        ok[static_cast<std::size_t>(t)] = -1;
      }
    });
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(ok[static_cast<std::size_t>(t)], 1) << "thread " << t;
}

ANVIL_INSTANTIATE_DEVICE_TEST(Threads);

}  // namespace
