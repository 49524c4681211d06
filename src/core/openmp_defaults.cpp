// Note [Passive OpenMP waiting]
// libgomp reads OMP_WAIT_POLICY once, in its own constructor. By default its
// idle workers spin for a long while; when the machine is busy (another
// process, or ctest running two programs on two cores) a spinning worker
// holds a core that the thread with work needs, and a 0.6 s training epoch
// took 14 s. Passive waiting costs a futex wake per parallel region
// (microseconds) and never degrades that way, so it is anvil's default.
// The wake can cost more than that in a VM, whose idle vCPU halts: on the
// 2-core KVM guest (haltpoll cpuidle), 200 products of 256x784 by 784x256
// took 0.054 s back to back and 0.078 s after 300 ms idle, against 0.043 s
// with GOMP_SPINCOUNT=1000 (workers spin tens of microseconds first). In
// training that made MLP epochs 22% and LeNet's 6% faster alone (quiet, one
// run); beside two spinning processes LeNet's epoch was 10% slower in one
// run and 9% faster in another. Spinning is what stalled a busy machine
// above, so it stays the user's choice (README, environment variables).
// Issue 31 asked again: on the 16-core Xeon host GOMP_SPINCOUNT=100000 took
// LeNet's 16-thread epoch from 0.82 to 0.72 s (8 threads: 0.75 to 0.65),
// the MLP's from 0.09 to 0.08 s; on the 2-core machine with builds running,
// spinning workers made a wake cost 100 µs or more (anvil-smi, clamped)
// against 4.7 µs passive. libgomp fixes the policy before anvil can see the
// load, so the default stays passive; what a wake costs now sets the team
// sizes instead (Note [Threads from the measured wake cost]).
//
// This file is its own tiny shared library, listed after libgomp and
// OpenBLAS among libanvil's dependencies: the dynamic loader initialises
// unrelated libraries in reverse order, so it runs before libgomp and the
// default is in place when libgomp reads it. A value the user set
// (OMP_WAIT_POLICY or GOMP_SPINCOUNT) is left alone.
#include <cstdlib>

namespace {
bool g_defaulted = false;

__attribute__((constructor)) void set_openmp_defaults() {
  if (std::getenv("OMP_WAIT_POLICY") == nullptr && std::getenv("GOMP_SPINCOUNT") == nullptr) {
    setenv("OMP_WAIT_POLICY", "passive", 0);
    g_defaulted = true;
  }
}
}  // namespace

// Whether anvil chose the wait policy (true) or the user did (false).
extern "C" __attribute__((visibility("default"))) bool anvil_openmp_wait_policy_defaulted() { return g_defaulted; }
