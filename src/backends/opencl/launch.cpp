#include "backends/opencl/launch.h"

namespace anvil::opencl {

Launch& Launch::bytes(const void* p, std::size_t n) {
  ANVIL_CL_CHECK(q_.label(), clSetKernelArg(k_, next_++, n, p));
  return *this;
}

Launch& Launch::buffer(const void* handle) {
  cl_mem m = static_cast<cl_mem>(const_cast<void*>(handle));
  return bytes(&m, sizeof m);
}

void Launch::run(std::int64_t n, const char* op) {
  if (n <= 0) return;
  const std::size_t local = q_.local_size();
  // Small launches: one group sized to the work, so PoCL does not run 1000
  // idle work-items for a 3-element op.
  std::size_t group = local;
  if (static_cast<std::size_t>(n) < local) {
    group = 1;
    while (group < static_cast<std::size_t>(n)) group <<= 1;
  }
  const std::size_t global = (static_cast<std::size_t>(n) + group - 1) / group * group;
  run(1, &global, &group, op);
}

namespace {

// PoCL's grid_width_specialization_limit (USHRT_MAX on its CPU devices): a
// grid narrower than this in every dimension gets its own compiled function.
constexpr std::size_t kSmallGridLimit = 65535;

FirstRuns::RunShape run_shape(cl_kernel k, cl_uint dims, const std::size_t* global, const std::size_t* local) {
  FirstRuns::RunShape shape{k, dims, {0, 0, 0}, true};
  for (cl_uint i = 0; i < dims && i < 3; ++i) {
    // Without a local size the driver picks one from the global size.
    shape.local[i] = local != nullptr ? local[i] : global[i];
    const std::size_t groups = local != nullptr && local[i] != 0 ? (global[i] + local[i] - 1) / local[i] : global[i];
    if (groups >= kSmallGridLimit) shape.small_grid = false;
  }
  return shape;
}

}  // namespace

void Launch::run(cl_uint dims, const std::size_t* global, const std::size_t* local, const char* op) {
  cl_event ev = nullptr;
  if (q_.first_runs.wait()) {
    // See Note [A kernel's first run waits on CPU devices] in launch.h.
    const FirstRuns::RunShape shape = run_shape(k_, dims, global, local);
    if (!q_.first_runs.has_run(shape)) [[unlikely]] {
      ANVIL_CL_CHECK(q_.label(), clEnqueueNDRangeKernel(q_.handle, k_, dims, nullptr, global, local, 0, nullptr, &ev));
      // A failure raises nothing here: the next wait reports it at the next
      // sync, naming the op, as for every command. A command that did not
      // run compiled nothing, so the next launch of this shape waits again.
      if (clWaitForEvents(1, &ev) == CL_SUCCESS) q_.first_runs.note_run(shape);
      q_.track(ev, op);
      return;
    }
  }
  ANVIL_CL_CHECK(q_.label(), clEnqueueNDRangeKernel(q_.handle, k_, dims, nullptr, global, local, 0, nullptr, &ev));
  q_.track(ev, op);
}

}  // namespace anvil::opencl
