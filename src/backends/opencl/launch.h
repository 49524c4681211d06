// Setting a kernel's arguments and enqueueing it (the caller holds the
// device's lock; see DeviceState::mutex).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "anvil/dtype.h"
#include "backends/opencl/runtime.h"

namespace anvil::opencl {

// The OpenCL C type that stores `t` (bool is one byte holding 0 or 1).
const char* cl_type(DType t) noexcept;

// A C++ scalar converted to `t`, as a kernel argument.
struct ScalarArg {
  alignas(8) unsigned char bytes[8] = {};
  std::size_t size = 0;
};
ScalarArg scalar_arg(const Scalar& s, DType t) noexcept;
ScalarArg scalar_arg(double v, DType t) noexcept;  // saturating for integer types

// Note [Kernel cache keys]: family, op and up to four dtypes in 64 bits.
enum class Family : std::uint8_t { Fill, Copy, Unary, Binary, Where, Reduce, Index, Gemm, Random };
constexpr std::uint64_t kernel_key(Family f, int op, int variant, int d0 = 15, int d1 = 15, int d2 = 15,
                                   int d3 = 15) noexcept {
  return (std::uint64_t(f) << 56) | (std::uint64_t(op & 0xff) << 48) | (std::uint64_t(variant & 0xff) << 40) |
         (std::uint64_t(d0 & 0xf) << 12) | (std::uint64_t(d1 & 0xf) << 8) | (std::uint64_t(d2 & 0xf) << 4) |
         std::uint64_t(d3 & 0xf);
}
constexpr int dt(DType t) noexcept { return static_cast<int>(t); }

class Launch {
 public:
  Launch(DeviceState& s, cl_kernel k) noexcept : s_(s), k_(k) {}
  template <typename T>
  Launch& arg(const T& value) {
    return bytes(&value, sizeof(T));
  }
  Launch& buffer(const void* handle);  // a cl_mem, or null for an unused pointer argument
  Launch& scalar(const ScalarArg& a) { return bytes(a.bytes, a.size); }
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
