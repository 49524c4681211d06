// The OpenMP defaults anvil sets before libgomp starts (Note [Passive OpenMP
// waiting] in openmp_defaults.cpp), from their own small library
// (libanvil_openmp_defaults), which libanvil links.
#pragma once

// Whether anvil chose the wait policy (true) or the user did (false).
extern "C" __attribute__((visibility("default"))) bool anvil_openmp_wait_policy_defaulted();
