// Note [Passive OpenMP waiting]
// libgomp reads OMP_WAIT_POLICY once, in its own constructor, and by default
// its idle workers spin. On a busy machine (another process, or ctest running
// two programs on two cores) a spinning worker holds the core that the thread
// with work needs: a 0.6 s training epoch took 14 s. Passive waiting costs a
// futex wake per parallel region and never degrades that way, so it is
// anvil's default; spinning (GOMP_SPINCOUNT) is faster on a quiet machine and
// stays the user's choice (README; the measurements are in docs/measurements.md).
// This file is its own tiny shared library, listed after libgomp, OpenBLAS
// and oneDNN among libanvil's dependencies: the loader initialises unrelated
// libraries in reverse order, so it runs before libgomp. A value the user set
// (OMP_WAIT_POLICY or GOMP_SPINCOUNT) is left alone.
#include "backends/cpu/openmp_defaults.h"

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

bool anvil_openmp_wait_policy_defaulted() { return g_defaulted; }
