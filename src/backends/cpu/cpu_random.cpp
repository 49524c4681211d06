// Philox fills, from the same source as every device (src/kernels/philox.h).
// This file is compiled with -ffp-contract=off: see Note [Bit-identical
// random numbers].
#include <cmath>
#include <cstdint>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/dispatch.h"
#include "backends/cpu/parallel.h"

namespace anvil::cpu_backend {
namespace philox {
#define ANVIL_FN inline
#define ANVIL_SQRT_F64(x) std::sqrt(x)
using anvil_u32 = std::uint32_t;
using anvil_u64 = std::uint64_t;
using anvil_i64 = std::int64_t;
#include "kernels/philox.h"
#undef ANVIL_FN
#undef ANVIL_SQRT_F64
}  // namespace philox

void CpuBackend::random(int, const detail::RandomArgs& a) {
  ANVIL_DISPATCH(a.out.dtype, T, {
    T* out = static_cast<T*>(a.out.data) + a.out.offset;
    const std::uint64_t seed = a.seed, offset = a.offset;
    parallel_for(a.numel, 4096, [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t i = b; i < e; ++i) {
        const auto u = static_cast<std::uint64_t>(i);
        switch (a.kind) {
          case detail::RandomKind::Uniform: out[i] = static_cast<T>(philox::anvil_uniform_at(seed, offset, u)); break;
          case detail::RandomKind::Normal: out[i] = static_cast<T>(philox::anvil_normal_at(seed, offset, u)); break;
          case detail::RandomKind::Randint:
            out[i] = static_cast<T>(philox::anvil_randint_at(seed, offset, u, static_cast<std::int64_t>(a.a),
                                                             static_cast<std::int64_t>(a.b)));
            break;
        }
      }
    });
  });
}

}  // namespace anvil::cpu_backend
