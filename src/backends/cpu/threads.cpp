// See Note [Threads from the work's size] in threads.h.
#include "backends/cpu/threads.h"

#include <cblas.h>
#include <fcntl.h>
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <mutex>
#include <shared_mutex>
#include <utility>

#include "anvil/runtime.h"
#include "backends/cpu/parallel.h"

namespace anvil::cpu_backend {

namespace {

// Guards OpenBLAS's global thread count: shared while calls run at the
// current count, exclusive to change it. OpenBLAS's OpenMP build frees the
// buffers of threads it no longer uses when the count drops, so it must
// never change under a running call.
std::shared_mutex g_blas_mutex;

std::atomic<std::uint64_t> g_regions{0};
std::atomic<std::uint64_t> g_region_threads{0};
std::atomic<std::uint64_t> g_gemm_single{0};
std::atomic<std::uint64_t> g_gemm_threaded{0};
std::atomic<std::uint64_t> g_conv_single{0};
std::atomic<std::uint64_t> g_conv_threaded{0};
std::atomic<std::uint64_t> g_reorder_single{0};
std::atomic<std::uint64_t> g_reorder_threaded{0};
std::atomic<std::uint64_t> g_gemm_small{0};

// set_num_threads's count and how many times it was called, as one word
// (generation << 32 | count; 0 before the first call), and the word this
// thread last applied: see thread_bound.
std::atomic<std::uint64_t> g_bound_word{0};
thread_local std::uint64_t t_bound_word = 0;

// One library call counted by the thread count it may use.
void count_call(int threads, std::atomic<std::uint64_t>& single, std::atomic<std::uint64_t>& threaded) noexcept {
  (threads == 1 ? single : threaded).fetch_add(1, std::memory_order_relaxed);
}

// Note [Fewer threads on a busy machine]: the load sample.
constexpr std::int64_t kLoadWindowNs = 100'000'000;
// A pause this long between two asks for threads ends the window.
constexpr std::int64_t kIdleGapNs = kLoadWindowNs;

std::int64_t nanoseconds(clockid_t clock) noexcept {
  timespec t{};
  clock_gettime(clock, &t);
  return std::int64_t{t.tv_sec} * 1'000'000'000 + t.tv_nsec;
}

// The machine's busy CPU time in clock ticks, all CPUs together: the first
// line of /proc/stat less its idle and iowait columns (steal counts as busy:
// a hypervisor's other guests took the core). -1 when unreadable.
std::int64_t machine_busy_ticks() noexcept {
  const int fd = open("/proc/stat", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  char line[256];
  const ssize_t n = read(fd, line, sizeof line - 1);
  close(fd);
  if (n <= 4) return -1;
  line[n] = '\0';
  // "cpu  user nice system idle iowait irq softirq steal guest guest_nice";
  // guest time is already inside user, so the first eight columns.
  char* p = line + 3;
  std::int64_t busy = 0;
  for (int column = 0; column < 8; ++column) {
    char* end = nullptr;
    const long long v = std::strtoll(p, &end, 10);
    if (end == p) return -1;
    if (column != 3 && column != 4) busy += v;
    p = end;
  }
  return busy;
}

struct LoadSample {
  std::int64_t wall_ns = 0, process_ns = 0, busy_ticks = -1;
};

std::mutex g_load_mutex;   // held by the one thread taking a sample
LoadSample g_last_sample;  // guarded by g_load_mutex
std::atomic<std::int64_t> g_next_sample_ns{0};
std::atomic<std::int64_t> g_last_ask_ns{0};
std::atomic<int> g_load_threads{1 << 16};  // no bound until the first window closes
std::atomic<bool> g_load_bound{true};

// Takes a sample when the window has closed (or, with `restart`, at once) and
// no other thread is taking one. A closed window updates g_load_threads; a
// restarted one drops the bound until it closes (see the Note).
void sample_load(std::int64_t now, bool restart) noexcept {
  std::unique_lock lock(g_load_mutex, std::try_to_lock);
  if (!lock.owns_lock()) return;
  if (!restart && now < g_next_sample_ns.load(std::memory_order_relaxed)) return;  // another thread just did
  const LoadSample s{nanoseconds(CLOCK_MONOTONIC), nanoseconds(CLOCK_PROCESS_CPUTIME_ID), machine_busy_ticks()};
  g_next_sample_ns.store(now + kLoadWindowNs, std::memory_order_relaxed);
  const LoadSample last = std::exchange(g_last_sample, s);
  if (restart || s.busy_ticks < 0) {  // no /proc: no bound either
    g_load_threads.store(1 << 16, std::memory_order_relaxed);
    return;
  }
  if (last.busy_ticks < 0 || s.wall_ns <= last.wall_ns) return;
  static const double seconds_per_tick = 1.0 / static_cast<double>(sysconf(_SC_CLK_TCK));
  const double wall = 1e-9 * static_cast<double>(s.wall_ns - last.wall_ns);
  const double busy = seconds_per_tick * static_cast<double>(s.busy_ticks - last.busy_ticks);
  const double ours = 1e-9 * static_cast<double>(s.process_ns - last.process_ns);
  g_load_threads.store(threads_for_load(1 << 16, omp_get_num_procs(), (busy - ours) / wall), std::memory_order_relaxed);
}

// Note [Threads from the measured wake cost]: the wake cost, in ns (0: not
// known yet), the bound it was measured at, and the pin.
std::mutex g_wake_mutex;  // held by the one thread measuring
std::atomic<std::int64_t> g_wake_ns{0};
std::atomic<int> g_wake_threads{0};
std::atomic<double> g_work_scale{1.0};
std::atomic<double> g_pinned_us{0.0};  // set_parallel_wake_us; 0: none

constexpr std::int64_t kWakeGapNs = 50'000;
constexpr int kWakeWarmUp = 3;
constexpr int kWakeSamples = 15;
constexpr std::int64_t kWakeBudgetNs = 5'000'000;  // the most a measurement may take, past 3 samples

// ANVIL_PARALLEL_WAKE_US, read once: 0 when unset or not a positive number
// (said once on stderr).
double wake_us_from_env() noexcept {
  static const double value = [] {
    const char* text = std::getenv("ANVIL_PARALLEL_WAKE_US");
    if (text == nullptr || *text == '\0') return 0.0;
    char* end = nullptr;
    const double v = std::strtod(text, &end);
    if (end == text || *end != '\0' || !(v > 0) || !std::isfinite(v)) {
      std::fprintf(stderr,
                   "anvil: ANVIL_PARALLEL_WAKE_US: expected a positive number of microseconds, got '%s'; "
                   "measuring the wake cost instead\n",
                   text);
      return 0.0;
    }
    return std::clamp(v, kMinWakeUs, 10000.0);
  }();
  return value;
}

void store_wake(double us, int threads) noexcept {
  g_work_scale.store(us / kReferenceWakeUs, std::memory_order_relaxed);
  g_wake_threads.store(threads, std::memory_order_relaxed);
  g_wake_ns.store(std::max<std::int64_t>(1, std::llround(us * 1000.0)), std::memory_order_release);
}

// The wake cost at the current bound, measuring it if it is not known (see
// parallel_wake_cost).
void update_wake_cost() noexcept {
  const double pinned = g_pinned_us.load(std::memory_order_relaxed);
  const double env = wake_us_from_env();
  const int bound = thread_bound();
  const std::int64_t known = g_wake_ns.load(std::memory_order_acquire);
  if (pinned > 0 || env > 0) {
    if (known == 0) store_wake(pinned > 0 ? pinned : env, 0);
    return;
  }
  if (known != 0) return;
  if (bound < 2 || omp_in_parallel()) return;  // nothing to measure: keep the last value
  // While other processes hold cores (Note [Fewer threads on a busy
  // machine]) a wake measures their time slices, not the pool: wait for a
  // quieter decision and keep the last value meanwhile.
  if (usable_threads() < bound) return;
  const std::lock_guard lock(g_wake_mutex);
  if (g_wake_ns.load(std::memory_order_acquire) != 0) return;  // another thread just measured
  store_wake(measure_parallel_wake_us(bound), bound);
}

}  // namespace

int threads_for_load(int max_threads, int cores, double others_busy) noexcept {
  max_threads = std::max(max_threads, 1);
  // Also NaN, and tick rounding that puts others below zero.
  if (!(others_busy >= 0.5)) return max_threads;
  const double idle = std::max(static_cast<double>(cores) - others_busy, 0.0);
  return std::clamp(static_cast<int>(std::lround(idle)), 1, max_threads);
}

void set_load_bound(bool enabled) noexcept { g_load_bound.store(enabled, std::memory_order_relaxed); }

int thread_bound() noexcept {
  const std::uint64_t word = g_bound_word.load(std::memory_order_acquire);
  if (word != t_bound_word && !omp_in_parallel()) [[unlikely]] {
    omp_set_num_threads(static_cast<int>(word & 0xffffffffU));
    t_bound_word = word;
  }
  return omp_get_max_threads();
}

int usable_threads() noexcept {
  const int bound = thread_bound();
  if (bound <= 1 || !g_load_bound.load(std::memory_order_relaxed)) return bound;
  const std::int64_t now = nanoseconds(CLOCK_MONOTONIC_COARSE);
  const std::int64_t last_ask = g_last_ask_ns.exchange(now, std::memory_order_relaxed);
  if (now - last_ask > kIdleGapNs)
    sample_load(now, /*restart=*/true);
  else if (now >= g_next_sample_ns.load(std::memory_order_relaxed))
    sample_load(now, /*restart=*/false);
  return std::min(bound, g_load_threads.load(std::memory_order_relaxed));
}

double measure_parallel_wake_us(int threads) noexcept {
  if (threads < 2 || omp_in_parallel()) return 0.0;
  std::array<std::int64_t, kWakeSamples> samples{};
  int taken = 0;
  const std::int64_t deadline = nanoseconds(CLOCK_MONOTONIC) + kWakeBudgetNs;
  for (int i = 0; i < kWakeWarmUp + kWakeSamples; ++i) {
    // Spin, not sleep: the calling thread stays awake, as it does between
    // the ops of a step, while the pool's passive workers fall asleep.
    const std::int64_t resume = nanoseconds(CLOCK_MONOTONIC) + kWakeGapNs;
    while (nanoseconds(CLOCK_MONOTONIC) < resume) {
    }
    const std::int64_t start = nanoseconds(CLOCK_MONOTONIC);
#pragma omp parallel num_threads(threads)
    { std::atomic_signal_fence(std::memory_order_seq_cst); }
    const std::int64_t took = nanoseconds(CLOCK_MONOTONIC) - start;
    if (i >= kWakeWarmUp) samples[static_cast<std::size_t>(taken++)] = took;
    if (taken >= 3 && nanoseconds(CLOCK_MONOTONIC) > deadline) break;  // a loaded machine: enough
  }
  const auto end = samples.begin() + std::max(taken, 1);
  const auto middle = samples.begin() + (end - samples.begin()) / 2;
  std::nth_element(samples.begin(), middle, end);
  return std::clamp(1e-3 * static_cast<double>(*middle), kMinWakeUs, kMaxWakeUs);
}

WakeCost parallel_wake_cost() noexcept {
  update_wake_cost();
  WakeCost c;
  const std::int64_t ns = g_wake_ns.load(std::memory_order_acquire);
  if (ns != 0) c.wake_us = 1e-3 * static_cast<double>(ns);
  c.threads = g_wake_threads.load(std::memory_order_relaxed);
  c.pinned = g_pinned_us.load(std::memory_order_relaxed) > 0 || wake_us_from_env() > 0;
  return c;
}

double parallel_work_scale() noexcept {
  // Known (the common case): one load and a compare. BlasThreads and
  // DnnlThreads change this thread's OpenMP count for a call, so the bound
  // is not compared here: set_thread_bound forgets a measured value.
  if (g_wake_ns.load(std::memory_order_acquire) == 0) update_wake_cost();
  return g_work_scale.load(std::memory_order_relaxed);
}

std::int64_t scaled_work(std::int64_t reference) noexcept {
  const double scaled = static_cast<double>(reference) * parallel_work_scale();
  return std::llround(std::clamp(scaled, 1.0, 9e18));
}

void set_parallel_wake_us(double us) noexcept {
  const std::lock_guard lock(g_wake_mutex);
  const double pinned = us > 0 ? std::clamp(us, kMinWakeUs, 10000.0) : 0.0;
  g_pinned_us.store(pinned, std::memory_order_relaxed);
  if (pinned > 0)
    store_wake(pinned, 0);
  else {
    g_work_scale.store(1.0, std::memory_order_relaxed);  // the reference until the next decision measures
    g_wake_ns.store(0, std::memory_order_release);
  }
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

BlasThreads::BlasThreads(int threads) {
  if (omp_in_parallel()) return;
  bound_ = thread_bound();
  threads = std::clamp(threads, 1, bound_);
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

void set_thread_bound(int threads) {
  // A measured wake cost belongs to the old bound: forgotten, the next
  // decision measures again (a pinned one stays).
  if (threads != g_wake_threads.load(std::memory_order_relaxed) && g_pinned_us.load(std::memory_order_relaxed) <= 0 &&
      wake_us_from_env() <= 0)
    g_wake_ns.store(0, std::memory_order_release);
  // Every thread adopts the new count at its next decision (thread_bound).
  const std::uint64_t generation = (g_bound_word.load(std::memory_order_relaxed) >> 32) + 1;
  const std::uint64_t word = generation << 32 | static_cast<std::uint32_t>(threads);
  g_bound_word.store(word, std::memory_order_release);
  t_bound_word = word;
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
  s.gemm_single = g_gemm_single.load(std::memory_order_relaxed);
  s.gemm_threaded = g_gemm_threaded.load(std::memory_order_relaxed);
  s.conv_single = g_conv_single.load(std::memory_order_relaxed);
  s.conv_threaded = g_conv_threaded.load(std::memory_order_relaxed);
  s.reorder_single = g_reorder_single.load(std::memory_order_relaxed);
  s.reorder_threaded = g_reorder_threaded.load(std::memory_order_relaxed);
  s.gemm_small = g_gemm_small.load(std::memory_order_relaxed);
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
}

void record_small_gemm() noexcept { g_gemm_small.fetch_add(1, std::memory_order_relaxed); }

void record_gemm_call(int threads) noexcept { count_call(threads, g_gemm_single, g_gemm_threaded); }

void record_parallel_region(int threads) noexcept {
  g_regions.fetch_add(1, std::memory_order_relaxed);
  g_region_threads.fetch_add(static_cast<std::uint64_t>(threads), std::memory_order_relaxed);
}

void record_conv_call(int threads) noexcept { count_call(threads, g_conv_single, g_conv_threaded); }

void record_reorder_call(int threads) noexcept { count_call(threads, g_reorder_single, g_reorder_threaded); }

}  // namespace anvil::cpu_backend

namespace anvil {

ParallelCosts parallel_costs() {
  using namespace cpu_backend;
  const WakeCost w = parallel_wake_cost();
  ParallelCosts c;
  c.wake_us = w.wake_us;
  c.threads = w.threads;
  c.fixed = w.pinned;
  c.grain = scaled_work(kParallelGrain);
  c.grain_vector_math = scaled_work(kParallelGrainVectorMath);
  c.grain_libm = scaled_work(kParallelGrainLibm);
  c.gemm_macs_per_thread = scaled_work(kGemmWorkPerThread);
  return c;
}

}  // namespace anvil
