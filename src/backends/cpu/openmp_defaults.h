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
  char reason[96];  // "quiet: load 0.21 on 16 CPUs", "busy: ...", or the user's variables
};
extern "C" __attribute__((visibility("default"))) AnvilOpenmpWaitPolicy anvil_openmp_wait_policy();
