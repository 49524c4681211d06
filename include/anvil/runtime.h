// anvil/runtime.h — threads and memory.
//
//   anvil::set_num_threads(2);                    // anvil's loops and BLAS together
//   auto s = anvil::memory_stats(anvil::cpu());   // allocated, reserved, peak
//   anvil::set_memory_limit(anvil::gpu(0), 1 << 30);
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include "anvil/device.h"

namespace anvil {

// One thread budget for everything anvil runs on the CPU: its own parallel
// loops and OpenBLAS share a single OpenMP pool, so they never oversubscribe
// the cores. Default: the number of cores (or OMP_NUM_THREADS). The budget
// is the process's, as torch.set_num_threads's is: set on any thread, it
// holds for every thread, those started later included.
void set_num_threads(int n);
int num_threads() noexcept;
// Whether anvil chose OpenMP's wait policy (idle threads spin 200 µs, then
// sleep, on a quiet machine; sleep at once on a busy one; Note [Bounded
// OpenMP spinning]) — false when OMP_WAIT_POLICY or GOMP_SPINCOUNT was set by
// the user, whose choice then stands. parallel_costs() says which and why.
bool openmp_wait_policy_defaulted() noexcept;

// Which build of anvil's own CPU kernels runs (elementwise ops and
// conversions, reductions, pooling, batch norm, optimiser steps): "default"
// (the library's compile flags: -march=native under ANVIL_NATIVE), "avx2"
// (x86-64-v3) or "avx512" (x86-64-v4), the highest of those compiled in that
// this CPU runs, chosen once at start. ANVIL_CPU_ISA=default|avx2|avx512
// asks for one; a request that cannot be honoured runs the highest instead
// and says why in `reason` (and once on stderr). anvil-smi shows it in the
// CPU's runtime column.
struct CpuKernelIsa {
  std::string name;
  std::vector<std::string> compiled;  // the builds in this library, lowest first
  std::string reason;                 // empty when ANVIL_CPU_ISA is unset or was honoured
};
CpuKernelIsa cpu_kernel_isa();

// What waking the CPU's thread pool costs on this machine, and the least
// work anvil gives a thread because of it (Note [Threads from the measured
// wake cost] in src/backends/cpu/threads.h): the median of a few empty
// parallel regions at the thread bound, measured once at the first parallel
// decision (and again after set_num_threads changes the bound), about a
// millisecond; the thresholds take at least 24 µs of a measured cost.
// ANVIL_PARALLEL_WAKE_US=<µs> fixes it instead (45 gives the thresholds anvil
// used before it measured). anvil-smi shows wake_us and the wait policy.
struct ParallelCosts {
  double wake_us = 0;                     // one wake of the pool, µs
  int threads = 0;                        // the team it was measured at; 0 when fixed
  bool fixed = false;                     // from ANVIL_PARALLEL_WAKE_US, not measured
  std::int64_t grain = 0;                 // elements per thread of add, mul, copy (f32)
  std::int64_t grain_vector_math = 0;     // of exp, sigmoid
  std::int64_t grain_libm = 0;            // of log, sin, tanh, pow
  std::int64_t gemm_macs_per_thread = 0;  // multiply-adds per thread of a GEMM or convolution
  std::string wait_policy;                // how idle workers wait: "spin 200 us" (then sleep), "passive", "yours"
  std::string wait_reason;  // why: "quiet: 0 other runnable threads on 16 CPUs", "busy: ...", the user's variables
};
ParallelCosts parallel_costs();

struct MemoryStats {
  std::uint64_t allocated = 0;       // bytes held by live tensors
  std::uint64_t reserved = 0;        // allocated + cached for reuse
  std::uint64_t peak_allocated = 0;  // high-water mark of `allocated`
  std::uint64_t num_allocs = 0;      // allocations served (cached or fresh)
  std::uint64_t num_frees = 0;
  std::uint64_t cache_hits = 0;  // allocations served from the cache
  std::uint64_t limit = 0;       // 0 = none
};
std::ostream& operator<<(std::ostream& os, const MemoryStats& s);

MemoryStats memory_stats(Device d);
void reset_peak_memory_stats(Device d);
// Returns cached, unused blocks to the device (or the OS for the CPU).
void empty_cache(Device d);
// Caps `reserved` on `d` (0 removes the cap); past it an allocation empties
// the cache, retries once, then throws OutOfMemory. Also settable at start-up
// with ANVIL_MEMORY_LIMIT="opencl:0=512M,cpu=8G".
void set_memory_limit(Device d, std::uint64_t bytes);

}  // namespace anvil
