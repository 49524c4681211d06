// python/src/module.cpp — the extension anvil._anvil: one module, each area
// bound by its own file (python/anvil/__init__.py arranges the names).
#include "common.h"

NB_MODULE(_anvil, m) {
  m.doc() = "anvil's C++ library, bound by nanobind (docs/python.md)";
  using namespace anvil::python;
  bind_errors(m);
  bind_device(m);
  bind_tensor(m);
  bind_array_api(m);
  bind_indexing(m);
  bind_math_ops(m);
  bind_autograd(m);
  bind_nn(m);
  bind_optim(m);
  bind_data(m);
  bind_io(m);
  bind_amp(m);
  bind_ledger(m);
  bind_dist(m);
  bind_profiler(m);
}
