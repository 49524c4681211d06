// The thread bound lowered to the cores other processes leave idle,
// sampled from /proc/stat (threads.h).
#pragma once

#include <time.h>

#include <cstdint>

namespace anvil::cpu_backend {

inline std::int64_t nanoseconds(clockid_t clock) noexcept {
  timespec t{};
  clock_gettime(clock, &t);
  return std::int64_t{t.tv_sec} * 1'000'000'000 + t.tv_nsec;
}

// Note [Fewer threads on a busy machine]
// OpenBLAS, oneDNN's GEMMs and convolutions, and anvil's parallel_for start
// from usable_threads(): the set_num_threads bound lowered to the cores other
// processes leave idle. Why: OpenBLAS's threaded driver spins waiting for its
// partner threads, so beside spinning processes an MLP epoch took 0.97 s on
// two threads against 0.69 s on one (LibTorch 0.89 s); bounded the same way,
// LeNet's busy epoch took 0.73-0.77 s against 0.96-1.01 s. Others' use is
// measured, not guessed from the load average: the machine's busy time from
// /proc/stat less this process's, over the last >= 100 ms, re-read at most
// every 100 ms. A pause longer than the window starts a new, unbounded one:
// what others did meanwhile says nothing about the work now starting. The
// pool and its passive waiting stay as they are. Figures and the history:
// docs/measurements.md.

// The rule: of `cores` CPUs, others used `others_busy` cores' worth over the
// window. Below half a core anvil keeps max_threads (set_num_threads may ask
// for more threads than cores, and an idle machine keeps that); from there
// it takes the cores left, rounded to the nearest whole one, at least 1 and
// at most max_threads.
int threads_for_load(int max_threads, int cores, double others_busy) noexcept;

// thread_bound() lowered by the measured load (see the Note): the bound
// for the thread count of OpenBLAS and oneDNN calls and of parallel_for.
int usable_threads() noexcept;

// Whether usable_threads() follows the load (the default). Tests that count
// team sizes turn it off: under `ctest -j` other tests are the load.
void set_load_bound(bool enabled) noexcept;

}  // namespace anvil::cpu_backend
