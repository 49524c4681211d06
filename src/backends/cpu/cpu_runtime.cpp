// anvil/runtime.h's thread controls, which are the CPU backend's: its loops
// and its BLAS share one OpenMP pool.
#include "anvil/error.h"
#include "anvil/runtime.h"
#include "backends/cpu/openmp_defaults.h"
#include "backends/cpu/threads.h"

namespace anvil {

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

bool openmp_wait_policy_defaulted() noexcept { return anvil_openmp_wait_policy().defaulted; }

}  // namespace anvil
