// A tensor's values read back to the host as float64, in logical order:
// what the device-generic suites compare against their expected numbers.
#pragma once

#include <vector>

#include "anvil/anvil.h"

namespace anvil::testing {

inline std::vector<double> host_f64(const Tensor& t) {
  const Tensor h = t.to(cpu()).to(f64).contiguous();
  const double* p = h.data_ptr<double>();
  return std::vector<double>(p, p + h.numel());
}

}  // namespace anvil::testing
