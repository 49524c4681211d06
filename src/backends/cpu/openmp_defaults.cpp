// Note [Bounded OpenMP spinning]
// libgomp reads its wait policy once, in its own constructor. Sleeping at
// once (passive) costs a futex wake per parallel region: 17-38 us at 2-16
// threads, which held LeNet to 1.8x from 1 to 16 threads. Spinning without
// bound holds the cores another process needs: on a busy machine a 0.6 s
// epoch took 14 s. So on a quiet machine (1-minute load under half the CPUs
// this process may use, and no more threads than those CPUs) workers spin
// for kSpinMicroseconds, turned into libgomp's GOMP_SPINCOUNT with the pause
// instruction's measured cost, and then sleep; otherwise they sleep at once.
// A user's OMP_WAIT_POLICY or GOMP_SPINCOUNT stands. This file is its own
// tiny library, listed after libgomp, OpenBLAS and oneDNN among libanvil's
// dependencies: the loader initialises unrelated libraries in reverse order,
// so it runs before libgomp. Measurements: docs/threads.md.
#include "backends/cpu/openmp_defaults.h"

#include <sched.h>

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

double load_average() {
  double load = -1;
  if (FILE* f = std::fopen("/proc/loadavg", "r")) {
    if (std::fscanf(f, "%lf", &load) != 1) load = -1;
    std::fclose(f);
  }
  return load;
}

__attribute__((constructor)) void set_openmp_defaults() {
  AnvilOpenmpWaitPolicy& p = g_policy;
  const char* user_policy = std::getenv("OMP_WAIT_POLICY");
  const char* user_spin = std::getenv("GOMP_SPINCOUNT");
  if (user_policy != nullptr || user_spin != nullptr) {
    std::snprintf(p.policy, sizeof p.policy, "yours");
    std::snprintf(p.reason, sizeof p.reason, "%s%s%s%s%s", user_policy ? "OMP_WAIT_POLICY=" : "",
                  user_policy ? user_policy : "", user_policy && user_spin ? " " : "",
                  user_spin ? "GOMP_SPINCOUNT=" : "", user_spin ? user_spin : "");
    return;
  }
  p.defaulted = true;
  const int cpus = allowed_cpus();
  const char* omp_threads = std::getenv("OMP_NUM_THREADS");
  const int threads = omp_threads != nullptr && std::atoi(omp_threads) > 0 ? std::atoi(omp_threads) : cpus;
  const double load = load_average();
  if (threads > cpus) {
    std::snprintf(p.reason, sizeof p.reason, "%d threads on %d CPUs", threads, cpus);
  } else if (load < 0 || load >= 0.5 * cpus) {
    std::snprintf(p.reason, sizeof p.reason, load < 0 ? "no load average" : "busy: load %.2f on %d CPUs", load, cpus);
  } else {
    p.spin_count = static_cast<long>(kSpinMicroseconds * 1000 / pause_ns());
    std::snprintf(p.reason, sizeof p.reason, "quiet: load %.2f on %d CPUs", load, cpus);
  }
  if (p.spin_count > 0) {
    char count[32];
    std::snprintf(count, sizeof count, "%ld", p.spin_count);
    setenv("GOMP_SPINCOUNT", count, 0);
    std::snprintf(p.policy, sizeof p.policy, "spin %.0f us", kSpinMicroseconds);
  } else {
    setenv("OMP_WAIT_POLICY", "passive", 0);
    std::snprintf(p.policy, sizeof p.policy, "passive");
  }
}

}  // namespace

AnvilOpenmpWaitPolicy anvil_openmp_wait_policy() { return g_policy; }
