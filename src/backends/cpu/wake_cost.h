// What waking the OpenMP pool costs on the machine that runs, measured by
// the process, and the work thresholds scaled by it (threads.h).
#pragma once

#include <algorithm>
#include <cstdint>

namespace anvil::cpu_backend {

// Note [Threads from the measured wake cost]
// Each size threshold is a time budget: a thread's share must take about one
// wake of the pool. The constants (parallel.h's grains, kGemmWorkPerThread,
// kReorderBytesPerThread) are those budgets at kReferenceWakeUs (45 µs, the
// 2-core Zen 4 VM they were tuned on), each scaled by wake / kReferenceWakeUs,
// `wake` measured by the running process: the median of 15 empty parallel
// regions at the thread bound, each after 50 µs without one, at the first
// parallel decision and after set_num_threads (never while other processes
// hold cores; at most 5 ms; clamped to [kMinWakeUs, kMaxWakeUs]). Why: wakes
// differ by machine (4.4 µs to 45 µs), and the fixed constants held the
// 16-core host's LeNet to 1.84x on 16 threads against PyTorch's 6.53x
// (docs/measurements.md). ANVIL_PARALLEL_WAKE_US pins it (45: the old
// thresholds) for benchmarks and the tests that count teams.
inline constexpr double kReferenceWakeUs = 45.0;
inline constexpr double kMinWakeUs = 1.0;
inline constexpr double kMaxWakeUs = 100.0;
// The least measured wake the thresholds are scaled by (a pin may ask for
// less), growing with the team: what a region costs beyond its wake (data
// spread over more cores' caches) grows with it. With spinning workers (Note
// [Bounded OpenMP spinning]) the 16-core host measures 4 µs, and thresholds
// that small put 15 threads on the MLP's GEMMs, gathers and optimiser step:
// its epoch took 4x as long at 16 threads (the H200 host's wait sweep of
// 2026-11-28, kept with the benchmark results: 4 µs 0.30 s, 24 µs 0.06 s).
// At 2 threads no floor was worth keeping: on the 2-core Xeon the MLP's
// epoch took 0.072 s sized by 24 µs against 0.067 s by 1-4 µs (its optimiser
// step, relu and bias sums on both threads; the step 60 -> 32 µs), LeNet's
// the same within noise (2026-11-29,
// docs/threads.md). In between linear, not measured. LeNet was fastest at
// 4 µs on 16 threads too (0.38 s, 0.70 s at 24), so per-op thresholds remain owed.
inline constexpr double kGrainWakeFloorUs = 24.0;  // at 16 threads and more
constexpr double grain_wake_floor_us(int threads) {
  return std::clamp(kGrainWakeFloorUs * (threads - 1) / 15.0, kMinWakeUs, kGrainWakeFloorUs);
}
// The least factor a threshold is scaled by (the least a pin can ask for).
inline constexpr double kMinWorkScale = kMinWakeUs / kReferenceWakeUs;

// The measured (or pinned) wake cost and the work sizes derived from it.
struct WakeCost {
  double wake_us = kReferenceWakeUs;
  int threads = 0;      // the thread bound it was measured at (0: pinned)
  bool pinned = false;  // ANVIL_PARALLEL_WAKE_US or set_parallel_wake_us
};
// Measures on first use and after the bound changes (never inside a
// parallel region, nor with a bound of one thread: then the last value).
WakeCost parallel_wake_cost() noexcept;

// The factor every work threshold is scaled by: wake / kReferenceWakeUs.
double parallel_work_scale() noexcept;

// `reference` (a threshold at kReferenceWakeUs) scaled to this machine,
// at least 1.
std::int64_t scaled_work(std::int64_t reference) noexcept;

// Pins the wake cost (µs, clamped to [kMinWakeUs, 10000]); 0 or less measures
// again (or returns to ANVIL_PARALLEL_WAKE_US when that is set).
void set_parallel_wake_us(double us) noexcept;

// The measurement itself: the median wake at `threads` threads in µs,
// clamped to [kMinWakeUs, kMaxWakeUs]; 0 inside a parallel region or for
// fewer than two threads.
double measure_parallel_wake_us(int threads) noexcept;

// set_thread_bound's part: a measured wake cost belongs to the bound it was
// measured at, so a new bound forgets it (a pinned one stays).
void forget_wake_cost(int new_bound) noexcept;

}  // namespace anvil::cpu_backend
