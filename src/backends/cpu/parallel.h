// Parallel loops for the CPU backend. See Note [One thread pool] in
// src/core/runtime.cpp: everything runs on the one OpenMP pool that
// OpenBLAS shares; and Note [Threads from the work's size] in threads.h.
#pragma once

#include <omp.h>

#include <algorithm>
#include <cstdint>

#include "backends/cpu/isa.h"
#include "backends/cpu/threads.h"

#if defined(__SANITIZE_THREAD__)
#include <sanitizer/tsan_interface.h>
// libgomp's entry point for `#pragma omp parallel num_threads(n)`, which GCC emits.
extern "C" void GOMP_parallel(void (*fn)(void*), void* data, unsigned num_threads, unsigned flags);
#endif

namespace anvil::cpu_backend {

// Note [OpenMP under ThreadSanitizer]: libgomp is not instrumented, so TSan
// cannot see that a region's start happens after the code before it, nor its
// end before the code after it, and reports the next op's writes to memory a
// pool thread read in the previous region. So in a TSan build every region of
// anvil's (run_region, under parallel_for) calls libgomp's GOMP_parallel
// itself, as the pragma compiles to, and tells TSan of the fork once the
// region's shared data is written and of the join after (what LLVM's Archer
// does for libomp): nothing of libgomp's needs suppressing. Other builds use
// the pragma.
template <typename Body>
void run_region(int threads, Body& body) {
#if defined(__SANITIZE_THREAD__)
  struct Shared {
    Body* body;
    char forked = 0, joined = 0;
  } shared{&body};
  __tsan_release(&shared.forked);
  GOMP_parallel(
      [](void* data) {
        auto* s = static_cast<Shared*>(data);
        __tsan_acquire(&s->forked);
        (*s->body)(omp_get_thread_num(), omp_get_num_threads());
        __tsan_release(&s->joined);
      },
      &shared, static_cast<unsigned>(threads), 0);
  __tsan_acquire(&shared.joined);
#else
#pragma omp parallel num_threads(threads)
  body(omp_get_thread_num(), omp_get_num_threads());
#endif
}

inline namespace ANVIL_CPU_ISA {

// The least work worth a thread of its own, in elements, by an element's
// cost (Note [Threads from the work's size]), at kReferenceWakeUs: a loop of
// n elements runs on n / grain threads, and below 2 * grain on the calling
// thread alone, with the grain scaled by parallel_for to the wake cost
// measured on the running machine (Note [Threads from the measured wake
// cost]). Each grain is about a reference wake (45 µs) of one thread's work
// at its class's cost per f32 element: ~0.2 ns for add, mul or copy, ~0.7 ns
// for exp and sigmoid (vectorised polynomials), and 3-15 ns for log, sin,
// cos, tanh and pow (libm, one element at a time). On the 2-core Zen 4 VM
// where they were tuned, doubling the first two grains (from 1 << 17 and
// 1 << 15) took a ResNet-18 step (batch 32) on two threads from 0.26-0.28 to
// 0.235-0.239 s and a LeNet step from 6.8-7.1 to 6.3-6.5 ms; doubling them
// again measured no better.
inline constexpr std::int64_t kParallelGrain = 1 << 18;            // a MiB of f32
inline constexpr std::int64_t kParallelGrainVectorMath = 1 << 16;  // exp, sigmoid (f32)
inline constexpr std::int64_t kParallelGrainLibm = 1 << 13;        // log, sin, cos, tanh, pow; f64 exp

// fn(begin, end) over [0, n) in contiguous chunks, one per thread, on at
// most n / g threads, g = scaled_work(grain): below 2 * g it runs on the
// calling thread and the pool is never woken.
// The team is at most usable_threads(): fewer while other processes hold
// the cores (Note [Fewer threads on a busy machine]).
template <typename F>
void parallel_for(std::int64_t n, std::int64_t grain, F&& fn) {
  if (n <= 0) return;
  // Work below two grains at the least scale never splits (no call, no
  // load); nested regions run on their thread.
  const bool small = static_cast<double>(n) < 2.0 * kMinWorkScale * static_cast<double>(grain);
  if (n < 2 || small || omp_in_parallel()) {
    fn(std::int64_t{0}, n);
    return;
  }
  const std::int64_t g = scaled_work(grain);
  const int threads = n < 2 * g ? 1 : static_cast<int>(std::min<std::int64_t>(usable_threads(), n / g));
  // Timed while a profile records (Note [Parallel cost report]).
  const ParallelWork work(threads, static_cast<double>(n) / static_cast<double>(grain));
  if (threads == 1) {
    fn(std::int64_t{0}, n);
    return;
  }
  auto chunk_of_thread = [&](int t, int nt) {
    if (t == 0) record_parallel_region(nt);
    const std::int64_t chunk = chunk_length(n, nt);
    const std::int64_t begin = std::min<std::int64_t>(n, t * chunk);
    const std::int64_t end = std::min<std::int64_t>(n, begin + chunk);
    if (begin < end) fn(begin, end);
  };
  run_region(threads, chunk_of_thread);
}

}  // namespace ANVIL_CPU_ISA
}  // namespace anvil::cpu_backend
