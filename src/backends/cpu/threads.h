// How many threads a piece of CPU work runs on, chosen per call from its
// size, and the counters that let tests see the choice. See Note [Threads
// from the work's size].
#pragma once

#include <cstdint>

namespace anvil::cpu_backend {

// Note [Threads from the work's size]
// Work too small to repay waking the pool's threads runs on the calling
// thread without entering a parallel region at all; larger work takes one
// thread per share that repays a wake, up to every thread that
// anvil::set_num_threads allows (the upper bound, omp_get_max_threads()):
//   - anvil's loops (parallel_for, parallel.h) by their element count and a
//     grain per element's cost;
//   - OpenBLAS by m·n·k (gemm_threads). Its OpenMP build runs on the same
//     pool (Note [One thread pool]) and takes its thread count from a global
//     that openblas_set_num_threads sets, so BlasThreads sets it around each
//     call, changing it only when the wanted count differs from the last.
//   - oneDNN's convolutions by the m·n·k of the GEMM with their
//     multiply-adds (Note [oneDNN convolution in the CPU backend]), and the
//     reorders around them by their bytes (Note [Reorder threads]).
// How much work repays a thread follows from what a wake costs on the
// machine that runs: Note [Threads from the measured wake cost].
// What was measured, on issue 12's 2-core machine with passive waiting and
// other builds running: a parallel region cost ~10 µs; OpenBLAS on two
// threads was slower than on one for every square product up to n = 320
// (n = 100: 74 against 44 µs; n = 200: 344 against 243 µs), even at
// n = 512, because the second core was busy.

// Note [Threads from the measured wake cost]
// Each size threshold is a time budget: a thread's share must take about a
// wake of the pool. The constants (parallel.h's grains, kGemmWorkPerThread,
// kReorderBytesPerThread) are those budgets at kReferenceWakeUs, the 45 µs
// a wake cost on the 2-core Zen 4 VM where they were tuned (a 1M-element
// sum: 43 µs on one thread, 72 on two), and each is scaled by
// wake / kReferenceWakeUs, `wake` measured by the running process: the
// median of 15 empty parallel regions at the thread bound, each after 50 µs
// without one (passive workers asleep, as between a step's ops), ~1 ms at
// the first parallel decision and again after set_num_threads changes the
// bound; not while other processes hold cores (usable_threads), at most
// 5 ms, clamped to [kMinWakeUs, kMaxWakeUs]. Why: the constants capped the
// 16-core Xeon host far below 16 threads (LeNet's 1.2M-element max-pool took
// 4, its 409k-element layers one; LeNet 1.84x faster on 16 threads than on
// one, PyTorch 6.53x), and wakes differ by machine: 4.4 µs on the 2-core
// Xeon build machine (KVM, haltpoll) with a core free, ~29 µs in some
// processes while builds held both cores, 45 µs on the Zen 4 VM.
// ANVIL_PARALLEL_WAKE_US fixes it (45: the old thresholds), for benchmarks
// and for the tests that count teams.
inline constexpr double kReferenceWakeUs = 45.0;
inline constexpr double kMinWakeUs = 1.0;
inline constexpr double kMaxWakeUs = 100.0;
// The least factor a threshold is scaled by (the least a pin can ask for).
inline constexpr double kMinWorkScale = kMinWakeUs / kReferenceWakeUs;

// The measured (or pinned) wake cost and the work sizes derived from it.
struct WakeCost {
  double wake_us = kReferenceWakeUs;
  int threads = 0;      // the thread bound it was measured at (0: pinned)
  bool pinned = false;  // ANVIL_PARALLEL_WAKE_US or set_parallel_wake_us
};
// Measures on first use and after the bound changes (never inside a
// parallel region, nor with a bound of one thread: then the last value).
WakeCost parallel_wake_cost() noexcept;

// The factor every work threshold is scaled by: wake / kReferenceWakeUs.
double parallel_work_scale() noexcept;

// `reference` (a threshold at kReferenceWakeUs) scaled to this machine,
// at least 1.
std::int64_t scaled_work(std::int64_t reference) noexcept;

// Pins the wake cost (µs, clamped to [kMinWakeUs, 10000]); 0 or less measures
// again (or returns to ANVIL_PARALLEL_WAKE_US when that is set).
void set_parallel_wake_us(double us) noexcept;

// The measurement itself: the median wake at `threads` threads in µs,
// clamped to [kMinWakeUs, kMaxWakeUs]; 0 inside a parallel region or for
// fewer than two threads.
double measure_parallel_wake_us(int threads) noexcept;

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

// The set_num_threads bound as this thread sees it: omp_get_max_threads(),
// after adopting a bound set on any thread since this one last looked.
// OpenMP's thread count is per thread (a new std::thread starts from
// OMP_NUM_THREADS or the cores), and set_num_threads is for the process, as
// torch.set_num_threads is; one relaxed compare when nothing changed.
int thread_bound() noexcept;

// thread_bound() lowered by the measured load (see the Note): the bound
// for the thread count of OpenBLAS and oneDNN calls and of parallel_for.
int usable_threads() noexcept;

// Whether usable_threads() follows the load (the default). Tests that count
// team sizes turn it off: under `ctest -j` other tests are the load.
void set_load_bound(bool enabled) noexcept;

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

// Holds OpenBLAS at `threads` threads (at most omp_get_max_threads()) for
// its lifetime: anvil's BLAS calls at the same count run concurrently, and a
// call that needs another count waits for them and changes it. Inside a
// parallel region it does nothing (OpenBLAS then runs on the calling thread).
class BlasThreads {
 public:
  explicit BlasThreads(int threads);
  ~BlasThreads();
  BlasThreads(const BlasThreads&) = delete;
  BlasThreads& operator=(const BlasThreads&) = delete;

 private:
  enum class Held { Nothing, Shared, Exclusive };
  Held held_ = Held::Nothing;
  int bound_ = 1;  // this thread's OpenMP thread count, restored at the end
};

// anvil::set_num_threads: the upper bound for anvil's loops and OpenBLAS.
void set_thread_bound(int threads);

// OpenBLAS's thread count as its next call would see it (for tests).
int blas_threads() noexcept;

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
  std::uint64_t gemm_small = 0;  // GEMMs run on libxsmm kernels instead (cpu_gemm.cpp)
};
ParallelStats parallel_stats() noexcept;
void reset_parallel_stats() noexcept;
// Called by the GEMM primitive for a product it gives to libxsmm.
void record_small_gemm() noexcept;
// Called for each OpenBLAS or oneDNN GEMM call with the thread count it may use.
void record_gemm_call(int threads) noexcept;
// Called by parallel_for's first thread with the team size.
void record_parallel_region(int threads) noexcept;
// Called before each oneDNN convolution with the thread count it may use.
void record_conv_call(int threads) noexcept;
// Called before each reorder into or out of a convolution's layouts.
void record_reorder_call(int threads) noexcept;

}  // namespace anvil::cpu_backend
