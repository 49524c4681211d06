// See Note [Threads from the measured wake cost] in wake_cost.h.
#include "backends/cpu/wake_cost.h"

#include <omp.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <mutex>

#include "anvil/runtime.h"
#include "backends/cpu/machine_load.h"
#include "backends/cpu/openmp_defaults.h"
#include "backends/cpu/parallel.h"
#include "backends/cpu/threads.h"

namespace anvil::cpu_backend {

namespace {

// Note [Threads from the measured wake cost]: the wake cost, in ns (0: not
// known yet), the bound it was measured at, and the pin.
std::mutex g_wake_mutex;  // held by the one thread measuring
std::atomic<std::int64_t> g_wake_ns{0};
std::atomic<int> g_wake_threads{0};
std::atomic<double> g_work_scale{1.0};
std::atomic<double> g_pinned_us{0.0};  // set_parallel_wake_us; 0: none

constexpr std::int64_t kWakeGapNs = 50'000;
constexpr int kWakeWarmUp = 3;
constexpr int kWakeSamples = 15;
constexpr std::int64_t kWakeBudgetNs = 5'000'000;  // the most a measurement may take, past 3 samples

// ANVIL_PARALLEL_WAKE_US, read once: 0 when unset or not a positive number
// (said once on stderr).
double wake_us_from_env() noexcept {
  static const double value = [] {
    const char* text = std::getenv("ANVIL_PARALLEL_WAKE_US");
    if (text == nullptr || *text == '\0') return 0.0;
    char* end = nullptr;
    const double v = std::strtod(text, &end);
    if (end == text || *end != '\0' || !(v > 0) || !std::isfinite(v)) {
      std::fprintf(stderr,
                   "anvil: ANVIL_PARALLEL_WAKE_US: expected a positive number of microseconds, got '%s'; "
                   "measuring the wake cost instead\n",
                   text);
      return 0.0;
    }
    return std::clamp(v, kMinWakeUs, 10000.0);
  }();
  return value;
}

// threads: the bound `us` was measured at; 0 when pinned (taken as it is).
void store_wake(double us, int threads) noexcept {
  const double for_thresholds = threads > 0 ? std::max(us, grain_wake_floor_us(threads)) : us;
  g_work_scale.store(for_thresholds / kReferenceWakeUs, std::memory_order_relaxed);
  g_wake_threads.store(threads, std::memory_order_relaxed);
  g_wake_ns.store(std::max<std::int64_t>(1, std::llround(us * 1000.0)), std::memory_order_release);
}

// The wake cost at the current bound, measuring it if it is not known (see
// parallel_wake_cost).
void update_wake_cost() noexcept {
  const double pinned = g_pinned_us.load(std::memory_order_relaxed);
  const double env = wake_us_from_env();
  const int bound = thread_bound();
  const std::int64_t known = g_wake_ns.load(std::memory_order_acquire);
  if (pinned > 0 || env > 0) {
    if (known == 0) store_wake(pinned > 0 ? pinned : env, 0);
    return;
  }
  if (known != 0) return;
  if (bound < 2 || omp_in_parallel()) return;  // nothing to measure: keep the last value
  // While other processes hold cores (Note [Fewer threads on a busy
  // machine]) a wake measures their time slices, not the pool: wait for a
  // quieter decision and keep the last value meanwhile.
  if (usable_threads() < bound) return;
  const std::lock_guard lock(g_wake_mutex);
  if (g_wake_ns.load(std::memory_order_acquire) != 0) return;  // another thread just measured
  store_wake(measure_parallel_wake_us(bound), bound);
}

}  // namespace

double measure_parallel_wake_us(int threads) noexcept {
  if (threads < 2 || omp_in_parallel()) return 0.0;
  std::array<std::int64_t, kWakeSamples> samples{};
  int taken = 0;
  const std::int64_t deadline = nanoseconds(CLOCK_MONOTONIC) + kWakeBudgetNs;
  for (int i = 0; i < kWakeWarmUp + kWakeSamples; ++i) {
    // Spin, not sleep: the calling thread stays awake, as it does between
    // the ops of a step, while the pool's passive workers fall asleep.
    const std::int64_t resume = nanoseconds(CLOCK_MONOTONIC) + kWakeGapNs;
    while (nanoseconds(CLOCK_MONOTONIC) < resume) {
    }
    const std::int64_t start = nanoseconds(CLOCK_MONOTONIC);
#pragma omp parallel num_threads(threads)
    { std::atomic_signal_fence(std::memory_order_seq_cst); }
    const std::int64_t took = nanoseconds(CLOCK_MONOTONIC) - start;
    if (i >= kWakeWarmUp) samples[static_cast<std::size_t>(taken++)] = took;
    if (taken >= 3 && nanoseconds(CLOCK_MONOTONIC) > deadline) break;  // a loaded machine: enough
  }
  const auto end = samples.begin() + std::max(taken, 1);
  const auto middle = samples.begin() + (end - samples.begin()) / 2;
  std::nth_element(samples.begin(), middle, end);
  return std::clamp(1e-3 * static_cast<double>(*middle), kMinWakeUs, kMaxWakeUs);
}

WakeCost parallel_wake_cost() noexcept {
  update_wake_cost();
  WakeCost c;
  const std::int64_t ns = g_wake_ns.load(std::memory_order_acquire);
  if (ns != 0) c.wake_us = 1e-3 * static_cast<double>(ns);
  c.threads = g_wake_threads.load(std::memory_order_relaxed);
  c.pinned = g_pinned_us.load(std::memory_order_relaxed) > 0 || wake_us_from_env() > 0;
  return c;
}

double parallel_work_scale() noexcept {
  // Known (the common case): one load and a compare. BlasThreads and
  // DnnlThreads change this thread's OpenMP count for a call, so the bound
  // is not compared here: set_thread_bound forgets a measured value.
  if (g_wake_ns.load(std::memory_order_acquire) == 0) update_wake_cost();
  return g_work_scale.load(std::memory_order_relaxed);
}

std::int64_t scaled_work(std::int64_t reference) noexcept {
  const double scaled = static_cast<double>(reference) * parallel_work_scale();
  return std::llround(std::clamp(scaled, 1.0, 9e18));
}

void set_parallel_wake_us(double us) noexcept {
  const std::lock_guard lock(g_wake_mutex);
  const double pinned = us > 0 ? std::clamp(us, kMinWakeUs, 10000.0) : 0.0;
  g_pinned_us.store(pinned, std::memory_order_relaxed);
  if (pinned > 0)
    store_wake(pinned, 0);
  else {
    g_work_scale.store(1.0, std::memory_order_relaxed);  // the reference until the next decision measures
    g_wake_ns.store(0, std::memory_order_release);
  }
}

void forget_wake_cost(int new_bound) noexcept {
  if (new_bound != g_wake_threads.load(std::memory_order_relaxed) && g_pinned_us.load(std::memory_order_relaxed) <= 0 &&
      wake_us_from_env() <= 0)
    g_wake_ns.store(0, std::memory_order_release);
}

}  // namespace anvil::cpu_backend

namespace anvil {

ParallelCosts parallel_costs() {
  using namespace cpu_backend;
  const WakeCost w = parallel_wake_cost();
  ParallelCosts c;
  c.wake_us = w.wake_us;
  c.threads = w.threads;
  c.fixed = w.pinned;
  c.grain = scaled_work(kParallelGrain);
  c.grain_vector_math = scaled_work(kParallelGrainVectorMath);
  c.grain_libm = scaled_work(kParallelGrainLibm);
  c.gemm_macs_per_thread = scaled_work(kGemmWorkPerThread);
  const AnvilOpenmpWaitPolicy wait = anvil_openmp_wait_policy();
  c.wait_policy = wait.policy;
  c.wait_reason = wait.reason;
  return c;
}

}  // namespace anvil
