// The CPU's per-element ops: src/kernels/scalar.h, the one definition the
// devices compile too, built as C++ through src/kernels/prelude_cpp.h.
//
//   using namespace anvil::cpu_backend::scalar;
//   float y = anvil_exp(x);  std::int32_t s = anvil_add(a, b);  int lt = anvil_lt(a, b);
//
// One overload per compute type: float, double, std::int32_t, std::int64_t,
// std::uint8_t (bool computes as std::uint8_t 0/1, as on the devices).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "backends/cpu/isa.h"

// In this build's namespace (Note [One kernel source, a build per
// instruction set]): isa_avx512::scalar::anvil_exp is not isa_avx2's.
namespace anvil::cpu_backend {
inline namespace ANVIL_CPU_ISA {
namespace scalar {
#include "kernels/prelude_cpp.h"
#include "kernels/scalar.h"
}  // namespace scalar
}  // namespace ANVIL_CPU_ISA
}  // namespace anvil::cpu_backend

// The vocabulary is spent once the functions exist; keep it out of C++ code.
#undef ANVIL_FN
#undef ANVIL_HAS_FP64
#undef ANVIL_SCALAR_NAME
#undef ANVIL_SCALAR_FN
#undef ANVIL_SCALAR_COMMON
#undef ANVIL_SCALAR_RELU
#undef ANVIL_SCALAR_CLAMP
#undef ANVIL_SCALAR_ACTIVATION_BACKWARD
#undef ANVIL_SCALAR_FLOAT
#undef ANVIL_SCALAR_INT
#undef ANVIL_SCALAR_SIGNED
#undef ANVIL_SCALAR_UNSIGNED
