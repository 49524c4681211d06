// The OpenMP defaults anvil sets before libgomp starts (Note [Bounded OpenMP
// spinning] in openmp_defaults.cpp), from their own small library
// (libanvil_openmp_defaults), which libanvil links.
#pragma once

// The wait policy libgomp was started with and why: a C struct, since the
// library exports C symbols only.
struct AnvilOpenmpWaitPolicy {
  bool defaulted;   // anvil chose it (false: the user's OMP_WAIT_POLICY or GOMP_SPINCOUNT)
  char policy[32];  // "spin 200 us", "passive" or "yours"
  long spin_count;  // the GOMP_SPINCOUNT anvil set; 0 when passive or the user's
  char reason[96];  // "quiet: 0 other runnable threads on 16 CPUs", "busy: ...", or the user's variables
};
// What libgomp was started with.
extern "C" __attribute__((visibility("default"))) AnvilOpenmpWaitPolicy anvil_openmp_wait_policy();
// The decision alone, from the user's variables (null when unset), the CPUs
// this process may use, other processes' runnable threads (-1: unknown) and
// the pause instruction's cost in ns: what the constructor applies.
extern "C" __attribute__((visibility("default"))) AnvilOpenmpWaitPolicy anvil_openmp_decide(
    const char* omp_wait_policy, const char* gomp_spincount, const char* omp_num_threads, int cpus, int others_runnable,
    double pause_ns);
