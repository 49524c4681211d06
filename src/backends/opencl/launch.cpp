#include "backends/opencl/launch.h"

#include <cmath>
#include <cstring>
#include <limits>

namespace anvil::opencl {

const char* cl_type(DType t) noexcept {
  switch (t) {
    case DType::Bool:
    case DType::U8: return "uchar";
    case DType::I32: return "int";
    case DType::I64: return "long";
    case DType::F32: return "float";
    case DType::F64: return "double";
  }
  return "?";
}

namespace {
template <typename T>
ScalarArg pack(T v) noexcept {
  ScalarArg a;
  std::memcpy(a.bytes, &v, sizeof v);
  a.size = sizeof v;
  return a;
}

template <typename T>
T saturate(double v) noexcept {
  if (std::isnan(v)) return T{0};
  if (v <= static_cast<double>(std::numeric_limits<T>::lowest())) return std::numeric_limits<T>::lowest();
  if (v >= static_cast<double>(std::numeric_limits<T>::max())) return std::numeric_limits<T>::max();
  return static_cast<T>(v);
}
}  // namespace

ScalarArg scalar_arg(const Scalar& s, DType t) noexcept {
  switch (t) {
    case DType::Bool: return pack<std::uint8_t>(s.to<bool>() ? 1 : 0);
    case DType::U8: return pack<std::uint8_t>(s.to<std::uint8_t>());
    case DType::I32: return pack<std::int32_t>(s.to<std::int32_t>());
    case DType::I64: return pack<std::int64_t>(s.to<std::int64_t>());
    case DType::F32: return pack<float>(s.to<float>());
    case DType::F64: return pack<double>(s.to<double>());
  }
  return {};
}

ScalarArg scalar_arg(double v, DType t) noexcept {
  switch (t) {
    case DType::Bool: return pack<std::uint8_t>(v != 0.0 ? 1 : 0);
    case DType::U8: return pack<std::uint8_t>(saturate<std::uint8_t>(v));
    case DType::I32: return pack<std::int32_t>(saturate<std::int32_t>(v));
    case DType::I64: return pack<std::int64_t>(saturate<std::int64_t>(v));
    case DType::F32: return pack<float>(static_cast<float>(v));
    case DType::F64: return pack<double>(v);
  }
  return {};
}

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
