// Philox fills, from the same source as every device (src/kernels/philox.h).
// This file is compiled with -ffp-contract=off: see Note [Bit-identical
// random numbers].
#include <cmath>
#include <cstdint>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/dtype_switch.h"
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
  count({0, detail::dense_bytes(a.out, a.numel)});
  ANVIL_DISPATCH(a.out.dtype, T, {
    T* out = static_cast<T*>(a.out.data) + a.out.offset;
    const std::uint64_t seed = a.seed, offset = a.offset;
    // One Philox block serves 4 uniforms (2 normals): compute it once per
    // block, not once per element.
    parallel_for(a.numel, 4096, [&](std::int64_t b, std::int64_t e) {
      std::uint32_t lanes[4];
      std::uint64_t block = ~std::uint64_t{0};
      const bool normal = a.kind == detail::RandomKind::Normal;
      for (std::int64_t i = b; i < e; ++i) {
        const auto u = static_cast<std::uint64_t>(i);
        const std::uint64_t ctr = offset + (normal ? u >> 1 : u >> 2);
        if (ctr != block) {
          philox::anvil_philox4(ctr, seed, lanes);
          block = ctr;
        }
        switch (a.kind) {
          case detail::RandomKind::Uniform:
            out[i] = static_cast<T>(philox::anvil_u32_to_unit(lanes[u & 3]));
            break;
          case detail::RandomKind::Normal:
            out[i] = static_cast<T>(philox::anvil_normal_from(lanes[0], lanes[1], static_cast<int>(u & 1)));
            break;
          case detail::RandomKind::Randint:
            out[i] = static_cast<T>(
                philox::anvil_randint_from(lanes, u, static_cast<std::int64_t>(a.a), static_cast<std::int64_t>(a.b)));
            break;
        }
      }
    });
  });
}

}  // namespace anvil::cpu_backend
