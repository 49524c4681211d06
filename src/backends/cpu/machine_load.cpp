// See Note [Fewer threads on a busy machine] in machine_load.h.
#include "backends/cpu/machine_load.h"

#include <fcntl.h>
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <mutex>
#include <utility>

#include "backends/cpu/threads.h"

namespace anvil::cpu_backend {

namespace {

// Note [Fewer threads on a busy machine]: the load sample.
constexpr std::int64_t kLoadWindowNs = 100'000'000;
// A pause this long between two asks for threads ends the window.
constexpr std::int64_t kIdleGapNs = kLoadWindowNs;

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

}  // namespace

int threads_for_load(int max_threads, int cores, double others_busy) noexcept {
  max_threads = std::max(max_threads, 1);
  // Also NaN, and tick rounding that puts others below zero.
  if (!(others_busy >= 0.5)) return max_threads;
  const double idle = std::max(static_cast<double>(cores) - others_busy, 0.0);
  return std::clamp(static_cast<int>(std::lround(idle)), 1, max_threads);
}

void set_load_bound(bool enabled) noexcept { g_load_bound.store(enabled, std::memory_order_relaxed); }

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

}  // namespace anvil::cpu_backend
