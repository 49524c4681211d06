// How many threads a piece of CPU work runs on, chosen per call from its
// size, and the counters that let tests see the choice. See Note [Threads
// from the work's size].
#pragma once

#include <cstdint>

#include "backends/cpu/blas_threads.h"
#include "backends/cpu/machine_load.h"
#include "backends/cpu/wake_cost.h"
#include "core/observer.h"

namespace anvil::cpu_backend {

// Note [Threads from the work's size]
// Work too small to repay waking the pool's threads runs on the calling
// thread, outside any parallel region; larger work takes one thread per share
// that repays a wake, up to the anvil::set_num_threads bound: anvil's loops
// by element count and a grain per element's cost (parallel.h), OpenBLAS by
// m·n·k (gemm_threads; BlasThreads sets its global count around each call),
// oneDNN's convolutions and reorders by their GEMM's multiply-adds and their
// bytes (Note [oneDNN convolution in the CPU backend], Note [Reorder
// threads]). How much work repays a thread follows from the measured wake
// cost (Note [Threads from the measured wake cost]). Settled by issue 12's
// 2-core machine: OpenBLAS on two threads was slower than on one for every
// square product up to n = 320 (n = 200: 344 against 243 µs); the figures
// are in docs/measurements.md.

// The set_num_threads bound as this thread sees it: omp_get_max_threads(),
// after adopting a bound set on any thread since this one last looked.
// OpenMP's thread count is per thread (a new std::thread starts from
// OMP_NUM_THREADS or the cores), and set_num_threads is for the process, as
// torch.set_num_threads is; one relaxed compare when nothing changed.
int thread_bound() noexcept;

// GEMMs below this many multiply-adds per thread (at kReferenceWakeUs;
// scaled like the rest, Note [Threads from the measured wake cost]) gain
// less from another thread than it costs: 4M is ~100 µs of one AVX-512
// core, two reference wakes, and a product gets a second thread from
// n ≈ 200, where on an idle machine it would save ~120 µs. OpenBLAS's
// threaded driver also syncs its threads inside the call, so a GEMM's
// budget is twice a loop's: on issue 12's machine (~10 µs a region) a GRU
// step (32×256×768 products) with 1M here took 57 ms on two threads
// against 47 ms on one.
inline constexpr std::int64_t kGemmWorkPerThread = std::int64_t{4} << 20;

// Threads for an m×k by k×n product: 1 below 2·work_per_thread, then one
// per work_per_thread multiply-adds, at most max_threads.
int gemm_threads(std::int64_t m, std::int64_t n, std::int64_t k, int max_threads,
                 std::int64_t work_per_thread) noexcept;
// The same with kGemmWorkPerThread scaled to this machine.
int gemm_threads(std::int64_t m, std::int64_t n, std::int64_t k, int max_threads) noexcept;

// The length of each thread's chunk of [0, n) among nt threads: an even
// split, rounded up to 16 elements (vector loops on cache-line bounds) where
// a chunk is long enough that the rounding moves little work. Short ranges
// (channels, rows) split evenly: rounded, the 6 channels of a bias gradient
// (sum of [256, 6, 28, 28] over N, H, W) all went to one thread of a team of
// two; split, it took 132-136 µs on two threads against 187-265.
inline constexpr std::int64_t chunk_length(std::int64_t n, int nt) {
  constexpr std::int64_t kAlignedChunkMin = 256;  // the rounding moves at most 6% of a chunk
  const std::int64_t even = (n + nt - 1) / nt;
  return even < kAlignedChunkMin ? even : (even + 15) / 16 * 16;
}

// anvil::set_num_threads: the upper bound for anvil's loops and OpenBLAS.
void set_thread_bound(int threads);

// What the choices above did, process-wide, since the last reset. Counted
// always (one relaxed atomic add per parallel region or BLAS call); tests
// read them, nothing else does.
struct ParallelStats {
  std::uint64_t regions = 0;         // parallel regions entered by parallel_for
  std::uint64_t region_threads = 0;  // the team sizes of those regions, summed
  std::uint64_t gemm_single = 0;     // OpenBLAS or oneDNN GEMM calls held to one thread
  std::uint64_t gemm_threaded = 0;   // OpenBLAS or oneDNN GEMM calls allowed more than one thread
  std::uint64_t conv_single = 0;     // oneDNN convolutions held to one thread
  std::uint64_t conv_threaded = 0;   // oneDNN convolutions allowed more than one thread
  std::uint64_t reorder_single = 0;  // layout reorders around them held to one thread
  std::uint64_t reorder_threaded = 0;
  std::uint64_t gemm_small = 0;    // GEMMs run on libxsmm kernels instead (cpu_gemm.cpp)
  std::uint64_t gemm_k_split = 0;  // GEMMs whose k was shared between threads (cpu_gemm.cpp)
};
ParallelStats parallel_stats() noexcept;
void reset_parallel_stats() noexcept;
// Called by the GEMM primitive for a product it gives to libxsmm.
void record_small_gemm() noexcept;
// Called by the GEMM primitive for a product whose k it splits between threads.
void record_k_split_gemm() noexcept;
// Called for each OpenBLAS or oneDNN GEMM call with the thread count it may use.
void record_gemm_call(int threads) noexcept;
// Called by parallel_for's first thread with the team size.
void record_parallel_region(int threads) noexcept;
// Called before each oneDNN convolution with the thread count it may use.
void record_conv_call(int threads) noexcept;
// Called before each reorder into or out of a convolution's layouts.
void record_reorder_call(int threads) noexcept;

// Note [Parallel cost report]
// While a profile records, each piece of work the size rule may split (a
// parallel_for past its least size, each GEMM, convolution and reorder) is
// timed and reported through the observer table to the op open on its
// thread: the profiler's Regions, Threads and Serial columns, and the
// trace's `parallel` list that scripts/predict_parallel.py turns into the
// epoch at N threads (docs/threads.md). The width is the work in units of
// its threshold at kReferenceWakeUs (n / grain, m·n·k / kGemmWorkPerThread),
// so the team at another wake cost w follows as anvil picks it:
// floor(width · kReferenceWakeUs / w), one thread below 2. Nothing is
// reported inside a parallel region (the region's own time covers it). Off,
// a piece costs the observer check (Note [Observer off]).
class ParallelWork {
 public:
  ParallelWork(int threads, double width) noexcept {
    if (anvil::detail::observer() != nullptr) [[unlikely]]
      begin(threads, width);
  }
  ~ParallelWork() {
    if (start_ns_ >= 0) [[unlikely]]
      end();
  }
  ParallelWork(const ParallelWork&) = delete;
  ParallelWork& operator=(const ParallelWork&) = delete;

 private:
  void begin(int threads, double width) noexcept;
  void end() noexcept;
  std::int64_t start_ns_ = -1;  // -1: not observed
  double width_ = 0;
  int threads_ = 1;
};

// The width of an m×k by k×n product (Note [Parallel cost report]).
inline double gemm_width(std::int64_t m, std::int64_t n, std::int64_t k) noexcept {
  return static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k) /
         static_cast<double>(kGemmWorkPerThread);
}

}  // namespace anvil::cpu_backend
