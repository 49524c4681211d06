// Threads: one thread budget for anvil's loops and BLAS (issue 2). Results do
// not depend on the thread count beyond rounding, and distinct tensors can be
// used from distinct threads. Small work runs on the calling thread and large
// work on every allowed thread (issue 12; Note [Threads from the work's
// size]), seen through the CPU backend's counters, never through timings.
// On a machine that other processes keep busy, OpenBLAS takes fewer threads
// (Note [Fewer threads on a busy machine]).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <map>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "../benchmarks/background_load.h"
#include "anvil/profiler.h"
#include "backends/cpu/threads.h"
#include "core/observer.h"
#include "device_test.h"
#include "env_guard.h"
#include "reference.h"

namespace {

using namespace anvil;
using ref::Domain;
using ref::Layout;

// Restores the thread count however the test ends. While it lives, team
// sizes follow set_num_threads and the work's size only: the load bound is
// off, since under `ctest -j` the other tests are load, and the wake cost is
// fixed at the reference, whose thresholds are the constants these tests
// name (Note [Threads from the measured wake cost]).
struct ThreadsGuard {
  int saved = num_threads();
  explicit ThreadsGuard(double wake_us = anvil::cpu_backend::kReferenceWakeUs) {
    anvil::cpu_backend::set_load_bound(false);
    anvil::cpu_backend::set_parallel_wake_us(wake_us);
  }
  ~ThreadsGuard() {
    anvil::cpu_backend::set_parallel_wake_us(0);
    anvil::cpu_backend::set_load_bound(true);
    set_num_threads(saved);
  }
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

// --- threads from the work's size (Note [Threads from the work's size]) ---

namespace cpu_threads = anvil::cpu_backend;

TEST(ThreadChoice, GemmThreadsFromTheProductsSize) {
  ThreadsGuard guard;
  using cpu_threads::gemm_threads;
  EXPECT_EQ(gemm_threads(64, 64, 64, 2), 1);
  EXPECT_EQ(gemm_threads(100, 100, 100, 2), 1) << "the chapter's exercise";
  EXPECT_EQ(gemm_threads(128, 128, 128, 2), 1);
  EXPECT_EQ(gemm_threads(32, 256, 768, 2), 1) << "a GRU step's product";
  EXPECT_EQ(gemm_threads(1024, 1024, 1024, 2), 2);
  EXPECT_EQ(gemm_threads(1024, 1024, 1024, 1), 1) << "set_num_threads is the upper bound";
  EXPECT_EQ(gemm_threads(1024, 1024, 1024, 64), 64);
  // Grows with the work, one thread per kGemmWorkPerThread.
  const std::int64_t w = cpu_threads::kGemmWorkPerThread;
  EXPECT_EQ(gemm_threads(4096, 4096, 4096, 1 << 30), std::int64_t{4096} * 4096 * 4096 / w);
  EXPECT_EQ(gemm_threads(w, 2, 1, 8), 2);
  EXPECT_EQ(gemm_threads(w, 2, 1, 1), 1);
  EXPECT_EQ(gemm_threads(w, 1, 1, 8), 1);
  EXPECT_EQ(gemm_threads(w, 5, 1, 8), 5);
  // Degenerate and enormous products.
  EXPECT_EQ(gemm_threads(0, 1000, 1000, 8), 1);
  EXPECT_EQ(gemm_threads(std::int64_t{1} << 40, std::int64_t{1} << 40, std::int64_t{1} << 40, 8), 8);
}

TEST(ThreadChoice, SmallWorkNeverEntersAParallelRegion) {
  ThreadsGuard guard;
  set_num_threads(2);
  const Tensor a = randn({100, 100}, cpu());
  const Tensor b = randn({100, 100}, cpu());
  const Tensor m = randn({64, 64}, cpu());
  const Tensor a64 = a.to(f64), b64 = b.to(f64);
  const Tensor x = randn({30000}, cpu());
  const Tensor y = randn({30000}, cpu());
  const Tensor wide = randn({1, 10000}, cpu());
  Tensor out = empty({30000}, cpu());
  cpu_threads::reset_parallel_stats();
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(std::isfinite(matmul(a, b).norm().item<float>()));  // the chapter's exercise
    (void)matmul(m, m);
    (void)matmul(a64, b64.t());  // f64 x·Wᵀ: OpenBLAS's path on every CPU (f32 may take oneDNN's)
    add_out(out, x, y);
    (void)(exp(x) * y);
    (void)x.sum();
    (void)sum(a, {0});
    (void)sum(wide, {0});  // many columns, one row: little work
    (void)a.t().contiguous();
  }
  const auto s = cpu_threads::parallel_stats();
  EXPECT_EQ(s.regions, 0u) << "small ops must not wake the pool";
  EXPECT_EQ(s.gemm_threaded, 0u);
  EXPECT_EQ(s.gemm_small, 6u) << "100x100 and 64x64 products run on libxsmm (Note [libxsmm for small GEMMs])";
  EXPECT_EQ(s.gemm_single, 3u) << "every library GEMM went through the thread choice";
  EXPECT_EQ(cpu_threads::blas_threads(), 1) << "OpenBLAS itself is held to one thread";
  EXPECT_EQ(num_threads(), 2) << "the BLAS choice leaves the caller's thread count alone";
}

TEST(ThreadChoice, ChunksShareShortRangesEvenly) {
  using cpu_threads::chunk_length;
  // A bias gradient's 6 channels on two threads: three each (rounded to 16,
  // the whole range went to the first thread and the second woke for nothing).
  EXPECT_EQ(chunk_length(6, 2), 3);
  EXPECT_EQ(chunk_length(64, 16), 4) << "ResNet's 64 channels on 16 threads: every thread a share";
  EXPECT_EQ(chunk_length(7, 4), 2);
  // Long ranges are rounded to 16 elements, moving at most 15 of a chunk's 256 or more.
  EXPECT_EQ(chunk_length(1000, 2), 512);
  EXPECT_EQ(chunk_length(1 << 20, 3), 349536);
  EXPECT_EQ(chunk_length(511, 2), 256);
  EXPECT_EQ(chunk_length(510, 2), 255);
  for (const std::int64_t n : {1, 5, 6, 17, 255, 256, 257, 4000, 100003})
    for (const int nt : {1, 2, 3, 4, 7, 16}) {
      const std::int64_t chunk = chunk_length(n, nt);
      EXPECT_GE(chunk * nt, n) << n << " over " << nt << " threads: every element in a chunk";
      EXPECT_LT(chunk - (n + nt - 1) / nt, 16) << n << " over " << nt;
    }
}

TEST(ThreadChoice, LargeWorkUsesEveryAllowedThread) {
  ThreadsGuard guard;
  const Tensor big = randn({4 << 20}, cpu());
  const Tensor a = randn({512, 512}, cpu(), f64);  // f64: OpenBLAS on every CPU
  const Tensor a32 = a.to(f32);                    // OpenBLAS, or oneDNN on AVX-512
  for (const int n : {2, 3}) {
    set_num_threads(n);
    cpu_threads::reset_parallel_stats();
    (void)(big + big);
    (void)exp(big);
    (void)sum(big.reshape({4, 1 << 20}), {0});
    auto s = cpu_threads::parallel_stats();
    EXPECT_EQ(s.regions, 3u) << n << " threads";
    EXPECT_EQ(s.region_threads, 3u * static_cast<unsigned>(n)) << "every allowed thread took part";
    (void)matmul(a, a);
    (void)matmul(a32, a32);
    s = cpu_threads::parallel_stats();
    EXPECT_EQ(s.gemm_threaded, 2u);
    EXPECT_EQ(s.gemm_single, 0u);
    EXPECT_EQ(cpu_threads::blas_threads(), n) << "OpenBLAS ran on " << n << " threads";
    EXPECT_EQ(num_threads(), n);
  }
  // One allowed thread: the same work never enters a parallel region.
  set_num_threads(1);
  cpu_threads::reset_parallel_stats();
  (void)(big + big);
  (void)matmul(a, a);
  (void)matmul(a32, a32);
  const auto s = cpu_threads::parallel_stats();
  EXPECT_EQ(s.regions, 0u);
  EXPECT_EQ(s.gemm_threaded, 0u);
  EXPECT_EQ(s.gemm_single, 2u);
  EXPECT_EQ(cpu_threads::blas_threads(), 1);
}

TEST(ThreadChoice, CostlyElementsSplitSooner) {
  // The grain follows an element's cost: 20,000 additions stay on one
  // thread, 20,000 logarithms (libm, one element at a time) take two.
  ThreadsGuard guard;
  set_num_threads(2);
  const Tensor x = rand({20000}, cpu());
  cpu_threads::reset_parallel_stats();
  (void)(x + x);
  (void)exp(x);
  EXPECT_EQ(cpu_threads::parallel_stats().regions, 0u);
  (void)log(x);
  const auto s = cpu_threads::parallel_stats();
  EXPECT_EQ(s.regions, 1u);
  EXPECT_EQ(s.region_threads, 2u);
}

// --- the parallel cost report (Note [Parallel cost report]) ---

// The profiler's row of `name`, or a row of zeros.
profiler::OpStats row_of(const std::vector<profiler::OpStats>& rows, const std::string& name) {
  for (const profiler::OpStats& r : rows)
    if (r.name == name) return r;
  ADD_FAILURE() << "no row " << name;
  return {};
}

TEST(ParallelCostReport, RegionsThreadsAndSerialTimePerOp) {
  ThreadsGuard guard;
  const Tensor big = randn({4 << 20}, cpu());
  const Tensor small = randn({1000}, cpu());
  const Tensor a = randn({512, 512}, cpu());
  const Tensor image = randn({64, 8, 32, 32}, cpu()), weight = randn({16, 8, 5, 5}, cpu());
  for (const int n : {1, 2}) {
    set_num_threads(n);
    profiler::Profile p;
    (void)exp(big);               // 4M / 64K: a region of every allowed thread
    (void)(small + small);        // below the least size: no piece at all
    (void)matmul(a, a);           // 512^3 / 4M multiply-adds: 32 shares
    (void)conv2d(image, weight);  // 16 x 50176 x 200 multiply-adds: 38 shares
    p.stop();
    const std::vector<profiler::OpStats> rows = p.key_averages();
    for (const char* name : {"exp", "matmul", "conv2d"}) {
      const profiler::OpStats r = row_of(rows, name);
      EXPECT_GE(r.regions, 1u) << name << " at " << n << " threads";
      EXPECT_EQ(r.threads, n) << name << ": the team is the thread bound";
      EXPECT_GT(r.region_us, 0) << name;
      EXPECT_LE(r.region_us, r.host_self_us + 1) << name << ": a region lies inside its op";
      EXPECT_NEAR(r.serial_us, std::max(0.0, r.host_self_us - r.region_us), 1e-6) << name;
    }
    const profiler::OpStats add = row_of(rows, "add");
    EXPECT_EQ(add.regions, 0u);
    EXPECT_EQ(add.threads, 0);
    EXPECT_EQ(add.region_us, 0);
    EXPECT_DOUBLE_EQ(add.serial_us, add.host_self_us) << "an op without regions is serial";
    // The trace carries each piece for scripts/predict_parallel.py.
    bool exp_piece = false;
    for (const profiler::TraceEvent& e : p.events())
      if (e.name == "exp") {
        ASSERT_EQ(e.parallel.size(), 1u);
        EXPECT_DOUBLE_EQ(e.parallel[0].width, 64.0) << "4M elements in 64K grains";
        EXPECT_EQ(e.parallel[0].threads, n);
        EXPECT_TRUE(e.parallel[0].region);
        exp_piece = true;
      }
    EXPECT_TRUE(exp_piece);
    const std::string table = p.table({.row_limit = 0});
    EXPECT_NE(table.find("Regions"), std::string::npos) << table;
    EXPECT_NE(table.find("Serial"), std::string::npos) << table;
  }
}

// The parallel regions of one LeNet training step (the examples' LeNet,
// batch 256, SGD) per op at 2 threads and the reference wake, from the
// profiler: a change that splits an op's work into more regions, or makes
// an op parallel or serial, shows here. The rows are anvil's own loops; the
// products (matmul, addmm) are left out and convolutions take im2col
// (ANVIL_CONV_IM2COL=1): on AVX-512 machines oneDNN takes LeNet's first
// layer and some products, which would make the table differ between CI's
// machines.
TEST(ParallelCostReport, RegionsOfALeNetStepPerOp) {
  anvil::testing::EnvGuard im2col("ANVIL_CONV_IM2COL", "1");
  ThreadsGuard guard;
  set_num_threads(2);
  manual_seed(0);
  nn::Sequential net(nn::Conv2d(1, 6, 5, 1, 2), nn::ReLU(), nn::MaxPool2d(2), nn::Conv2d(6, 16, 5), nn::ReLU(),
                     nn::MaxPool2d(2), nn::Flatten(), nn::Linear(400, 120), nn::ReLU(), nn::Linear(120, 84), nn::ReLU(),
                     nn::Linear(84, 10));
  optim::SGD opt(net.parameters(), {.lr = 0.1});
  const Tensor x = randn({256, 1, 28, 28}), y = randint(0, 10, {256});
  const auto step = [&] {
    opt.zero_grad();
    nn::cross_entropy(net(x), y).backward();
    opt.step();
  };
  step();  // the optimiser's state and tables
  profiler::Profile p;
  step();
  p.stop();
  std::map<std::string, std::uint64_t> regions;
  for (const profiler::OpStats& r : p.key_averages())
    if (r.regions > 0 && r.name != "matmul" && r.name != "addmm") regions[r.name] += r.regions;
  std::string got;
  for (const auto& [name, n] : regions) got += "{\"" + name + "\", " + std::to_string(n) + "}, ";
  const std::map<std::string, std::uint64_t> expected = {
      {"add", 1},  {"col2im", 1},        {"im2col", 2}, {"max_pool2d", 2}, {"max_pool2d_backward", 2},
      {"relu", 1}, {"relu_backward", 1}, {"sum", 2}};
  EXPECT_EQ(regions, expected) << "regions per op now: " << got;
}

TEST(ParallelCostReport, WorkBelowTwoSharesIsAPieceButNotARegion) {
  ThreadsGuard guard;  // the reference wake: 2 grains make a region
  set_num_threads(2);
  const Tensor x = randn({3 << 16}, cpu());  // 1.5 grains of add
  profiler::Profile p;
  (void)(x + x);
  p.stop();
  const profiler::OpStats add = row_of(p.key_averages(), "add");
  EXPECT_EQ(add.regions, 0u);
  for (const profiler::TraceEvent& e : p.events())
    if (e.name == "add") {
      ASSERT_EQ(e.parallel.size(), 1u) << "a piece a cheaper wake would split";
      EXPECT_DOUBLE_EQ(e.parallel[0].width, 0.75);
      EXPECT_EQ(e.parallel[0].threads, 1);
      EXPECT_FALSE(e.parallel[0].region);
    }
}

// An observer that counts the pieces reported to it.
std::atomic<int> g_pieces{0};
const anvil::detail::Observer kCountingObserver{
    .begin_op = [](anvil::detail::SpanKind, const char*, const Device*,
                   std::initializer_list<const Tensor*>) noexcept { return anvil::detail::SpanHandle{}; },
    .begin_named = [](anvil::detail::SpanKind, std::string_view,
                      Device) noexcept { return anvil::detail::SpanHandle{}; },
    .begin_copy = [](Device, Device) noexcept { return anvil::detail::SpanHandle{}; },
    .begin_sync = [](Device, const anvil::detail::CallSite*) noexcept { return anvil::detail::SpanHandle{}; },
    .end_span = [](anvil::detail::SpanHandle, std::uint64_t) noexcept {},
    .memory = [](Device, std::int64_t) noexcept {},
    .collective = [](Device, std::uint64_t) noexcept {},
    .parallel = [](int, double, bool, std::int64_t) noexcept { g_pieces.fetch_add(1); },
};

TEST(ParallelCostReport, NothingIsTimedWithoutAnObserver) {
  ThreadsGuard guard;
  set_num_threads(2);
  const Tensor big = randn({4 << 20}, cpu());
  g_pieces = 0;
  (void)exp(big);
  EXPECT_EQ(g_pieces.load(), 0);
  anvil::detail::set_observer(&kCountingObserver);
  (void)exp(big);
  anvil::detail::set_observer(nullptr);
  EXPECT_EQ(g_pieces.load(), 1) << "one region reported while observed";
  (void)exp(big);
  EXPECT_EQ(g_pieces.load(), 1) << "nothing after the observer left";
  {
    // A piece that began unobserved is never timed, even when one arrives.
    const cpu_threads::ParallelWork work(2, 8.0);
    anvil::detail::set_observer(&kCountingObserver);
  }
  anvil::detail::set_observer(nullptr);
  EXPECT_EQ(g_pieces.load(), 1);
  {
    anvil::detail::set_observer(&kCountingObserver);
    const cpu_threads::ParallelWork work(2, 8.0);
    anvil::detail::set_observer(nullptr);
  }
  EXPECT_EQ(g_pieces.load(), 1) << "nor reported when the observer left before it ended";
}

// --- the wake cost (Note [Threads from the measured wake cost]) ---

TEST(WakeCost, MeasuredCostIsPositiveAndBounded) {
  for (const int threads : {2, 3}) {
    const double us = cpu_threads::measure_parallel_wake_us(threads);
    EXPECT_GE(us, cpu_threads::kMinWakeUs) << threads << " threads";
    EXPECT_LE(us, cpu_threads::kMaxWakeUs) << threads << " threads";
  }
  EXPECT_EQ(cpu_threads::measure_parallel_wake_us(1), 0.0) << "one thread has no pool to wake";
}

TEST(WakeCost, MeasuredOnceAtTheBoundAndAgainWhenItChanges) {
  if (std::getenv("ANVIL_PARALLEL_WAKE_US") != nullptr) GTEST_SKIP() << "ANVIL_PARALLEL_WAKE_US fixes the cost";
  const int saved = num_threads();
  set_num_threads(2);
  (void)(randn({4 << 20}, cpu()) * 2.0);  // a parallel decision
  ParallelCosts c = parallel_costs();
  EXPECT_FALSE(c.fixed);
  EXPECT_EQ(c.threads, 2);
  EXPECT_GE(c.wake_us, cpu_threads::kMinWakeUs);
  EXPECT_LE(c.wake_us, cpu_threads::kMaxWakeUs);
  EXPECT_EQ(parallel_costs().wake_us, c.wake_us) << "measured once, not per decision";
  // A measured wake below the floor at 2 threads sizes the work as the floor does.
  const double sized_by = std::max(c.wake_us, cpu_threads::grain_wake_floor_us(2));
  EXPECT_EQ(c.grain, std::llround(static_cast<double>(1 << 18) * sized_by / cpu_threads::kReferenceWakeUs));
  set_num_threads(3);
  c = parallel_costs();
  EXPECT_EQ(c.threads, 3) << "a new bound is measured again";
  set_num_threads(saved);
}

// The floor under a measured wake grows with the team: none worth keeping
// at 2 threads, 24 µs from 16 (Note [Threads from the measured wake cost]).
TEST(WakeCost, FloorGrowsWithTheTeam) {
  using cpu_threads::grain_wake_floor_us;
  EXPECT_DOUBLE_EQ(grain_wake_floor_us(2), 1.6);
  EXPECT_DOUBLE_EQ(grain_wake_floor_us(16), cpu_threads::kGrainWakeFloorUs);
  EXPECT_DOUBLE_EQ(grain_wake_floor_us(64), cpu_threads::kGrainWakeFloorUs);
  EXPECT_DOUBLE_EQ(grain_wake_floor_us(1), cpu_threads::kMinWakeUs);
  for (int t = 2; t < 16; ++t) EXPECT_LT(grain_wake_floor_us(t), grain_wake_floor_us(t + 1)) << t << " threads";
}

TEST(WakeCost, DerivedThresholdsFollowTheCost) {
  using cpu_threads::kReferenceWakeUs;
  {
    // The reference cost gives the constants (parallel.h, threads.h).
    ThreadsGuard at_reference;
    const ParallelCosts c = parallel_costs();
    EXPECT_TRUE(c.fixed);
    EXPECT_EQ(c.wake_us, kReferenceWakeUs);
    EXPECT_EQ(c.grain, 1 << 18);
    EXPECT_EQ(c.grain_vector_math, 1 << 16);
    EXPECT_EQ(c.grain_libm, 1 << 13);
    EXPECT_EQ(c.gemm_macs_per_thread, cpu_threads::kGemmWorkPerThread);
  }
  std::int64_t last_grain = 0, last_macs = 0;
  for (const double us : {kReferenceWakeUs * 2, kReferenceWakeUs, kReferenceWakeUs / 10}) {
    ThreadsGuard guard(us);
    const ParallelCosts c = parallel_costs();
    EXPECT_EQ(c.wake_us, us);
    EXPECT_EQ(c.grain, std::llround(static_cast<double>(1 << 18) * us / kReferenceWakeUs)) << "grain ∝ wake cost";
    EXPECT_EQ(c.gemm_macs_per_thread,
              std::llround(static_cast<double>(cpu_threads::kGemmWorkPerThread) * us / kReferenceWakeUs));
    if (last_grain != 0) {
      EXPECT_LT(c.grain, last_grain) << "a cheaper wake, a smaller grain";
      EXPECT_LT(c.gemm_macs_per_thread, last_macs);
    }
    last_grain = c.grain, last_macs = c.gemm_macs_per_thread;
  }
  // A 256³ product: 16.7M multiply-adds.
  const auto threads_at = [](double us) {
    ThreadsGuard guard(us);
    return cpu_threads::gemm_threads(256, 256, 256, 16);
  };
  EXPECT_EQ(threads_at(kReferenceWakeUs), 4);
  EXPECT_EQ(threads_at(kReferenceWakeUs * 2), 2) << "a costlier wake, fewer threads";
  EXPECT_EQ(threads_at(kReferenceWakeUs / 10), 16) << "a cheaper wake, more threads";
  EXPECT_EQ(threads_at(kReferenceWakeUs * 10), 1);
}

TEST(WakeCost, TeamSizesFollowTheCost) {
  // parallel_for's teams, counted: 1M additions take 4 threads at the
  // reference cost, 2 at twice it and none past 2.5M elements' worth; 300k
  // additions stay on the calling thread at the reference and take all 4 at
  // a tenth of it.
  const Tensor big = randn({1 << 20}, cpu());
  const Tensor mid = randn({300000}, cpu());
  using Teams = std::pair<std::uint64_t, std::uint64_t>;  // regions, their threads summed
  const auto regions_and_threads = [](double us, const Tensor& x) {
    ThreadsGuard guard(us);
    set_num_threads(4);
    cpu_threads::reset_parallel_stats();
    (void)(x + x);
    const auto s = cpu_threads::parallel_stats();
    return Teams{s.regions, s.region_threads};
  };
  using cpu_threads::kReferenceWakeUs;
  EXPECT_EQ(regions_and_threads(kReferenceWakeUs, big), Teams(1, 4));
  EXPECT_EQ(regions_and_threads(kReferenceWakeUs * 2, big), Teams(1, 2));
  EXPECT_EQ(regions_and_threads(kReferenceWakeUs * 10, big), Teams(0, 0));
  EXPECT_EQ(regions_and_threads(kReferenceWakeUs, mid), Teams(0, 0));
  EXPECT_EQ(regions_and_threads(kReferenceWakeUs / 10, mid), Teams(1, 4));
}

TEST(WakeCost, FixedByTheEnvironment) {
  // Run by ctest as test_core_threads_fixed_wake with ANVIL_PARALLEL_WAKE_US=7.5.
  const char* env = std::getenv("ANVIL_PARALLEL_WAKE_US");
  if (env == nullptr) GTEST_SKIP() << "ANVIL_PARALLEL_WAKE_US is not set";
  const int saved = num_threads();
  set_num_threads(2);
  const ParallelCosts c = parallel_costs();
  EXPECT_TRUE(c.fixed);
  EXPECT_EQ(c.threads, 0);
  EXPECT_DOUBLE_EQ(c.wake_us, std::strtod(env, nullptr));
  EXPECT_EQ(c.grain, std::llround(static_cast<double>(1 << 18) * c.wake_us / cpu_threads::kReferenceWakeUs));
  set_num_threads(3);
  EXPECT_DOUBLE_EQ(parallel_costs().wake_us, c.wake_us) << "a new bound keeps a fixed cost";
  set_num_threads(saved);
}

// --- a busy machine (Note [Fewer threads on a busy machine]) ---

TEST(BusyMachine, ThreadsFromTheLoad) {
  using cpu_threads::threads_for_load;
  // An idle machine, or less than half a core taken: set_num_threads' bound,
  // even above the core count.
  EXPECT_EQ(threads_for_load(2, 2, 0.0), 2);
  EXPECT_EQ(threads_for_load(2, 2, 0.4), 2);
  EXPECT_EQ(threads_for_load(3, 2, 0.0), 3) << "oversubscribing on request stays possible";
  EXPECT_EQ(threads_for_load(1, 2, 0.0), 1);
  EXPECT_EQ(threads_for_load(2, 2, -0.1), 2) << "clock-tick rounding below anvil's own time";
  EXPECT_EQ(threads_for_load(2, 2, std::numeric_limits<double>::quiet_NaN()), 2);
  // Others hold cores: the cores they leave, to the nearest whole one.
  EXPECT_EQ(threads_for_load(2, 2, 0.6), 1);
  EXPECT_EQ(threads_for_load(2, 2, 1.0), 1) << "a compile beside training";
  EXPECT_EQ(threads_for_load(2, 2, 2.0), 1) << "two spinning processes: one thread, never zero";
  EXPECT_EQ(threads_for_load(3, 2, 1.0), 1);
  EXPECT_EQ(threads_for_load(16, 16, 4.0), 12);
  EXPECT_EQ(threads_for_load(16, 16, 4.4), 12);
  EXPECT_EQ(threads_for_load(16, 16, 4.6), 11);
  EXPECT_EQ(threads_for_load(8, 16, 4.0), 8) << "never above set_num_threads";
  EXPECT_EQ(threads_for_load(8, 16, 40.0), 1);
  EXPECT_EQ(threads_for_load(0, 2, 0.0), 1);
}

TEST(BusyMachine, SpinningProcessesOnEveryCoreLeaveOneThread) {
  // One spinning process per core, for real: after a sampling window in
  // which they held the cores, a product that takes two OpenBLAS threads on
  // an idle machine runs on one, and so does a loop that anvil spreads over
  // two threads on an idle machine (Note [Fewer threads on a busy machine]).
  const int saved = num_threads();
  set_num_threads(2);
  const Tensor big = randn({4 << 20}, cpu());
  const Tensor a = randn({512, 512}, cpu(), f64);  // f64: OpenBLAS on every CPU
  {
    const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    anvil_bench::BackgroundLoad load(cores);
    // A process that keeps asking for threads (as a training loop does)
    // while the spinners run: its windows close with them counted. Each op
    // follows such asking: how long the op before it ran (the loop took
    // 66-94 ms beside the spinners here, near the 100 ms window) must not
    // decide which window the next one starts in.
    const auto keep_asking = [] {
      for (int i = 0; i < 15; ++i) {
        (void)cpu_threads::usable_threads();
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    };
    keep_asking();
    EXPECT_EQ(cpu_threads::usable_threads(), 1);
    cpu_threads::reset_parallel_stats();
    (void)(big + big);
    EXPECT_EQ(cpu_threads::parallel_stats().regions, 0u)
        << "anvil's loop woke the pool beside " << cores << " spinning processes";
    keep_asking();
    cpu_threads::reset_parallel_stats();
    (void)matmul(a, a);
    const auto s = cpu_threads::parallel_stats();
    EXPECT_EQ(s.gemm_threaded, 0u) << "OpenBLAS on two threads beside " << cores << " spinning processes";
    EXPECT_EQ(s.gemm_single, 1u);
    EXPECT_EQ(cpu_threads::blas_threads(), 1);
    EXPECT_EQ(num_threads(), 2) << "the bound set_num_threads chose stands";
  }
  set_num_threads(saved);
}

TEST(BusyMachine, LoadWhileThisProcessSatIdleIsForgotten) {
  // Other processes held every core while this one did nothing (LibTorch's
  // turn in a benchmark, say), then stopped: a window that long says nothing
  // about now, so the next product gets its two OpenBLAS threads back.
  const int saved = num_threads();
  set_num_threads(2);
  {
    const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    anvil_bench::BackgroundLoad load(cores);
    (void)cpu_threads::usable_threads();  // opens a window with the spinners running
    std::this_thread::sleep_for(std::chrono::milliseconds(1200));
  }
  EXPECT_EQ(cpu_threads::usable_threads(), 2) << "a window spanning 1.2 s of idling bounded OpenBLAS";
  set_num_threads(saved);
}

TEST(BusyMachine, APauseShorterThanASecondAlsoStartsANewWindow) {
  // bench_compare's turns: another process holds both cores for 0.2-0.6 s
  // while this one waits, then this one starts work. The load it measured
  // while it was busy before the pause is the only bound until its new
  // window closes, and that bound was none.
  const int saved = num_threads();
  set_num_threads(2);
  (void)cpu_threads::usable_threads();
  {
    const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    anvil_bench::BackgroundLoad load(cores);
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
  }
  EXPECT_EQ(cpu_threads::usable_threads(), 2) << "others' use during this process's pause bounded OpenBLAS";
  set_num_threads(saved);
}

TEST(ThreadChoice, SmallAndLargeProductsAlternate) {
  // OpenBLAS's count follows each product: a large one after small ones is
  // threaded again, and results stay right throughout.
  ThreadsGuard guard;
  set_num_threads(2);
  const Tensor small = full({100, 100}, 1.0, cpu(), f64);  // f64: OpenBLAS on every CPU
  const Tensor large = full({512, 512}, 1.0, cpu(), f64);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(matmul(small, small.t()).sum().item<double>(), 1e6);  // NT: OpenBLAS's path
    EXPECT_EQ(cpu_threads::blas_threads(), 1);
    EXPECT_EQ(matmul(large, large).sum().item<double>(), 512.0 * 512.0 * 512.0);
    EXPECT_EQ(cpu_threads::blas_threads(), 2);
  }
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
  set_num_threads(16);  // a workstation's count (issue 39), oversubscribed on a small machine
  const Results sixteen = run();
  for (const Results* r : {&two, &four, &sixteen}) {
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
