// Dtype dispatch for host-side code in the frontend (building a tensor from
// C++ values, printing, reading back): binds T to the C++ type of a dtype.
#pragma once

#include <cstdint>

#include "anvil/dtype.h"

#define ANVIL_HOST_CASE(D, CT, T, ...) \
  case D: {                            \
    using T = CT;                      \
    __VA_ARGS__;                       \
    break;                             \
  }

#define ANVIL_DISPATCH_HOST(dtype, T, ...)                             \
  switch (dtype) {                                                     \
    ANVIL_HOST_CASE(::anvil::DType::Bool, bool, T, __VA_ARGS__)        \
    ANVIL_HOST_CASE(::anvil::DType::U8, std::uint8_t, T, __VA_ARGS__)  \
    ANVIL_HOST_CASE(::anvil::DType::I32, std::int32_t, T, __VA_ARGS__) \
    ANVIL_HOST_CASE(::anvil::DType::I64, std::int64_t, T, __VA_ARGS__) \
    ANVIL_HOST_CASE(::anvil::DType::F32, float, T, __VA_ARGS__)        \
    ANVIL_HOST_CASE(::anvil::DType::F64, double, T, __VA_ARGS__)       \
  }
