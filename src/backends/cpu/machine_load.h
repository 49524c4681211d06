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
// When other processes hold the cores, OpenBLAS on two threads is what
// breaks down: its threaded level-3 driver (level3_thread.c) makes each
// thread wait for the others' packed panels in a spin loop inside the call,
// so a thread whose partner the scheduler left behind a spinning process
// burns its own time slice waiting (read from its source, not profiled).
// On issue 12's 2-core machine beside two spinning processes (bench_train
// --busy, other builds running too, medians of 3 epochs of 12,800 images)
// an MLP epoch took 0.97 s with OpenBLAS on two threads and 0.69 s with
// OpenBLAS on one, against LibTorch's 0.89 s. anvil's own loops wait
// passively at libgomp's barriers instead (Note [Passive OpenMP waiting]),
// and under the scheduler's per-thread fair share two threads get more of
// the machine than one: holding them and oneDNN's convolutions to one
// thread made LeNet's busy epoch slower (11.1 s against 8.5 s with two), so
// there the loops kept their team. On the 2-core Zen 4, where oneDNN's AVX-512
// kernels take LeNet's convolutions, the reverse held for them: bounded by
// the load, LeNet's busy epoch took 0.81 and 0.92 s against 0.96 and 1.12 s
// unbounded (two runs each, 12,800 images), and so it did for anvil's own
// loops once the convolutions were oneDNN's: bounded like them, LeNet's busy
// epoch took 0.73-0.77 s against 0.96-1.01 s for the same program with the
// loops unbounded (bench_train --busy, one run, three busy epochs each),
// and alone 0.070-0.075 s a 2,560-image epoch either way. So the library
// calls, OpenBLAS and oneDNN's GEMMs and convolutions, and anvil's own
// parallel loops (parallel_for) start from usable_threads():
// the set_num_threads bound, lowered to the cores that other processes left
// idle. Other processes' use is measured, not guessed from the load average
// (which counts anvil's own threads and lags by a minute): the machine's
// busy CPU time from /proc/stat less this process's own CPU time, over the
// last >= 100 ms, re-read at most every 100 ms by whichever thread finds the
// sample stale (a coarse clock read and an atomic exchange otherwise). A
// window counts only while this process keeps asking for threads: after
// a pause longer than the window itself, what others did meanwhile says
// nothing about the work now starting, so a new window starts there,
// unbounded until it closes. (bench_compare showed why, twice: with the old
// rule, which dropped only windows longer than a second, anvil's products
// after LibTorch's or OpenBLAS's 0.2 s turn on both cores ran on one thread
// for the next 100 ms, and allocating matmul at n = 256 and 1024 measured
// 0.78x and 0.76x of OpenBLAS while mm_out, timed at other moments, measured
// 0.96x and 0.94x.) The pool and its passive waiting stay as they are.

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
