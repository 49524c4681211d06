// See Note [Threads from the work's size] in threads.h.
#include "backends/cpu/threads.h"

#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <shared_mutex>

namespace anvil::cpu_backend {

namespace {

// Guards OpenBLAS's global thread count: shared while calls run at the
// current count, exclusive to change it. OpenBLAS's OpenMP build frees the
// buffers of threads it no longer uses when the count drops, so it must
// never change under a running call.
std::shared_mutex g_blas_mutex;

std::atomic<std::uint64_t> g_regions{0};
std::atomic<std::uint64_t> g_region_threads{0};
std::atomic<std::uint64_t> g_blas_single{0};
std::atomic<std::uint64_t> g_blas_threaded{0};
std::atomic<std::uint64_t> g_conv_single{0};
std::atomic<std::uint64_t> g_conv_threaded{0};
std::atomic<std::uint64_t> g_gemm_small{0};

}  // namespace

int gemm_threads(std::int64_t m, std::int64_t n, std::int64_t k, int max_threads) noexcept {
  if (max_threads <= 1 || m <= 0 || n <= 0 || k <= 0) return 1;
  // In double: m·n·k of a large batched product can pass 2^63.
  const double per_thread = static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k) /
                            static_cast<double>(kGemmWorkPerThread);
  if (per_thread < 2) return 1;
  return static_cast<int>(std::min<double>(max_threads, per_thread));
}

BlasThreads::BlasThreads(int threads) {
  if (omp_in_parallel()) return;
  bound_ = omp_get_max_threads();
  threads = std::clamp(threads, 1, bound_);
  (threads == 1 ? g_blas_single : g_blas_threaded).fetch_add(1, std::memory_order_relaxed);
  g_blas_mutex.lock_shared();
  held_ = Held::Shared;
  if (openblas_get_num_threads() != threads) {
    g_blas_mutex.unlock_shared();
    g_blas_mutex.lock();
    held_ = Held::Exclusive;
    openblas_set_num_threads(threads);
  }
  // OpenBLAS's OpenMP build compares its count with this thread's OpenMP
  // count on every call and adopts the latter when they differ (unless its
  // own count is 1), so the two must agree while the call runs.
  omp_set_num_threads(threads);
}

BlasThreads::~BlasThreads() {
  if (held_ == Held::Nothing) return;
  omp_set_num_threads(bound_);
  if (held_ == Held::Shared)
    g_blas_mutex.unlock_shared();
  else
    g_blas_mutex.unlock();
}

void set_thread_bound(int threads) {
  omp_set_num_threads(threads);
  std::unique_lock lock(g_blas_mutex);
  openblas_set_num_threads(threads);
  // openblas_set_num_threads also sets this thread's OpenMP count; keep ours.
  omp_set_num_threads(threads);
}

int blas_threads() noexcept {
  std::shared_lock lock(g_blas_mutex);
  return openblas_get_num_threads();
}

ParallelStats parallel_stats() noexcept {
  ParallelStats s;
  s.regions = g_regions.load(std::memory_order_relaxed);
  s.region_threads = g_region_threads.load(std::memory_order_relaxed);
  s.blas_single = g_blas_single.load(std::memory_order_relaxed);
  s.blas_threaded = g_blas_threaded.load(std::memory_order_relaxed);
  s.conv_single = g_conv_single.load(std::memory_order_relaxed);
  s.conv_threaded = g_conv_threaded.load(std::memory_order_relaxed);
  s.gemm_small = g_gemm_small.load(std::memory_order_relaxed);
  return s;
}

void reset_parallel_stats() noexcept {
  g_regions.store(0, std::memory_order_relaxed);
  g_region_threads.store(0, std::memory_order_relaxed);
  g_blas_single.store(0, std::memory_order_relaxed);
  g_blas_threaded.store(0, std::memory_order_relaxed);
  g_conv_single.store(0, std::memory_order_relaxed);
  g_conv_threaded.store(0, std::memory_order_relaxed);
  g_gemm_small.store(0, std::memory_order_relaxed);
}

void record_small_gemm() noexcept { g_gemm_small.fetch_add(1, std::memory_order_relaxed); }

void record_parallel_region(int threads) noexcept {
  g_regions.fetch_add(1, std::memory_order_relaxed);
  g_region_threads.fetch_add(static_cast<std::uint64_t>(threads), std::memory_order_relaxed);
}

void record_conv_call(int threads) noexcept {
  (threads == 1 ? g_conv_single : g_conv_threaded).fetch_add(1, std::memory_order_relaxed);
}

}  // namespace anvil::cpu_backend
