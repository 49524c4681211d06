// See Note [Threads from the work's size] in threads.h.
#include "backends/cpu/threads.h"

#include <omp.h>

#include <algorithm>
#include <atomic>

namespace anvil::cpu_backend {

namespace {

std::atomic<std::uint64_t> g_regions{0};
std::atomic<std::uint64_t> g_region_threads{0};
std::atomic<std::uint64_t> g_gemm_single{0};
std::atomic<std::uint64_t> g_gemm_threaded{0};
std::atomic<std::uint64_t> g_conv_single{0};
std::atomic<std::uint64_t> g_conv_threaded{0};
std::atomic<std::uint64_t> g_reorder_single{0};
std::atomic<std::uint64_t> g_reorder_threaded{0};
std::atomic<std::uint64_t> g_gemm_small{0};
std::atomic<std::uint64_t> g_gemm_k_split{0};

// set_num_threads's count and how many times it was called, as one word
// (generation << 32 | count; 0 before the first call), and the word this
// thread last applied: see thread_bound.
std::atomic<std::uint64_t> g_bound_word{0};
thread_local std::uint64_t t_bound_word = 0;

// One library call counted by the thread count it may use.
void count_call(int threads, std::atomic<std::uint64_t>& single, std::atomic<std::uint64_t>& threaded) noexcept {
  (threads == 1 ? single : threaded).fetch_add(1, std::memory_order_relaxed);
}

}  // namespace

int thread_bound() noexcept {
  const std::uint64_t word = g_bound_word.load(std::memory_order_acquire);
  if (word != t_bound_word && !omp_in_parallel()) [[unlikely]] {
    omp_set_num_threads(static_cast<int>(word & 0xffffffffU));
    t_bound_word = word;
  }
  return omp_get_max_threads();
}

int gemm_threads(std::int64_t m, std::int64_t n, std::int64_t k, int max_threads,
                 std::int64_t work_per_thread) noexcept {
  if (max_threads <= 1 || m <= 0 || n <= 0 || k <= 0) return 1;
  // In double: m·n·k of a large batched product can pass 2^63.
  const double per_thread = static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k) /
                            static_cast<double>(std::max<std::int64_t>(work_per_thread, 1));
  if (per_thread < 2) return 1;
  return static_cast<int>(std::min<double>(max_threads, per_thread));
}

int gemm_threads(std::int64_t m, std::int64_t n, std::int64_t k, int max_threads) noexcept {
  if (max_threads <= 1) return 1;
  return gemm_threads(m, n, k, max_threads, scaled_work(kGemmWorkPerThread));
}

void set_thread_bound(int threads) {
  forget_wake_cost(threads);
  // Every thread adopts the new count at its next decision (thread_bound).
  const std::uint64_t generation = (g_bound_word.load(std::memory_order_relaxed) >> 32) + 1;
  const std::uint64_t word = generation << 32 | static_cast<std::uint32_t>(threads);
  g_bound_word.store(word, std::memory_order_release);
  t_bound_word = word;
  omp_set_num_threads(threads);
  set_blas_bound(threads);
}

ParallelStats parallel_stats() noexcept {
  ParallelStats s;
  s.regions = g_regions.load(std::memory_order_relaxed);
  s.region_threads = g_region_threads.load(std::memory_order_relaxed);
  s.gemm_single = g_gemm_single.load(std::memory_order_relaxed);
  s.gemm_threaded = g_gemm_threaded.load(std::memory_order_relaxed);
  s.conv_single = g_conv_single.load(std::memory_order_relaxed);
  s.conv_threaded = g_conv_threaded.load(std::memory_order_relaxed);
  s.reorder_single = g_reorder_single.load(std::memory_order_relaxed);
  s.reorder_threaded = g_reorder_threaded.load(std::memory_order_relaxed);
  s.gemm_small = g_gemm_small.load(std::memory_order_relaxed);
  s.gemm_k_split = g_gemm_k_split.load(std::memory_order_relaxed);
  return s;
}

void reset_parallel_stats() noexcept {
  g_regions.store(0, std::memory_order_relaxed);
  g_region_threads.store(0, std::memory_order_relaxed);
  g_gemm_single.store(0, std::memory_order_relaxed);
  g_gemm_threaded.store(0, std::memory_order_relaxed);
  g_conv_single.store(0, std::memory_order_relaxed);
  g_conv_threaded.store(0, std::memory_order_relaxed);
  g_reorder_single.store(0, std::memory_order_relaxed);
  g_reorder_threaded.store(0, std::memory_order_relaxed);
  g_gemm_small.store(0, std::memory_order_relaxed);
  g_gemm_k_split.store(0, std::memory_order_relaxed);
}

void record_small_gemm() noexcept { g_gemm_small.fetch_add(1, std::memory_order_relaxed); }

void record_k_split_gemm() noexcept { g_gemm_k_split.fetch_add(1, std::memory_order_relaxed); }

void record_gemm_call(int threads) noexcept { count_call(threads, g_gemm_single, g_gemm_threaded); }

void record_parallel_region(int threads) noexcept {
  g_regions.fetch_add(1, std::memory_order_relaxed);
  g_region_threads.fetch_add(static_cast<std::uint64_t>(threads), std::memory_order_relaxed);
}

void ParallelWork::begin(int threads, double width) noexcept {
  if (omp_in_parallel()) return;
  threads_ = threads;
  width_ = width;
  start_ns_ = nanoseconds(CLOCK_MONOTONIC);
}

void ParallelWork::end() noexcept {
  const std::int64_t ns = nanoseconds(CLOCK_MONOTONIC) - start_ns_;
  // A region where this process's size rule splits the work: its width at
  // the wake cost that runs (Note [Threads from the measured wake cost]).
  const bool region = width_ >= 2.0 * parallel_work_scale();
  if (const anvil::detail::Observer* o = anvil::detail::observer()) o->parallel(threads_, width_, region, ns);
}

void record_conv_call(int threads) noexcept { count_call(threads, g_conv_single, g_conv_threaded); }

void record_reorder_call(int threads) noexcept { count_call(threads, g_reorder_single, g_reorder_threaded); }

}  // namespace anvil::cpu_backend
