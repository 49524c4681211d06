// A switch over dtypes for CPU kernels: ANVIL_DISPATCH(dtype, T, body) runs `body`
// with T bound to the C++ type of `dtype`.
#pragma once

#include <cstdint>
#include <type_traits>

#include "anvil/dtype.h"
#include "anvil/error.h"
#include "backends/cpu/isa.h"
#include "core/half.h"

namespace anvil::cpu_backend {
inline namespace ANVIL_CPU_ISA {

template <DType D>
struct cpp_type;
template <>
struct cpp_type<DType::Bool> {
  using type = bool;
};
template <>
struct cpp_type<DType::U8> {
  using type = std::uint8_t;
};
template <>
struct cpp_type<DType::I32> {
  using type = std::int32_t;
};
template <>
struct cpp_type<DType::I64> {
  using type = std::int64_t;
};
template <>
struct cpp_type<DType::F32> {
  using type = float;
};
template <>
struct cpp_type<DType::F64> {
  using type = double;
};
// The 16-bit floats are held as their bits and computed in float
// (compute_t in cpu_elementwise.cpp, the f32 accumulators of reductions).
template <>
struct cpp_type<DType::F16> {
  using type = detail::Half;
};
template <>
struct cpp_type<DType::BF16> {
  using type = detail::BFloat16;
};

// The dtype a CPU kernel's C++ type stands for (dtype_v for the 16-bit floats too).
template <typename T>
constexpr DType cpu_dtype() noexcept {
  if constexpr (std::is_same_v<T, detail::Half>)
    return DType::F16;
  else if constexpr (std::is_same_v<T, detail::BFloat16>)
    return DType::BF16;
  else
    return dtype_v<T>;
}

// A C++ scalar as T: Scalar::to<T> knows the fundamental types only.
template <typename T>
T scalar_to(const Scalar& s) noexcept {
  if constexpr (detail::is_half_v<T>)
    return T(s.to<float>());
  else
    return s.to<T>();
}

}  // namespace ANVIL_CPU_ISA
}  // namespace anvil::cpu_backend

#define ANVIL_DISPATCH_CASE(D, T, ...)                          \
  case D: {                                                     \
    using T = typename ::anvil::cpu_backend::cpp_type<D>::type; \
    __VA_ARGS__;                                                \
    break;                                                      \
  }

#define ANVIL_DISPATCH(dtype, T, ...)                         \
  switch (dtype) {                                            \
    ANVIL_DISPATCH_CASE(::anvil::DType::Bool, T, __VA_ARGS__) \
    ANVIL_DISPATCH_CASE(::anvil::DType::U8, T, __VA_ARGS__)   \
    ANVIL_DISPATCH_CASE(::anvil::DType::I32, T, __VA_ARGS__)  \
    ANVIL_DISPATCH_CASE(::anvil::DType::I64, T, __VA_ARGS__)  \
    ANVIL_DISPATCH_CASE(::anvil::DType::F32, T, __VA_ARGS__)  \
    ANVIL_DISPATCH_CASE(::anvil::DType::F64, T, __VA_ARGS__)  \
    ANVIL_DISPATCH_CASE(::anvil::DType::F16, T, __VA_ARGS__)  \
    ANVIL_DISPATCH_CASE(::anvil::DType::BF16, T, __VA_ARGS__) \
  }

#define ANVIL_DISPATCH_FLOAT(dtype, T, ...)                   \
  switch (dtype) {                                            \
    ANVIL_DISPATCH_CASE(::anvil::DType::F32, T, __VA_ARGS__)  \
    ANVIL_DISPATCH_CASE(::anvil::DType::F64, T, __VA_ARGS__)  \
    ANVIL_DISPATCH_CASE(::anvil::DType::F16, T, __VA_ARGS__)  \
    ANVIL_DISPATCH_CASE(::anvil::DType::BF16, T, __VA_ARGS__) \
    default:                                                  \
      ANVIL_ASSERT(false, "float dtype expected");            \
  }
