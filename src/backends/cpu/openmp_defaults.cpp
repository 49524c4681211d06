// Note [Bounded OpenMP spinning]
// libgomp reads its wait policy once, at load. Sleeping at once (passive)
// costs a futex wake per parallel region (17-38 us at 2-16 threads); spinning
// without bound holds the cores other processes need (a 0.6 s epoch took 14
// s). So where other processes' runnable threads are fewer than half the
// CPUs this process may use, and there are no more threads than those CPUs,
// workers spin kSpinMicroseconds (GOMP_SPINCOUNT from the pause's measured
// cost), then sleep; otherwise they sleep at once. Runnable threads now: the
// load average trails by a minute, and a run started after another slept
// (an LSTM 49k against 130k tokens/s). The user's OMP_WAIT_POLICY or
// GOMP_SPINCOUNT stands. Its own library, so the loader runs it before
// libgomp (reverse order of libanvil's dependencies). docs/threads.md.
#include "backends/cpu/openmp_defaults.h"

#include <sched.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>

namespace {

// Long enough to bridge the host's work between two regions of a training
// step, short enough that an unlucky start beside another process loses
// little.
constexpr double kSpinMicroseconds = 200;

AnvilOpenmpWaitPolicy g_policy{};

void pause_once() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// Nanoseconds of one pause, the unit of libgomp's spin loop.
double pause_ns() {
  constexpr int kPauses = 512;
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < kPauses; ++i) pause_once();
  const double ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count();
  return ns / kPauses > 0.5 ? ns / kPauses : 0.5;
}

int allowed_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return 1;
  return CPU_COUNT(&set) > 0 ? CPU_COUNT(&set) : 1;
}

// Other processes' threads runnable now (/proc/loadavg's running count, all
// CPUs, this thread included); where some are, the least of a few reads
// 0.5 ms apart, so a passing daemon does not count. -1 when unreadable.
int others_runnable() {
  constexpr int kReads = 5;
  int least = -1;
  for (int i = 0; i < kReads && least != 0; ++i) {
    if (i > 0) {
      const timespec half_ms{0, 500'000};
      nanosleep(&half_ms, nullptr);
    }
    int running = 0;
    FILE* f = std::fopen("/proc/loadavg", "r");
    if (f == nullptr) return least;
    const int read = std::fscanf(f, "%*f %*f %*f %d/", &running);  // "0.21 0.30 0.35 2/79 1234"
    std::fclose(f);
    if (read != 1 || running < 1) return least;
    least = least < 0 ? running - 1 : std::min(least, running - 1);
  }
  return least;
}

}  // namespace

AnvilOpenmpWaitPolicy anvil_openmp_decide(const char* user_policy, const char* user_spin, const char* omp_threads,
                                          int cpus, int others_runnable, double pause_ns) {
  AnvilOpenmpWaitPolicy p{};
  if (user_policy != nullptr || user_spin != nullptr) {
    std::snprintf(p.policy, sizeof p.policy, "yours");
    std::snprintf(p.reason, sizeof p.reason, "%s%s%s%s%s", user_policy ? "OMP_WAIT_POLICY=" : "",
                  user_policy ? user_policy : "", user_policy && user_spin ? " " : "",
                  user_spin ? "GOMP_SPINCOUNT=" : "", user_spin ? user_spin : "");
    return p;
  }
  p.defaulted = true;
  const int threads = omp_threads != nullptr && std::atoi(omp_threads) > 0 ? std::atoi(omp_threads) : cpus;
  if (threads > cpus) {
    std::snprintf(p.reason, sizeof p.reason, "%d threads on %d CPUs", threads, cpus);
  } else if (others_runnable < 0) {
    std::snprintf(p.reason, sizeof p.reason, "no /proc/loadavg");
  } else if (2 * others_runnable >= cpus) {
    std::snprintf(p.reason, sizeof p.reason, "busy: %d other runnable threads on %d CPUs", others_runnable, cpus);
  } else {
    p.spin_count = static_cast<long>(kSpinMicroseconds * 1000 / pause_ns);
    std::snprintf(p.reason, sizeof p.reason, "quiet: %d other runnable threads on %d CPUs", others_runnable, cpus);
  }
  if (p.spin_count > 0)
    std::snprintf(p.policy, sizeof p.policy, "spin %.0f us", kSpinMicroseconds);
  else
    std::snprintf(p.policy, sizeof p.policy, "passive");
  return p;
}

namespace {

__attribute__((constructor)) void set_openmp_defaults() {
  const char* user_policy = std::getenv("OMP_WAIT_POLICY");
  const char* user_spin = std::getenv("GOMP_SPINCOUNT");
  const bool yours = user_policy != nullptr || user_spin != nullptr;
  const int others = yours ? 0 : others_runnable();
  g_policy = anvil_openmp_decide(user_policy, user_spin, std::getenv("OMP_NUM_THREADS"), allowed_cpus(), others,
                                 yours ? 1.0 : pause_ns());
  if (!g_policy.defaulted) return;
  if (g_policy.spin_count > 0) {
    char count[32];
    std::snprintf(count, sizeof count, "%ld", g_policy.spin_count);
    setenv("GOMP_SPINCOUNT", count, 0);
  } else {
    setenv("OMP_WAIT_POLICY", "passive", 0);
  }
}

}  // namespace

AnvilOpenmpWaitPolicy anvil_openmp_wait_policy() { return g_policy; }
