#include "backends/opencl/launch.h"

namespace anvil::opencl {

Launch& Launch::bytes(const void* p, std::size_t n) {
  ANVIL_CL_CHECK(s_.label(), clSetKernelArg(k_, next_++, n, p));
  return *this;
}

Launch& Launch::buffer(const void* handle) {
  cl_mem m = static_cast<cl_mem>(const_cast<void*>(handle));
  return bytes(&m, sizeof m);
}

void Launch::run(std::int64_t n, const char* op) {
  if (n <= 0) return;
  const std::size_t local = s_.local_size();
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

void Launch::run(cl_uint dims, const std::size_t* global, const std::size_t* local, const char* op) {
  cl_event ev = nullptr;
  ANVIL_CL_CHECK(s_.label(), clEnqueueNDRangeKernel(s_.queue, k_, dims, nullptr, global, local, 0, nullptr, &ev));
  s_.track_locked(ev, op);
}

}  // namespace anvil::opencl
