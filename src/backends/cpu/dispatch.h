// Dtype dispatch for CPU kernels: ANVIL_DISPATCH(dtype, T, body) runs `body`
// with T bound to the C++ type of `dtype`.
#pragma once

#include <cstdint>

#include "anvil/dtype.h"
#include "anvil/error.h"

namespace anvil::cpu_backend {

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
  }

#define ANVIL_DISPATCH_FLOAT(dtype, T, ...)                  \
  switch (dtype) {                                           \
    ANVIL_DISPATCH_CASE(::anvil::DType::F32, T, __VA_ARGS__) \
    ANVIL_DISPATCH_CASE(::anvil::DType::F64, T, __VA_ARGS__) \
    default:                                                 \
      ANVIL_ASSERT(false, "float dtype expected");           \
  }
