// Dtype dispatch for host-side code in the frontend (building a tensor from
// C++ values, printing, reading back): binds T to the C++ type of a dtype.
#pragma once

#include <cstdint>

#include "anvil/dtype.h"
#include "core/half.h"

#define ANVIL_HOST_CASE(D, CT, T, ...) \
  case D: {                            \
    using T = CT;                      \
    __VA_ARGS__;                       \
    break;                             \
  }

#define ANVIL_DISPATCH_HOST(dtype, T, ...)                                           \
  switch (dtype) {                                                                   \
    ANVIL_HOST_CASE(::anvil::DType::Bool, bool, T, __VA_ARGS__)                      \
    ANVIL_HOST_CASE(::anvil::DType::U8, std::uint8_t, T, __VA_ARGS__)                \
    ANVIL_HOST_CASE(::anvil::DType::I32, std::int32_t, T, __VA_ARGS__)               \
    ANVIL_HOST_CASE(::anvil::DType::I64, std::int64_t, T, __VA_ARGS__)               \
    ANVIL_HOST_CASE(::anvil::DType::F32, float, T, __VA_ARGS__)                      \
    ANVIL_HOST_CASE(::anvil::DType::F64, double, T, __VA_ARGS__)                     \
    ANVIL_HOST_CASE(::anvil::DType::F16, ::anvil::detail::Half, T, __VA_ARGS__)      \
    ANVIL_HOST_CASE(::anvil::DType::BF16, ::anvil::detail::BFloat16, T, __VA_ARGS__) \
  }

namespace anvil::detail {
// A host value as a Scalar can hold it (a 16-bit float as float), and back.
template <typename T>
auto host_value(T v) noexcept {
  if constexpr (is_half_v<T>)
    return static_cast<float>(v);
  else
    return v;
}
template <typename T>
T host_from_scalar(const Scalar& s) noexcept {
  if constexpr (is_half_v<T>)
    return T(s.to<float>());
  else
    return s.to<T>();
}
}  // namespace anvil::detail
