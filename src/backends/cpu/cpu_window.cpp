// Fused window kernels for conv2d and max_pool2d (backend.h, FusedOp).
// The composite versions in src/ops walk as_strided views whose rows are one
// kernel width long and scatter gradients with one strided add per kernel
// offset; here each (n, c) plane is one task and every loop runs over a
// contiguous row. f16 and bf16 move their 16-bit values as they are (im2col,
// the pool's choice) and sum overlapping contributions (col2im, the pool's
// backward) in an f32 plane that is rounded once, as every 16-bit op here
// accumulates in f32 (DESIGN §4.2).
#include <algorithm>
#include <limits>
#include <vector>

#include "backends/cpu/dtype_switch.h"
#include "backends/cpu/isa.h"
#include "backends/cpu/parallel.h"

namespace anvil::cpu_backend {
inline namespace ANVIL_CPU_ISA {

using detail::Im2colArgs;
using detail::Pool2dArgs;
using detail::Window2dGeometry;

namespace {

// Strided [N, C, H, W] input: the element pointer of plane (n, c) and the
// row and column strides.
template <typename T>
struct Image {
  const T* base;
  std::int64_t sn, sc, sh, sw;
  Image(const detail::KernelOperand& op)
      : base(static_cast<const T*>(op.data) + op.offset),
        sn(op.strides[0]),
        sc(op.strides[1]),
        sh(op.strides[2]),
        sw(op.strides[3]) {}
  const T* plane(std::int64_t n, std::int64_t c) const { return base + n * sn + c * sc; }
};

// Planes per task so that one task has some tens of thousands of elements.
std::int64_t plane_grain(std::int64_t plane_elems) {
  return std::max<std::int64_t>(1, kParallelGrain / 4 / std::max<std::int64_t>(1, plane_elems));
}

// What a plane of T sums in: f32 for the 16-bit floats, T itself otherwise.
template <typename T>
using Acc = std::conditional_t<detail::is_half_v<T>, float, T>;

// A zeroed plane to sum into: the output plane itself for f32/f64; for
// f16/bf16 a task-local f32 plane, rounded into the output by finish().
template <typename T>
class PlaneSum {
 public:
  explicit PlaneSum(std::int64_t hw) : hw_(hw) {
    if constexpr (detail::is_half_v<T>) wide_.resize(static_cast<std::size_t>(hw));
  }
  Acc<T>* start(T* plane) {
    Acc<T>* dst;
    if constexpr (detail::is_half_v<T>)
      dst = wide_.data();
    else
      dst = plane;
    std::fill_n(dst, hw_, Acc<T>(0));
    return dst;
  }
  void finish(T* plane) const {
    if constexpr (detail::is_half_v<T>)
      for (std::int64_t q = 0; q < hw_; ++q) plane[q] = T(wide_[static_cast<std::size_t>(q)]);
  }

 private:
  std::int64_t hw_;
  std::vector<float> wide_;  // f16/bf16 only
};

template <typename T>
void im2col_typed(const Im2colArgs& a) {
  const Window2dGeometry& g = a.g;
  const Image<T> x(a.image);
  T* cols = static_cast<T*>(a.cols.data) + a.cols.offset;
  const std::int64_t kk = g.kh * g.kw, p = g.oh * g.ow;
  // One task per (n, c): its KH*KW rows of the window matrix.
  parallel_for(g.n * g.c, plane_grain(kk * p), [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t nc = begin; nc < end; ++nc) {
      const std::int64_t n = nc / g.c, c = nc % g.c;
      const T* src = x.plane(n, c);
      T* dst = cols + nc * kk * p;  // rows (c*KH + i)*KW + j of sample n
      for (std::int64_t i = 0; i < g.kh; ++i)
        for (std::int64_t j = 0; j < g.kw; ++j, dst += p) {
          // Output columns whose input column iw = ow*SW - PW + j*DW is inside [0, W).
          const std::int64_t jd = j * g.dw;
          const std::int64_t ow_lo = std::min(g.ow, std::max<std::int64_t>(0, (g.pw - jd + g.sw - 1) / g.sw));
          const std::int64_t ow_hi = std::max(ow_lo, std::min(g.ow, (g.w + g.pw - jd + g.sw - 1) / g.sw));
          for (std::int64_t oh = 0; oh < g.oh; ++oh) {
            T* row = dst + oh * g.ow;
            const std::int64_t ih = oh * g.sh - g.ph + i * g.dh;
            if (ih < 0 || ih >= g.h) {
              for (std::int64_t ow = 0; ow < g.ow; ++ow) row[ow] = T(0);
              continue;
            }
            for (std::int64_t ow = 0; ow < ow_lo; ++ow) row[ow] = T(0);
            if (ow_lo < ow_hi) {  // `in` points inside the image only then
              const T* in = src + ih * x.sh + (ow_lo * g.sw - g.pw + jd) * x.sw;
              const std::int64_t step = g.sw * x.sw;
              if (step == 1) {
                for (std::int64_t ow = ow_lo; ow < ow_hi; ++ow) row[ow] = in[ow - ow_lo];
              } else {
                for (std::int64_t ow = ow_lo; ow < ow_hi; ++ow) row[ow] = in[(ow - ow_lo) * step];
              }
            }
            for (std::int64_t ow = ow_hi; ow < g.ow; ++ow) row[ow] = T(0);
          }
        }
    }
  });
}

template <typename T>
void col2im_typed(const Im2colArgs& a) {
  const Window2dGeometry& g = a.g;
  T* image = static_cast<T*>(a.image.data) + a.image.offset;
  const T* cols = static_cast<const T*>(a.cols.data) + a.cols.offset;
  const std::int64_t kk = g.kh * g.kw, p = g.oh * g.ow, hw = g.h * g.w;
  // One task per (n, c) plane: no two tasks write the same pixel.
  parallel_for(g.n * g.c, plane_grain(kk * p), [&](std::int64_t begin, std::int64_t end) {
    PlaneSum<T> sum(hw);
    for (std::int64_t nc = begin; nc < end; ++nc) {
      Acc<T>* dst = sum.start(image + nc * hw);
      const T* src = cols + nc * kk * p;
      for (std::int64_t i = 0; i < g.kh; ++i)
        for (std::int64_t j = 0; j < g.kw; ++j, src += p) {
          const std::int64_t jd = j * g.dw;
          const std::int64_t ow_lo = std::min(g.ow, std::max<std::int64_t>(0, (g.pw - jd + g.sw - 1) / g.sw));
          const std::int64_t ow_hi = std::max(ow_lo, std::min(g.ow, (g.w + g.pw - jd + g.sw - 1) / g.sw));
          for (std::int64_t oh = 0; oh < g.oh; ++oh) {
            const std::int64_t ih = oh * g.sh - g.ph + i * g.dh;
            if (ih < 0 || ih >= g.h || ow_lo >= ow_hi) continue;
            const T* row = src + oh * g.ow;
            Acc<T>* out = dst + ih * g.w + (ow_lo * g.sw - g.pw + jd);
            if (g.sw == 1) {
              for (std::int64_t ow = ow_lo; ow < ow_hi; ++ow) out[ow - ow_lo] += row[ow];
            } else {
              for (std::int64_t ow = ow_lo; ow < ow_hi; ++ow) out[(ow - ow_lo) * g.sw] += row[ow];
            }
          }
        }
      sum.finish(image + nc * hw);
    }
  });
}

// Whether v replaces the running maximum `best`: the first maximum wins
// ties, NaN wins over every number and then stays (PyTorch's choice).
template <typename T>
inline bool beats(T v, T best) {
  return !(v <= best) & (best == best);  // `&`, not `&&`: no branch, so loops vectorise
}

// The common 2×2, stride 2, unpadded pool. Left to itself GCC 12 neither
// vectorises the loop over a window's four candidates nor keeps its selects
// branch-free, and the branches mispredict on real activations: LeNet's
// first pool took 3.5 ms a batch, more than its convolution. So it runs as
// flat passes that vectorise: the maximum of each horizontal pair and where
// it was, then the larger of the pairs one row apart. Taking maxima pairwise
// keeps beats()'s rule (ties and NaN go to the first of the four in
// row-major order). The rows of LeNet's planes are short (14 and 5 outputs),
// so a pass per row would spend most of its time in scalar remainders: when
// consecutive planes are one contiguous run of rows of even height and
// width, each pass runs over several planes at once (max_pool_2x2_run);
// other layouts go a row at a time (max_pool_2x2_plane).
template <typename T>
struct PoolScratch {
  std::vector<T> pair_best, best;
  std::vector<std::int64_t> pair_at, at;  // where in the plane a maximum came from
};

template <typename T>
void pair_maxima(const T* __restrict row, std::int64_t step, std::int64_t first_at, T* __restrict best,
                 std::int64_t* __restrict at, std::int64_t pairs) {
  if (step == 1) {
    for (std::int64_t q = 0; q < pairs; ++q) {
      const bool right = beats(row[2 * q + 1], row[2 * q]);
      best[q] = right ? row[2 * q + 1] : row[2 * q];
      at[q] = first_at + 2 * q + right;
    }
  } else {
    for (std::int64_t q = 0; q < pairs; ++q) {
      const bool right = beats(row[(2 * q + 1) * step], row[2 * q * step]);
      best[q] = right ? row[(2 * q + 1) * step] : row[2 * q * step];
      at[q] = first_at + 2 * q + right;
    }
  }
}

// out[q], at[q] = the larger of (top[q], bottom[q]), the top one on a tie.
template <typename T>
void larger_of_rows(const T* __restrict top, const std::int64_t* __restrict top_at, const T* __restrict bottom,
                    const std::int64_t* __restrict bottom_at, T* __restrict out, std::int64_t* __restrict at,
                    std::int64_t n) {
  for (std::int64_t q = 0; q < n; ++q) {
    const bool lower = beats(bottom[q], top[q]);
    out[q] = lower ? bottom[q] : top[q];
    at[q] = lower ? bottom_at[q] : top_at[q];
  }
}

// One plane of any layout, a row at a time.
template <typename T>
void max_pool_2x2_plane(const T* src, const Image<T>& x, const Window2dGeometry& g, T* o, std::int64_t* idx,
                        PoolScratch<T>& s) {
  const std::int64_t ow = g.ow, rows = 2 * g.oh;
  s.pair_best.resize(static_cast<std::size_t>(rows * ow));
  s.pair_at.resize(s.pair_best.size());
  for (std::int64_t r = 0; r < rows; ++r)
    pair_maxima(src + r * x.sh, x.sw, r * g.w, s.pair_best.data() + r * ow, s.pair_at.data() + r * ow, ow);
  for (std::int64_t r = 0; r < g.oh; ++r) {
    const std::int64_t top = 2 * r * ow, bottom = top + ow;
    larger_of_rows(s.pair_best.data() + top, s.pair_at.data() + top, s.pair_best.data() + bottom,
                   s.pair_at.data() + bottom, o + r * ow, idx + r * ow, ow);
  }
}

// Whether consecutive planes are one contiguous run of even rows of even
// width: then max_pool_2x2_run covers many planes with each pass.
template <typename T>
bool pools_as_one_run(const Image<T>& x, const Window2dGeometry& g) {
  return x.sw == 1 && x.sh == g.w && x.sc == g.h * g.w && x.sn == g.c * x.sc && g.w == 2 * g.ow && g.h == 2 * g.oh;
}

// `planes` consecutive planes that pools_as_one_run: each pass runs over all
// of them, and also compares the pairs of rows 2i+1 and 2i+2, unused.
template <typename T>
void max_pool_2x2_run(const T* src, std::int64_t planes, const Window2dGeometry& g, T* o, std::int64_t* idx,
                      PoolScratch<T>& s) {
  const std::int64_t ow = g.ow, oh = g.oh, hw = g.h * g.w, rows = planes * g.h;
  s.pair_best.resize(static_cast<std::size_t>(rows * ow));
  s.pair_at.resize(s.pair_best.size());
  pair_maxima(src, 1, 0, s.pair_best.data(), s.pair_at.data(), rows * ow);
  const std::int64_t n = (rows - 1) * ow;  // every row's pairs against the next row's
  s.best.resize(static_cast<std::size_t>(n));
  s.at.resize(s.best.size());
  larger_of_rows(s.pair_best.data(), s.pair_at.data(), s.pair_best.data() + ow, s.pair_at.data() + ow, s.best.data(),
                 s.at.data(), n);
  for (std::int64_t r = 0; r < planes * oh; ++r) {   // output row r is the pairs of input rows 2r and 2r+1
    const std::int64_t plane_start = (r / oh) * hw;  // `at` counts from the first plane; indices from their own
    const T* best = s.best.data() + 2 * r * ow;
    const std::int64_t* at = s.at.data() + 2 * r * ow;
    T* out = o + r * ow;
    std::int64_t* where = idx + r * ow;
    for (std::int64_t q = 0; q < ow; ++q) {
      out[q] = best[q];
      where[q] = at[q] - plane_start;
    }
  }
}

template <typename T>
void max_pool2d_typed(const Pool2dArgs& a) {
  const Window2dGeometry& g = a.g;
  const Image<T> x(a.image);
  T* out = static_cast<T*>(a.out.data) + a.out.offset;
  std::int64_t* indices = static_cast<std::int64_t*>(a.indices.data) + a.indices.offset;
  const std::int64_t p = g.oh * g.ow;
  const bool two_by_two = g.kh == 2 && g.kw == 2 && g.sh == 2 && g.sw == 2 && g.ph == 0 && g.pw == 0;
  if (two_by_two && pools_as_one_run(x, g)) {
    // Runs of about 4096 input elements: the scratch (48 KiB for f32) stays in cache.
    const std::int64_t run = std::max<std::int64_t>(1, 4096 / (g.h * g.w));
    parallel_for(g.n * g.c, plane_grain(p * 4), [&](std::int64_t begin, std::int64_t end) {
      PoolScratch<T> scratch;
      for (std::int64_t nc = begin; nc < end; nc += run) {
        const std::int64_t planes = std::min(run, end - nc);
        max_pool_2x2_run(x.base + nc * x.sc, planes, g, out + nc * p, indices + nc * p, scratch);
      }
    });
    return;
  }
  parallel_for(g.n * g.c, plane_grain(p * g.kh * g.kw), [&](std::int64_t begin, std::int64_t end) {
    PoolScratch<T> scratch;
    for (std::int64_t nc = begin; nc < end; ++nc) {
      const T* src = x.plane(nc / g.c, nc % g.c);
      T* o = out + nc * p;
      std::int64_t* idx = indices + nc * p;
      if (two_by_two) {
        max_pool_2x2_plane(src, x, g, o, idx, scratch);
        continue;
      }
      for (std::int64_t oh = 0; oh < g.oh; ++oh) {
        const std::int64_t ih0 = oh * g.sh - g.ph;
        const std::int64_t i_lo = std::max<std::int64_t>(0, -ih0), i_hi = std::min(g.kh, g.h - ih0);
        for (std::int64_t ow = 0; ow < g.ow; ++ow) {
          const std::int64_t iw0 = ow * g.sw - g.pw;
          const std::int64_t j_lo = std::max<std::int64_t>(0, -iw0), j_hi = std::min(g.kw, g.w - iw0);
          T best = T(-std::numeric_limits<float>::infinity());
          std::int64_t where = -1;
          for (std::int64_t i = i_lo; i < i_hi; ++i) {
            const T* row = src + (ih0 + i) * x.sh;
            for (std::int64_t j = j_lo; j < j_hi; ++j) {
              const T v = row[(iw0 + j) * x.sw];
              if (where < 0 || beats(v, best)) {
                best = v;
                where = (ih0 + i) * g.w + (iw0 + j);
              }
            }
          }
          o[oh * g.ow + ow] = best;
          idx[oh * g.ow + ow] = where;
        }
      }
    }
  });
}

template <typename T>
void max_pool2d_backward_typed(const Pool2dArgs& a) {
  const Window2dGeometry& g = a.g;
  T* image = static_cast<T*>(a.image.data) + a.image.offset;
  const T* grad = static_cast<const T*>(a.out.data) + a.out.offset;
  const std::int64_t* indices = static_cast<const std::int64_t*>(a.indices.data) + a.indices.offset;
  const std::int64_t p = g.oh * g.ow, hw = g.h * g.w;
  parallel_for(g.n * g.c, plane_grain(hw + p), [&](std::int64_t begin, std::int64_t end) {
    PlaneSum<T> sum(hw);
    for (std::int64_t nc = begin; nc < end; ++nc) {
      Acc<T>* dst = sum.start(image + nc * hw);
      const T* gs = grad + nc * p;
      const std::int64_t* is = indices + nc * p;
      for (std::int64_t q = 0; q < p; ++q)
        if (is[q] >= 0) dst[is[q]] += gs[q];
      sum.finish(image + nc * hw);
    }
  });
}

}  // namespace

void im2col(const Im2colArgs& args) { ANVIL_DISPATCH_FLOAT(args.dtype, T, im2col_typed<T>(args)); }
void col2im(const Im2colArgs& args) { ANVIL_DISPATCH_FLOAT(args.dtype, T, col2im_typed<T>(args)); }
void max_pool2d(const Pool2dArgs& args) { ANVIL_DISPATCH_FLOAT(args.dtype, T, max_pool2d_typed<T>(args)); }
void max_pool2d_backward(const Pool2dArgs& args) {
  ANVIL_DISPATCH_FLOAT(args.dtype, T, max_pool2d_backward_typed<T>(args));
}

}  // namespace ANVIL_CPU_ISA
}  // namespace anvil::cpu_backend
