// Note [Passive OpenMP waiting]
// libgomp reads OMP_WAIT_POLICY once, in its own constructor. By default its
// idle workers spin for a long while; when the machine is busy (another
// process, or ctest running two programs on two cores) a spinning worker
// holds a core that the thread with work needs, and a 0.6 s training epoch
// took 14 s. Passive waiting costs a futex wake per parallel region
// (microseconds) and never degrades that way, so it is anvil's default.
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
