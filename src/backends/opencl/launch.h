// Setting a kernel's arguments and enqueueing it (the caller holds the
// device's lock; see DeviceState::mutex).
#pragma once

#include <cstddef>
#include <cstdint>

#include "backends/common/kernel_specs.h"
#include "backends/opencl/runtime.h"

namespace anvil::opencl {

class Launch {
 public:
  Launch(DeviceState& s, cl_kernel k) noexcept : s_(s), k_(k) {}
  template <typename T>
  Launch& arg(const T& value) {
    return bytes(&value, sizeof(T));
  }
  Launch& buffer(const void* handle);  // a cl_mem, or null for an unused pointer argument
  Launch& scalar(const kernels::ScalarArg& a) { return bytes(a.bytes, a.size); }
  Launch& bytes(const void* p, std::size_t n);
  // 1-D over n work-items in groups of the device's local size.
  void run(std::int64_t n, const char* op);
  void run(cl_uint dims, const std::size_t* global, const std::size_t* local, const char* op);

 private:
  DeviceState& s_;
  cl_kernel k_;
  cl_uint next_ = 0;
};

}  // namespace anvil::opencl
