#include "backends/cpu/blas_threads.h"

#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <mutex>
#include <shared_mutex>

#include "backends/cpu/threads.h"

namespace anvil::cpu_backend {

namespace {

// Guards OpenBLAS's global thread count: shared while calls run at the
// current count, exclusive to change it. OpenBLAS's OpenMP build frees the
// buffers of threads it no longer uses when the count drops, so it must
// never change under a running call.
std::shared_mutex g_blas_mutex;

}  // namespace

BlasThreads::BlasThreads(int threads) {
  if (omp_in_parallel()) return;
  bound_ = thread_bound();
  threads = std::clamp(threads, 1, bound_);
  threads_ = threads;
  record_gemm_call(threads);
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

void set_blas_bound(int threads) {
  std::unique_lock lock(g_blas_mutex);
  openblas_set_num_threads(threads);
  // openblas_set_num_threads also sets this thread's OpenMP count; keep ours.
  omp_set_num_threads(threads);
}

int blas_threads() noexcept {
  std::shared_lock lock(g_blas_mutex);
  return openblas_get_num_threads();
}

}  // namespace anvil::cpu_backend
