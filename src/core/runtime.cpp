#include "anvil/runtime.h"

#include <ostream>

#include "anvil/error.h"
#include "core/backend.h"
#include "core/caching_allocator.h"

namespace anvil {

namespace cpu_backend {
void set_thread_bound(int threads);  // src/backends/cpu/threads.h
int thread_bound() noexcept;
}  // namespace cpu_backend

// Note [One thread pool]
// anvil's CPU loops run on OpenMP and link the OpenMP build of OpenBLAS, so
// BLAS calls reuse the same worker threads. With two pools (OpenMP workers
// spinning while OpenBLAS's pthreads run, LibTorch's configuration after
// set_num_threads) a 2-core machine runs 5x slower; with one pool there is
// nothing to oversubscribe. set_num_threads() sets both, as an upper bound:
// each loop and each BLAS call takes at most that many threads, and small
// ones take one (Note [Threads from the work's size]).
void set_num_threads(int n) {
  ANVIL_CHECK(n >= 1, ValueError, "set_num_threads: expected a thread count >= 1, got ", n);
  cpu_backend::set_thread_bound(n);
}

int num_threads() noexcept { return cpu_backend::thread_bound(); }

extern "C" bool anvil_openmp_wait_policy_defaulted();
bool openmp_wait_policy_defaulted() noexcept { return anvil_openmp_wait_policy_defaulted(); }

std::ostream& operator<<(std::ostream& os, const MemoryStats& s) {
  using detail::format_bytes;
  os << "allocated " << format_bytes(s.allocated) << ", reserved " << format_bytes(s.reserved) << ", peak "
     << format_bytes(s.peak_allocated) << ", " << s.num_allocs << " allocations (" << s.cache_hits << " from cache), "
     << s.num_frees << " frees";
  if (s.limit) os << ", limit " << format_bytes(s.limit);
  return os;
}

MemoryStats memory_stats(Device d) { return detail::backend_checked(d, "memory_stats").memory_stats(d.index()); }
void reset_peak_memory_stats(Device d) {
  detail::backend_checked(d, "reset_peak_memory_stats").reset_peak_memory_stats(d.index());
}
void empty_cache(Device d) { detail::backend_checked(d, "empty_cache").empty_cache(d.index()); }
void set_memory_limit(Device d, std::uint64_t bytes) {
  detail::backend_checked(d, "set_memory_limit").set_memory_limit(d.index(), bytes);
}

}  // namespace anvil
