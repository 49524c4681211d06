// Philox fills, from the same source as every device (src/kernels/philox.h).
// This file is compiled with -ffp-contract=off: see Note [Bit-identical
// random numbers].
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>

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

namespace {

// Elements [b, e) one at a time. One Philox block serves 4 uniforms (2
// normals): it is computed once per block, not once per element.
template <class T>
void fill_scalar(T* out, std::int64_t b, std::int64_t e, const detail::RandomArgs& a) {
  const std::uint64_t seed = a.seed, offset = a.offset;
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
      case detail::RandomKind::KeepMask:
        out[i] = static_cast<T>(philox::anvil_u32_to_unit(lanes[u & 3]) >= a.a ? a.b : 0.0);
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
}

// Uniforms (or dropout masks) of whole Philox blocks [first, last): four
// outputs per block, without fill_scalar's per-element test and switch,
// which cost 2.65 ns an element against 1.02 here (rand of 147k floats, one
// thread; dropout's rand was 12% of a ViT step). The same Philox and
// conversion, so the same bits.
template <bool kMask, class T>
void uniform_blocks(T* out, std::uint64_t first, std::uint64_t last, const detail::RandomArgs& a) {
  const std::uint64_t seed = a.seed, offset = a.offset;
  // u = m / 2^24 with m the lane's top 24 bits, so u >= p exactly when m >= ceil(p 2^24).
  const double scaled = std::ceil(std::clamp(a.a, 0.0, 1.0) * 16777216.0);
  const auto threshold = static_cast<std::uint32_t>(scaled);
  const T keep = static_cast<T>(a.b), drop = static_cast<T>(0.0);
  for (std::uint64_t block = first; block < last; ++block) {
    std::uint32_t lanes[4];
    philox::anvil_philox4(offset + block, seed, lanes);
    T* o = out + 4 * block;
    for (int k = 0; k < 4; ++k) {
      if constexpr (kMask) {
        o[k] = (lanes[k] >> 8) >= threshold ? keep : drop;
      } else if constexpr (std::is_same_v<T, float>) {
        // 24 bits times 2^-24: exact in float, the value anvil_u32_to_unit gives.
        o[k] = static_cast<float>(lanes[k] >> 8) * (1.0f / 16777216.0f);
      } else {
        o[k] = static_cast<T>(philox::anvil_u32_to_unit(lanes[k]));
      }
    }
  }
}

}  // namespace

void CpuBackend::random(int, const detail::RandomArgs& a) {
  count({0, detail::dense_bytes(a.out, a.numel)});
  ANVIL_DISPATCH(a.out.dtype, T, {
    T* out = static_cast<T*>(a.out.data) + a.out.offset;
    parallel_for(a.numel, 4096, [&](std::int64_t b, std::int64_t e) {
      if (a.kind != detail::RandomKind::Uniform && a.kind != detail::RandomKind::KeepMask)
        return fill_scalar(out, b, e, a);
      // Whole blocks at once, the elements of a block split between two
      // threads' chunks one by one.
      const std::int64_t first = std::min(e, (b + 3) / 4 * 4), last = first + (e - first) / 4 * 4;
      const auto block_first = static_cast<std::uint64_t>(first / 4), block_last = static_cast<std::uint64_t>(last / 4);
      fill_scalar(out, b, first, a);
      if (a.kind == detail::RandomKind::KeepMask)
        uniform_blocks<true>(out, block_first, block_last, a);
      else
        uniform_blocks<false>(out, block_first, block_last, a);
      fill_scalar(out, last, e, a);
    });
  });
}

}  // namespace anvil::cpu_backend
