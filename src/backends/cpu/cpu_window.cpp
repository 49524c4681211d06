// Fused window kernels for conv2d and max_pool2d (backend.h, FusedOp).
// The composite versions in src/ops walk as_strided views whose rows are one
// kernel width long and scatter gradients with one strided add per kernel
// offset; here each (n, c) plane is one task and every loop runs over a
// contiguous row. f16 and bf16 move their 16-bit values as they are (im2col,
// the pool's choice) and sum overlapping contributions (col2im, the pool's
// backward) in an f32 plane that is rounded once, as every 16-bit op here
// accumulates in f32 (DESIGN §4.2).
#include <algorithm>
#include <initializer_list>
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

// Whether `o` is row-major over `sizes` (dims of size 1 take any stride):
// the NCHW layouts the plane loops below walk. Other layouts (a
// channels-last image, cols with a row per output pixel) take the loops
// over pixels with the channels innermost.
bool row_major(const detail::KernelOperand& o, std::initializer_list<std::int64_t> sizes) {
  std::int64_t expected = 1;
  for (int d = static_cast<int>(sizes.size()) - 1; d >= 0; --d) {
    const std::int64_t size = sizes.begin()[d];
    if (size != 1 && o.strides[d] != expected) return false;
    expected *= size;
  }
  return true;
}
bool nchw_cols(const Im2colArgs& a) { return row_major(a.cols, {a.g.n, a.g.c, a.g.kh, a.g.kw, a.g.oh, a.g.ow}); }

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

// cols of any layout, one task per output row (n, oh), the channels innermost.
template <typename T>
void im2col_pixels(const Im2colArgs& a) {
  const Window2dGeometry& g = a.g;
  const Image<T> x(a.image);
  T* cols = static_cast<T*>(a.cols.data) + a.cols.offset;
  const std::int64_t* cs = a.cols.strides;
  parallel_for(g.n * g.oh, plane_grain(g.ow * g.c * g.kh * g.kw), [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t r = begin; r < end; ++r) {
      const std::int64_t n = r / g.oh, oh = r % g.oh;
      for (std::int64_t ow = 0; ow < g.ow; ++ow)
        for (std::int64_t i = 0; i < g.kh; ++i)
          for (std::int64_t j = 0; j < g.kw; ++j) {
            T* dst = cols + n * cs[0] + i * cs[2] + j * cs[3] + oh * cs[4] + ow * cs[5];
            const std::int64_t ih = oh * g.sh - g.ph + i * g.dh, iw = ow * g.sw - g.pw + j * g.dw;
            if (ih < 0 || ih >= g.h || iw < 0 || iw >= g.w) {
              for (std::int64_t c = 0; c < g.c; ++c) dst[c * cs[1]] = T(0);
              continue;
            }
            const T* src = x.plane(n, 0) + ih * x.sh + iw * x.sw;
            for (std::int64_t c = 0; c < g.c; ++c) dst[c * cs[1]] = src[c * x.sc];
          }
    }
  });
}

template <typename T>
void im2col_typed(const Im2colArgs& a) {
  if (!nchw_cols(a)) return im2col_pixels<T>(a);
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

// Image and cols of any layout: each pixel gathers the windows covering it,
// in the order the plane loop below adds them (i, then j), the channels
// innermost; one task per image row (n, y).
template <typename T>
void col2im_pixels(const Im2colArgs& a) {
  const Window2dGeometry& g = a.g;
  T* image = static_cast<T*>(a.image.data) + a.image.offset;
  const std::int64_t* is = a.image.strides;
  const T* cols = static_cast<const T*>(a.cols.data) + a.cols.offset;
  const std::int64_t* cs = a.cols.strides;
  parallel_for(g.n * g.h, plane_grain(g.w * g.c * g.kh * g.kw), [&](std::int64_t begin, std::int64_t end) {
    std::vector<Acc<T>> acc(static_cast<std::size_t>(g.c));
    for (std::int64_t r = begin; r < end; ++r) {
      const std::int64_t n = r / g.h, y = r % g.h;
      for (std::int64_t x = 0; x < g.w; ++x) {
        std::fill(acc.begin(), acc.end(), Acc<T>(0));
        for (std::int64_t i = 0; i < g.kh; ++i) {
          const std::int64_t th = y + g.ph - i * g.dh;
          if (th < 0 || th % g.sh != 0 || th / g.sh >= g.oh) continue;
          for (std::int64_t j = 0; j < g.kw; ++j) {
            const std::int64_t tw = x + g.pw - j * g.dw;
            if (tw < 0 || tw % g.sw != 0 || tw / g.sw >= g.ow) continue;
            const T* src = cols + n * cs[0] + i * cs[2] + j * cs[3] + th / g.sh * cs[4] + tw / g.sw * cs[5];
            for (std::int64_t c = 0; c < g.c; ++c) acc[static_cast<std::size_t>(c)] += Acc<T>(src[c * cs[1]]);
          }
        }
        T* dst = image + n * is[0] + y * is[2] + x * is[3];
        for (std::int64_t c = 0; c < g.c; ++c) dst[c * is[1]] = T(acc[static_cast<std::size_t>(c)]);
      }
    }
  });
}

template <typename T>
void col2im_typed(const Im2colArgs& a) {
  if (!nchw_cols(a) || !row_major(a.image, {a.g.n, a.g.c, a.g.h, a.g.w})) return col2im_pixels<T>(a);
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

// Output and indices of any layout (channels-last), one task per output row
// (n, oh), the channels innermost; the window's taps in the order of the
// plane loop below, so ties and NaN go the same way.
template <typename T>
void max_pool2d_pixels(const Pool2dArgs& a) {
  const Window2dGeometry& g = a.g;
  const Image<T> x(a.image);
  T* out = static_cast<T*>(a.out.data) + a.out.offset;
  std::int64_t* indices = static_cast<std::int64_t*>(a.indices.data) + a.indices.offset;
  const std::int64_t *os = a.out.strides, *xs = a.indices.strides;
  parallel_for(g.n * g.oh, plane_grain(g.ow * g.c * g.kh * g.kw), [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t r = begin; r < end; ++r) {
      const std::int64_t n = r / g.oh, oh = r % g.oh, ih0 = oh * g.sh - g.ph;
      const std::int64_t i_lo = std::max<std::int64_t>(0, -ih0), i_hi = std::min(g.kh, g.h - ih0);
      for (std::int64_t ow = 0; ow < g.ow; ++ow) {
        const std::int64_t iw0 = ow * g.sw - g.pw;
        const std::int64_t j_lo = std::max<std::int64_t>(0, -iw0), j_hi = std::min(g.kw, g.w - iw0);
        T* o = out + n * os[0] + oh * os[2] + ow * os[3];
        std::int64_t* idx = indices + n * xs[0] + oh * xs[2] + ow * xs[3];
        for (std::int64_t c = 0; c < g.c; ++c) {
          o[c * os[1]] = T(-std::numeric_limits<float>::infinity());
          idx[c * xs[1]] = -1;
        }
        for (std::int64_t i = i_lo; i < i_hi; ++i)
          for (std::int64_t j = j_lo; j < j_hi; ++j) {
            const T* src = x.plane(n, 0) + (ih0 + i) * x.sh + (iw0 + j) * x.sw;
            const std::int64_t where = (ih0 + i) * g.w + (iw0 + j);
            for (std::int64_t c = 0; c < g.c; ++c) {
              const T v = src[c * x.sc];
              if (idx[c * xs[1]] < 0 || beats(v, o[c * os[1]])) {
                o[c * os[1]] = v;
                idx[c * xs[1]] = where;
              }
            }
          }
      }
    }
  });
}

template <typename T>
void max_pool2d_typed(const Pool2dArgs& a) {
  if (!row_major(a.out, {a.g.n, a.g.c, a.g.oh, a.g.ow}) || !row_major(a.indices, {a.g.n, a.g.c, a.g.oh, a.g.ow}))
    return max_pool2d_pixels<T>(a);
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

// Any layout (channels-last): one task per sample, whose windows scatter
// into an f32-or-wider image [C, H, W] in the plane loop's order, then
// stored in the image's layout.
template <typename T>
void max_pool2d_backward_samples(const Pool2dArgs& a) {
  const Window2dGeometry& g = a.g;
  T* image = static_cast<T*>(a.image.data) + a.image.offset;
  const T* grad = static_cast<const T*>(a.out.data) + a.out.offset;
  const std::int64_t* indices = static_cast<const std::int64_t*>(a.indices.data) + a.indices.offset;
  const std::int64_t *ms = a.image.strides, *gs = a.out.strides, *xs = a.indices.strides;
  const std::int64_t hw = g.h * g.w;
  parallel_for(g.n, plane_grain(g.c * (hw + g.oh * g.ow)), [&](std::int64_t begin, std::int64_t end) {
    std::vector<Acc<T>> sum(static_cast<std::size_t>(g.c * hw));
    for (std::int64_t n = begin; n < end; ++n) {
      std::fill(sum.begin(), sum.end(), Acc<T>(0));
      for (std::int64_t c = 0; c < g.c; ++c) {
        Acc<T>* plane = sum.data() + c * hw;
        const T* gp = grad + n * gs[0] + c * gs[1];
        const std::int64_t* ip = indices + n * xs[0] + c * xs[1];
        for (std::int64_t oh = 0; oh < g.oh; ++oh)
          for (std::int64_t ow = 0; ow < g.ow; ++ow) {
            const std::int64_t q = ip[oh * xs[2] + ow * xs[3]];
            if (q >= 0) plane[q] += gp[oh * gs[2] + ow * gs[3]];
          }
      }
      T* dst = image + n * ms[0];
      for (std::int64_t y = 0; y < g.h; ++y)
        for (std::int64_t x = 0; x < g.w; ++x)
          for (std::int64_t c = 0; c < g.c; ++c)
            dst[y * ms[2] + x * ms[3] + c * ms[1]] = T(sum[static_cast<std::size_t>(c * hw + y * g.w + x)]);
    }
  });
}

template <typename T>
void max_pool2d_backward_typed(const Pool2dArgs& a) {
  const Window2dGeometry& g = a.g;
  if (!row_major(a.image, {g.n, g.c, g.h, g.w}) || !row_major(a.out, {g.n, g.c, g.oh, g.ow}) ||
      !row_major(a.indices, {g.n, g.c, g.oh, g.ow}))
    return max_pool2d_backward_samples<T>(a);
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
