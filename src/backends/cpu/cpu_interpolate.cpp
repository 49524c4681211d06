// interpolate and its adjoint on the CPU (core/backend.h, Note
// [Interpolation]): one task per run of (n, c) planes, the taps of each
// output row and column computed once per call by the same functions the
// devices compile (src/kernels/interpolate.h). The backward adds each output
// pixel's weights into its plane in output order, PyTorch's CPU loop; a
// plane belongs to one task, so no two threads add into one pixel. f16 and
// bf16 compute in f32 and are rounded once.
#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/dtype_switch.h"
#include "backends/cpu/parallel.h"

namespace anvil::cpu_backend {

namespace interp_taps {
// interpolate.h in C++: the vocabulary of the kernels' preludes, for it alone.
#define ANVIL_FN inline
#define ANVIL_HAS_FP64 1
#define ANVIL_CAT_(a, b) a##b
#define ANVIL_CAT(a, b) ANVIL_CAT_(a, b)
typedef std::int64_t anvil_i64;
typedef float anvil_f32;
typedef double anvil_f64;
#include "kernels/interpolate.h"
#undef ANVIL_FN
#undef ANVIL_HAS_FP64
#undef ANVIL_CAT_
#undef ANVIL_CAT
}  // namespace interp_taps

namespace {

using detail::InterpMode;
using detail::InterpolateArgs;

// What T computes in: f64 for f64, f32 for the rest.
template <typename T>
using Acc = std::conditional_t<std::is_same_v<T, double>, double, float>;

// The taps of every output index along one dim.
template <typename A>
struct Taps {
  std::vector<std::int64_t> i0, i1;
  std::vector<A> l;
  Taps(std::int64_t in, std::int64_t out, double scale, const InterpolateArgs& a)
      : i0(static_cast<std::size_t>(out)), i1(static_cast<std::size_t>(out)), l(static_cast<std::size_t>(out)) {
    const int bilinear = a.mode == InterpMode::Bilinear, corners = a.align_corners;
    for (std::int64_t o = 0; o < out; ++o) {
      const auto k = static_cast<std::size_t>(o);
      if constexpr (std::is_same_v<A, double>)
        interp_taps::anvil_interp_taps_anvil_f64(o, in, out, scale, bilinear, corners, &i0[k], &i1[k], &l[k]);
      else
        interp_taps::anvil_interp_taps_anvil_f32(o, in, out, static_cast<float>(scale), bilinear, corners, &i0[k],
                                                 &i1[k], &l[k]);
    }
  }
};

// Planes per task so that one task has some tens of thousands of elements.
std::int64_t plane_grain(std::int64_t plane_elems) {
  return std::max<std::int64_t>(1, kParallelGrain / 4 / std::max<std::int64_t>(1, plane_elems));
}

template <typename T>
void forward_typed(const InterpolateArgs& a) {
  using A = Acc<T>;
  const Taps<A> th(a.h, a.oh, a.scale_h, a), tw(a.w, a.ow, a.scale_w, a);
  const T* image = static_cast<const T*>(a.image.data) + a.image.offset;
  T* out = static_cast<T*>(a.out.data) + a.out.offset;
  const std::int64_t sn = a.image.strides[0], sc = a.image.strides[1], sh = a.image.strides[2], sw = a.image.strides[3];
  const std::int64_t p = a.oh * a.ow;
  const bool bilinear = a.mode == InterpMode::Bilinear;
  parallel_for(a.n * a.c, plane_grain(p), [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t nc = begin; nc < end; ++nc) {
      const T* src = image + (nc / a.c) * sn + (nc % a.c) * sc;
      T* dst = out + nc * p;
      for (std::int64_t oy = 0; oy < a.oh; ++oy, dst += a.ow) {
        const auto y = static_cast<std::size_t>(oy);
        const T* r0 = src + th.i0[y] * sh;
        if (!bilinear) {  // a copy of the value, NaN and inf as they are
          for (std::int64_t ox = 0; ox < a.ow; ++ox) dst[ox] = r0[tw.i0[static_cast<std::size_t>(ox)] * sw];
          continue;
        }
        const T* r1 = src + th.i1[y] * sh;
        const A ly = th.l[y], ly0 = A(1) - ly;
        for (std::int64_t ox = 0; ox < a.ow; ++ox) {
          const auto x = static_cast<std::size_t>(ox);
          const std::int64_t x0 = tw.i0[x] * sw, x1 = tw.i1[x] * sw;
          const A lx = tw.l[x], lx0 = A(1) - lx;
          const A top = lx0 * static_cast<A>(r0[x0]) + lx * static_cast<A>(r0[x1]);
          const A bottom = lx0 * static_cast<A>(r1[x0]) + lx * static_cast<A>(r1[x1]);
          dst[ox] = static_cast<T>(ly0 * top + ly * bottom);
        }
      }
    }
  });
}

template <typename T>
void backward_typed(const InterpolateArgs& a) {
  using A = Acc<T>;
  const Taps<A> th(a.h, a.oh, a.scale_h, a), tw(a.w, a.ow, a.scale_w, a);
  T* image = static_cast<T*>(a.image.data) + a.image.offset;  // contiguous
  const T* grad = static_cast<const T*>(a.out.data) + a.out.offset;
  const std::int64_t p = a.oh * a.ow, hw = a.h * a.w;
  const bool bilinear = a.mode == InterpMode::Bilinear;
  parallel_for(a.n * a.c, plane_grain(p + hw), [&](std::int64_t begin, std::int64_t end) {
    // f32/f64 add into the output plane itself; f16/bf16 into an f32 plane.
    std::vector<A> wide(std::is_same_v<T, A> ? 0 : static_cast<std::size_t>(hw));
    for (std::int64_t nc = begin; nc < end; ++nc) {
      A* dst;
      if constexpr (std::is_same_v<T, A>)
        dst = image + nc * hw;
      else
        dst = wide.data();
      std::fill_n(dst, hw, A(0));
      const T* g = grad + nc * p;
      for (std::int64_t oy = 0; oy < a.oh; ++oy, g += a.ow) {
        const auto y = static_cast<std::size_t>(oy);
        A* r0 = dst + th.i0[y] * a.w;
        if (!bilinear) {
          for (std::int64_t ox = 0; ox < a.ow; ++ox) r0[tw.i0[static_cast<std::size_t>(ox)]] += static_cast<A>(g[ox]);
          continue;
        }
        A* r1 = dst + th.i1[y] * a.w;
        const A ly = th.l[y], ly0 = A(1) - ly;
        for (std::int64_t ox = 0; ox < a.ow; ++ox) {
          const auto x = static_cast<std::size_t>(ox);
          const std::int64_t x0 = tw.i0[x], x1 = tw.i1[x];
          const A lx = tw.l[x], lx0 = A(1) - lx, v = static_cast<A>(g[ox]);
          r0[x0] += ly0 * lx0 * v;
          r0[x1] += ly0 * lx * v;
          r1[x0] += ly * lx0 * v;
          r1[x1] += ly * lx * v;
        }
      }
      if constexpr (!std::is_same_v<T, A>)
        for (std::int64_t q = 0; q < hw; ++q) image[nc * hw + q] = static_cast<T>(wide[static_cast<std::size_t>(q)]);
    }
  });
}

}  // namespace

void CpuBackend::interpolate(int, const InterpolateArgs& a) {
  count(detail::traffic(a, false));
  ANVIL_DISPATCH_FLOAT(a.dtype, T, forward_typed<T>(a));
}
void CpuBackend::interpolate_backward(int, const InterpolateArgs& a) {
  count(detail::traffic(a, true));
  ANVIL_DISPATCH_FLOAT(a.dtype, T, backward_typed<T>(a));
}

}  // namespace anvil::cpu_backend
