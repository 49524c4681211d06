// Fused batch norm (backend.h, Note [Fused batch norm]): one parallel pass
// over the channels. A thread owns whole channels, so a channel's N rows of
// S elements are read from memory once for its sums and again from the
// cache (a channel of ResNet-18's widest layer, [32, 64, 28, 28], is 98 KiB)
// for its output, and no per-channel partial results cross threads.
// f16 and bf16 inputs (T) compute in f32 (P), the type of every per-channel
// operand, and round once per element stored. The fused epilogue (residual
// add, ReLU) happens in the output's loop, and ReLU's gradient mask (y <= 0:
// 0) in the backward's sums and its output loop, as in norm.kern.
#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <vector>

#include "anvil/error.h"
#include "backends/cpu/isa.h"
#include "backends/cpu/loops.h"
#include "backends/cpu/parallel.h"
#include "backends/cpu/scalar_ops.h"
#include "core/half.h"

namespace anvil::cpu_backend {
inline namespace ANVIL_CPU_ISA {

using detail::BatchNormArgs;

namespace {

// A channel's sums: terms are added in T across vector lanes in blocks of
// kBlock, and the blocks in f64 (PyTorch's CPU accumulator for f32), so a
// long channel loses no more than a block's rounding. Rows shorter than
// kShortRow (S = 16 in ResNet-18's last stage) are added element-wise into
// one row of f64 partial sums instead, which are summed once per channel
// (Note [Short rows] in loops.h).
constexpr std::int64_t kBlock = 1024;

// The channel's sums over its n rows of s elements (row i starting at
// element (i * c + ch) * s), through restrict-qualified pointers so that
// the loops vectorise: S(x) with m = nullptr, else S((x - m)^2); and for the
// gradient S(g) and S(g * (x - m)).
struct ChannelRows {
  std::int64_t n, c, ch, s;
  std::int64_t row(std::int64_t i) const { return (i * c + ch) * s; }
};

template <typename T, typename P>
double sum_or_squares(const T* __restrict x, const ChannelRows& r, const P* m) {
  double total = 0;
  if (r.s < kShortRow) {
    double partial[kShortRow] = {};
    for (std::int64_t i = 0; i < r.n; ++i) {
      const T* __restrict row = x + r.row(i);
      if (m == nullptr) {
#pragma omp simd
        for (std::int64_t j = 0; j < r.s; ++j) partial[j] += static_cast<double>(static_cast<P>(row[j]));
      } else {
        const P mean = *m;
#pragma omp simd
        for (std::int64_t j = 0; j < r.s; ++j) {
          const P d = static_cast<P>(row[j]) - mean;
          partial[j] += static_cast<double>(d * d);
        }
      }
    }
    for (std::int64_t j = 0; j < r.s; ++j) total += partial[j];
    return total;
  }
  for (std::int64_t i = 0; i < r.n; ++i) {
    const T* __restrict row = x + r.row(i);
    for (std::int64_t j0 = 0; j0 < r.s; j0 += kBlock) {
      const std::int64_t j1 = std::min(r.s, j0 + kBlock);
      P acc = 0;
      if (m == nullptr) {
#pragma omp simd reduction(+ : acc)
        for (std::int64_t j = j0; j < j1; ++j) acc += static_cast<P>(row[j]);
      } else {
        const P mean = *m;
#pragma omp simd reduction(+ : acc)
        for (std::int64_t j = j0; j < j1; ++j) {
          const P d = static_cast<P>(row[j]) - mean;
          acc += d * d;
        }
      }
      total += static_cast<double>(acc);
    }
  }
  return total;
}

// g masked by ReLU's gradient where kMask: 0 where the forward's y <= 0
// (scalar.h's relu_backward, so a NaN y passes g).
template <bool kMask, typename T, typename P>
inline P masked(const T* __restrict g, const T* __restrict y, std::int64_t j) {
  if constexpr (kMask) return static_cast<P>(y[j]) <= P(0) ? P(0) : static_cast<P>(g[j]);
  return static_cast<P>(g[j]);
}

template <bool kMask, typename T, typename P>
std::array<double, 2> gradient_sums(const T* __restrict g, const T* __restrict x, const T* __restrict y,
                                    const ChannelRows& r, P mean) {
  std::array<double, 2> total{};
  if (r.s < kShortRow) {
    double pg[kShortRow] = {}, pgx[kShortRow] = {};
    for (std::int64_t i = 0; i < r.n; ++i) {
      const T* __restrict grow = g + r.row(i);
      const T* __restrict xrow = x + r.row(i);
      const T* __restrict yrow = kMask ? y + r.row(i) : nullptr;
#pragma omp simd
      for (std::int64_t j = 0; j < r.s; ++j) {
        const P gj = masked<kMask, T, P>(grow, yrow, j);
        pg[j] += static_cast<double>(gj);
        pgx[j] += static_cast<double>(gj * (static_cast<P>(xrow[j]) - mean));
      }
    }
    for (std::int64_t j = 0; j < r.s; ++j) total[0] += pg[j], total[1] += pgx[j];
    return total;
  }
  for (std::int64_t i = 0; i < r.n; ++i) {
    const T* __restrict grow = g + r.row(i);
    const T* __restrict xrow = x + r.row(i);
    const T* __restrict yrow = kMask ? y + r.row(i) : nullptr;
    for (std::int64_t j0 = 0; j0 < r.s; j0 += kBlock) {
      const std::int64_t j1 = std::min(r.s, j0 + kBlock);
      P sg = 0, sgx = 0;
#pragma omp simd reduction(+ : sg, sgx)
      for (std::int64_t j = j0; j < j1; ++j) {
        const P gj = masked<kMask, T, P>(grow, yrow, j);
        sg += gj;
        sgx += gj * (static_cast<P>(xrow[j]) - mean);
      }
      total[0] += static_cast<double>(sg);
      total[1] += static_cast<double>(sgx);
    }
  }
  return total;
}

// y = relu?(x * a + b + r?) over one row (kResidual: r read).
template <bool kResidual, bool kRelu, typename T, typename P>
void row_affine(T* __restrict y, const T* __restrict x, const T* __restrict r, std::int64_t s, P a, P b) {
#pragma omp simd
  for (std::int64_t i = 0; i < s; ++i) {
    P v = static_cast<P>(x[i]) * a + b;
    // bn(x) rounded to T first, as the unfused ops store it (norm.kern too).
    if constexpr (kResidual) v = static_cast<P>(static_cast<T>(v)) + static_cast<P>(r[i]);
    if constexpr (kRelu) v = v < P(0) ? P(0) : v;
    y[i] = static_cast<T>(v);
  }
}

// dx = g * a - (x - mean) * k - c over one row, g masked where kMask; dr
// (when not null) receives the masked g, dx likewise.
template <bool kMask, typename T, typename P>
void row_input_gradient(T* __restrict dx, T* __restrict dr, const T* __restrict g, const T* __restrict x,
                        const T* __restrict y, std::int64_t s, P mean, P a, P k, P c) {
  if (dr != nullptr) {
#pragma omp simd
    for (std::int64_t i = 0; i < s; ++i) dr[i] = static_cast<T>(masked<kMask, T, P>(g, y, i));
  }
  if (dx == nullptr) return;
#pragma omp simd
  for (std::int64_t i = 0; i < s; ++i)
    dx[i] = static_cast<T>(masked<kMask, T, P>(g, y, i) * a - (static_cast<P>(x[i]) - mean) * k - c);
}

// Channels per thread: a channel of N * S elements costs about three
// elementwise passes, so the elementwise grain in elements, over that.
std::int64_t channel_grain(const BatchNormArgs& a) {
  const std::int64_t per_channel = std::max<std::int64_t>(1, a.n * a.s);
  return std::max<std::int64_t>(1, kParallelGrain / (3 * per_channel));
}

template <typename T, typename P>
void batch_norm_typed(const BatchNormArgs& a) {
  const T* x = elements<const T>(a.x);
  T* y = elements<T>(a.y);
  const T* residual = elements<const T>(a.residual);
  P* mean = elements<P>(a.mean);
  P* var = elements<P>(a.var);
  P* invstd = elements<P>(a.invstd);
  const P* weight = elements<const P>(a.weight);
  const P* bias = elements<const P>(a.bias);
  P* running_mean = elements<P>(a.running_mean);
  P* running_var = elements<P>(a.running_var);
  const P keep = static_cast<P>(1 - a.momentum), mean_factor = static_cast<P>(a.momentum),
          var_factor = static_cast<P>(a.momentum * a.unbias);
  const std::int64_t n = a.n, c = a.c, s = a.s;
  const double count = static_cast<double>(n * s);
  parallel_for(c, channel_grain(a), [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t ch = begin; ch < end; ++ch) {
      const ChannelRows rows{n, c, ch, s};
      P m, inv;
      if (a.training) {
        m = static_cast<P>(sum_or_squares<T, P>(x, rows, nullptr) / count);
        const double squares = sum_or_squares<T, P>(x, rows, &m);
        const double v = squares / count;
        inv = static_cast<P>(1.0 / std::sqrt(v + a.eps));
        mean[ch] = m;
        if (var) var[ch] = static_cast<P>(v);
        invstd[ch] = inv;
        // As the composite: running * (1 - momentum) + stat * factor.
        if (running_mean) running_mean[ch] = running_mean[ch] * keep + m * mean_factor;
        if (running_var) running_var[ch] = running_var[ch] * keep + static_cast<P>(v) * var_factor;
      } else {
        m = mean[ch];
        inv = invstd[ch];
      }
      const P scale = weight ? inv * weight[ch] : inv;
      const P shift = (bias ? bias[ch] : P(0)) - m * scale;
      for (std::int64_t i = 0; i < n; ++i) {
        const std::int64_t row = rows.row(i);
        if (residual != nullptr && a.relu)
          row_affine<true, true>(y + row, x + row, residual + row, s, scale, shift);
        else if (residual != nullptr)
          row_affine<true, false>(y + row, x + row, residual + row, s, scale, shift);
        else if (a.relu)
          row_affine<false, true>(y + row, x + row, x + row, s, scale, shift);
        else
          row_affine<false, false>(y + row, x + row, x + row, s, scale, shift);
      }
    }
  });
}

template <bool kMask, typename T, typename P>
void batch_norm_backward_typed(const BatchNormArgs& a) {
  const T* g = elements<const T>(a.grad);
  const T* x = elements<const T>(a.x);
  const T* y = elements<const T>(a.y);
  T* dr = elements<T>(a.grad_residual);
  const P* mean = elements<const P>(a.mean);
  const P* invstd = elements<const P>(a.invstd);
  const P* weight = elements<const P>(a.weight);
  T* dx = elements<T>(a.grad_x);
  P* sum_g = elements<P>(a.sum_g);
  P* sum_gxc = elements<P>(a.sum_gxc);
  P* grad_weight = elements<P>(a.grad_weight);
  const std::int64_t n = a.n, c = a.c, s = a.s;
  const double count = static_cast<double>(n * s);
  parallel_for(c, channel_grain(a), [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t ch = begin; ch < end; ++ch) {
      const ChannelRows rows{n, c, ch, s};
      const P m = mean[ch], inv = invstd[ch];
      const auto sums = gradient_sums<kMask, T, P>(g, x, y, rows, m);
      sum_g[ch] = static_cast<P>(sums[0]);
      if (sum_gxc) sum_gxc[ch] = static_cast<P>(sums[1]);
      if (grad_weight) grad_weight[ch] = static_cast<P>(sums[1]) * inv;
      if (dx == nullptr && dr == nullptr) continue;
      const P scale = weight ? inv * weight[ch] : inv;
      P k = 0, shift = 0;
      if (a.training) {
        k = static_cast<P>(static_cast<double>(scale) * static_cast<double>(inv) * static_cast<double>(inv) * sums[1] /
                           count);
        shift = static_cast<P>(static_cast<double>(scale) * sums[0] / count);
      }
      for (std::int64_t i = 0; i < n; ++i) {
        const std::int64_t row = rows.row(i);
        row_input_gradient<kMask, T, P>(dx ? dx + row : nullptr, dr ? dr + row : nullptr, g + row, x + row,
                                        kMask ? y + row : nullptr, s, m, scale, k, shift);
      }
    }
  });
}

// The dtype picks T, the stored type, and P, the computed one (f32 for the
// 16-bit floats, as batch norm's per-channel operands are).
template <template <typename, typename> class F, class Args>
void by_dtype(const Args& a) {
  switch (a.dtype) {
    case DType::F64:
      return F<double, double>::run(a);
    case DType::F32:
      return F<float, float>::run(a);
    case DType::F16:
      return F<detail::Half, float>::run(a);
    case DType::BF16:
      return F<detail::BFloat16, float>::run(a);
    default:
      ANVIL_ASSERT(false, "batch_norm, softmax: a floating dtype expected, got ", a.dtype);
  }
}
template <typename T, typename P>
struct Forward {
  static void run(const BatchNormArgs& a) { batch_norm_typed<T, P>(a); }
};
template <typename T, typename P>
struct Backward {
  static void run(const BatchNormArgs& a) {
    if (a.relu)
      batch_norm_backward_typed<true, T, P>(a);
    else
      batch_norm_backward_typed<false, T, P>(a);
  }
};

// Note [Fused softmax] (backend.h): a thread owns whole rows; each row is
// read three times (max, sum, store), from the cache after the first. T is
// stored, P computed in (f32 for the 16-bit floats).
template <typename T>
T* row_of(const detail::KernelOperand& o, std::int64_t r, std::int64_t len) {
  return static_cast<T*>(o.data) + o.offset + r * len;
}
std::int64_t softmax_grain(std::int64_t len) { return std::max<std::int64_t>(1, kParallelGrainVectorMath / len); }

// Σ term(i) over [0, len) in an order the source fixes: element i in
// running sum i % 8, the eight added pairwise at the end, vectorised or not.
// Under `omp simd reduction` the order was the compiler's: the avx2 build
// summed softmax's exponentials one by one (that loop did not vectorise
// there), the avx512 build in 8 lanes, 1 ulp apart (test_cpu_isa).
template <typename P, typename Term>
P ordered_sum(std::int64_t len, Term term) {
  P part[8] = {};
  const std::int64_t body = len / 8 * 8;
  for (std::int64_t i = 0; i < body; i += 8) {
#pragma omp simd
    for (int k = 0; k < 8; ++k) part[k] += term(i + k);
  }
  for (std::int64_t i = body; i < len; ++i) part[i - body] += term(i);
  return ((part[0] + part[4]) + (part[2] + part[6])) + ((part[1] + part[5]) + (part[3] + part[7]));
}

// Note [Softmax over short rows]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// The forward over rows shorter than kShortSoftmaxRow (10 classes, 28
// characters) works kRowLanes rows at a time, one per vector lane: the block
// is transposed into a [len][kRowLanes] buffer, so max, exp, sums and stores
// run across rows. Row by row, the elements past a row's last 8 took scalar
// exps, and its max and sum a horizontal step each: log_softmax [256, 10]
// 13.4 -> 4.1 us on one thread, [1120, 28] 60 -> 38 (16 and 24: even; 32: 35
// against 45, so it stays row by row). The backward stays row by row: the
// transposes cost it 2x at 17-32. A row's sum keeps ordered_sum's order, so
// both paths and every ISA build give the same bits (test_softmax).
constexpr std::int64_t kShortSoftmaxRow = 32;
constexpr int kRowLanes = 16;

template <typename P>
using RowBlock = P[kShortSoftmaxRow][kRowLanes];

// Rows [r, r + nb) of `o` transposed into `v`; lanes from nb on are 0.
template <typename T, typename P>
void load_rows(const detail::KernelOperand& o, std::int64_t r, int nb, std::int64_t len, RowBlock<P>& v) {
  const T* src = row_of<const T>(o, r, len);
  for (std::int64_t i = 0; i < len; ++i)
    for (int k = nb; k < kRowLanes; ++k) v[i][k] = P(0);
  for (int k = 0; k < nb; ++k)
    for (std::int64_t i = 0; i < len; ++i) v[i][k] = static_cast<P>(src[k * len + i]);
}

template <typename T, typename P>
void store_rows(const RowBlock<P>& v, std::int64_t r, int nb, std::int64_t len, const detail::KernelOperand& o) {
  T* dst = row_of<T>(o, r, len);
  for (int k = 0; k < nb; ++k)
    for (std::int64_t i = 0; i < len; ++i) dst[k * len + i] = static_cast<T>(v[i][k]);
}

// Each lane's Σ term(i, k) over i < len, in ordered_sum's order.
template <typename P, typename Term>
void ordered_sums(std::int64_t len, Term term, P (&sum)[kRowLanes]) {
  P part[8][kRowLanes] = {};
  for (std::int64_t i = 0; i < len; ++i) {
    P* p = part[i % 8];
#pragma omp simd
    for (int k = 0; k < kRowLanes; ++k) p[k] += term(i, k);
  }
#pragma omp simd
  for (int k = 0; k < kRowLanes; ++k)
    sum[k] = ((part[0][k] + part[4][k]) + (part[2][k] + part[6][k])) +
             ((part[1][k] + part[5][k]) + (part[3][k] + part[7][k]));
}

template <typename T, typename P>
void softmax_short_rows(const detail::SoftmaxArgs& a) {
  const std::int64_t len = a.len;
  const auto block = [&](std::int64_t r, int nb) {
    alignas(64) RowBlock<P> v;
    load_rows<T>(a.x, r, nb, len, v);
    alignas(64) P m[kRowLanes], sum[kRowLanes];
    std::fill(m, m + kRowLanes, -std::numeric_limits<P>::infinity());
    for (std::int64_t i = 0; i < len; ++i) {
#pragma omp simd
      for (int k = 0; k < kRowLanes; ++k) m[k] = std::max(m[k], v[i][k]);
    }
    if (a.log) {
      ordered_sums<P>(
          len, [&](std::int64_t i, int k) { return scalar::anvil_exp(v[i][k] - m[k]); }, sum);
      for (int k = 0; k < kRowLanes; ++k) m[k] += std::log(sum[k]);  // the shift
    } else {
      for (std::int64_t i = 0; i < len; ++i) {
#pragma omp simd
        for (int k = 0; k < kRowLanes; ++k) v[i][k] = scalar::anvil_exp(v[i][k] - m[k]);
      }
      ordered_sums<P>(
          len, [&](std::int64_t i, int k) { return v[i][k]; }, sum);
#pragma omp simd
      for (int k = 0; k < kRowLanes; ++k) sum[k] = P(1) / sum[k];
    }
    for (std::int64_t i = 0; i < len; ++i) {
      if (a.log) {
#pragma omp simd
        for (int k = 0; k < kRowLanes; ++k) v[i][k] -= m[k];
      } else {
#pragma omp simd
        for (int k = 0; k < kRowLanes; ++k) v[i][k] *= sum[k];
      }
    }
    store_rows<T>(v, r, nb, len, a.y);
  };
  const std::int64_t blocks = (a.rows + kRowLanes - 1) / kRowLanes;
  parallel_for(blocks, std::max<std::int64_t>(1, softmax_grain(len) / kRowLanes),
               [&](std::int64_t begin, std::int64_t end) {
                 for (std::int64_t b = begin; b < end; ++b)
                   block(b * kRowLanes, static_cast<int>(std::min<std::int64_t>(kRowLanes, a.rows - b * kRowLanes)));
               });
}

template <typename T, typename P>
struct SoftmaxForward {
  static void run(const detail::SoftmaxArgs& a) {
    const std::int64_t len = a.len;
    if (len < kShortSoftmaxRow) return softmax_short_rows<T, P>(a);
    parallel_for(a.rows, softmax_grain(len), [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t r = begin; r < end; ++r) {
        const T* __restrict x = row_of<const T>(a.x, r, len);
        T* __restrict y = row_of<T>(a.y, r, len);
        // NaN, +inf and all -inf need no test: exp(x - m) is NaN for some x
        // there, and so is the sum and every output.
        P m = -std::numeric_limits<P>::infinity();
#pragma omp simd reduction(max : m)
        for (std::int64_t i = 0; i < len; ++i) m = std::max(m, static_cast<P>(x[i]));
        const P sum = ordered_sum<P>(len, [&](std::int64_t i) { return scalar::anvil_exp(static_cast<P>(x[i]) - m); });
        if (a.log) {
          const P shift = m + std::log(sum);
#pragma omp simd
          for (std::int64_t i = 0; i < len; ++i) y[i] = static_cast<T>(static_cast<P>(x[i]) - shift);
        } else {
          const P inv = P(1) / sum;
#pragma omp simd
          for (std::int64_t i = 0; i < len; ++i)
            y[i] = static_cast<T>(scalar::anvil_exp(static_cast<P>(x[i]) - m) * inv);
        }
      }
    });
  }
};

template <typename T, typename P>
struct SoftmaxBackward {
  static void run(const detail::SoftmaxArgs& a) {
    const std::int64_t len = a.len;
    parallel_for(a.rows, softmax_grain(len), [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t r = begin; r < end; ++r) {
        const T* __restrict y = row_of<const T>(a.y, r, len);
        const T* __restrict g = row_of<const T>(a.grad, r, len);
        T* __restrict dx = row_of<T>(a.grad_x, r, len);
        if (a.log) {
          const P sum = ordered_sum<P>(len, [&](std::int64_t i) { return static_cast<P>(g[i]); });
#pragma omp simd
          for (std::int64_t i = 0; i < len; ++i)
            dx[i] = static_cast<T>(static_cast<P>(g[i]) - scalar::anvil_exp(static_cast<P>(y[i])) * sum);
        } else {
          const P sum =
              ordered_sum<P>(len, [&](std::int64_t i) { return static_cast<P>(g[i]) * static_cast<P>(y[i]); });
#pragma omp simd
          for (std::int64_t i = 0; i < len; ++i)
            dx[i] = static_cast<T>(static_cast<P>(y[i]) * (static_cast<P>(g[i]) - sum));
        }
      }
    });
  }
};

// Note [Fused layer norm] (backend.h): a thread owns whole rows, each read
// twice for its statistics (ordered_sum's fixed order) and once for y.
template <typename T>
void layer_norm_typed(const detail::LayerNormArgs& a) {
  const std::int64_t len = a.len;
  const T *w = elements<const T>(a.weight), *b = elements<const T>(a.bias);
  T *mean_out = elements<T>(a.mean), *invstd_out = elements<T>(a.invstd);
  parallel_for(a.rows, softmax_grain(len), [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t r = begin; r < end; ++r) {
      const T* __restrict x = row_of<const T>(a.x, r, len);
      T* __restrict y = row_of<T>(a.y, r, len);
      const T mean = ordered_sum<T>(len, [&](std::int64_t i) { return x[i]; }) / static_cast<T>(len);
      const T var =
          ordered_sum<T>(len, [&](std::int64_t i) { return (x[i] - mean) * (x[i] - mean); }) / static_cast<T>(len);
      const T invstd = T(1) / std::sqrt(var + static_cast<T>(a.eps));
      mean_out[r] = mean;
      invstd_out[r] = invstd;
#pragma omp simd
      for (std::int64_t i = 0; i < len; ++i) {
        const T xhat = (x[i] - mean) * invstd;
        y[i] = (w != nullptr ? xhat * w[i] : xhat) + (b != nullptr ? b[i] : T(0));
      }
    }
  });
}

// The weight's and bias's gradients are sums over rows: each block of rows
// (a partition fixed by `rows` alone) adds its rows in order into its own
// partial sums, and the blocks are added in order, so the bits do not
// depend on the thread count.
template <typename T>
void layer_norm_backward_typed(const detail::LayerNormArgs& a) {
  const std::int64_t len = a.len, rows = a.rows;
  const T *w = elements<const T>(a.weight), *mean = elements<const T>(a.mean), *invstd = elements<const T>(a.invstd);
  const bool want_x = a.grad_x.data != nullptr,
             want_sums = a.grad_weight.data != nullptr || a.grad_bias.data != nullptr;
  constexpr std::int64_t kMaxBlocks = 256, kMinBlockRows = 64;
  const std::int64_t blocks = std::clamp<std::int64_t>((rows + kMinBlockRows - 1) / kMinBlockRows, 1, kMaxBlocks);
  const std::int64_t block_rows = (rows + blocks - 1) / blocks;
  std::vector<T> partial(want_sums ? static_cast<std::size_t>(blocks * 2 * len) : 0);  // [block][weight | bias][len]
  const T inv_len = T(1) / static_cast<T>(len);
  parallel_for(blocks, std::max<std::int64_t>(1, softmax_grain(len) / block_rows),
               [&](std::int64_t b0, std::int64_t b1) {
                 for (std::int64_t blk = b0; blk < b1; ++blk) {
                   T* __restrict pw = want_sums ? partial.data() + blk * 2 * len : nullptr;
                   T* __restrict pb = want_sums ? pw + len : nullptr;
                   for (std::int64_t r = blk * block_rows; r < std::min(rows, (blk + 1) * block_rows); ++r) {
                     const T* __restrict x = row_of<const T>(a.x, r, len);
                     const T* __restrict g = row_of<const T>(a.grad, r, len);
                     const T m = mean[r], s = invstd[r];
                     if (want_x) {
                       const auto gxhat = [&](std::int64_t i) { return w != nullptr ? g[i] * w[i] : g[i]; };
                       const T mean_g = ordered_sum<T>(len, gxhat) * inv_len;
                       const T mean_gx =
                           ordered_sum<T>(len, [&](std::int64_t i) { return gxhat(i) * ((x[i] - m) * s); }) * inv_len;
                       T* __restrict dx = row_of<T>(a.grad_x, r, len);
#pragma omp simd
                       for (std::int64_t i = 0; i < len; ++i)
                         dx[i] = s * (gxhat(i) - mean_g - (x[i] - m) * s * mean_gx);
                     }
                     if (want_sums) {
#pragma omp simd
                       for (std::int64_t i = 0; i < len; ++i) {
                         pw[i] += g[i] * ((x[i] - m) * s);
                         pb[i] += g[i];
                       }
                     }
                   }
                 }
               });
  if (!want_sums) return;
  T *gw = elements<T>(a.grad_weight), *gb = elements<T>(a.grad_bias);
  parallel_for(len, std::max<std::int64_t>(1, kParallelGrain / blocks), [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t i = begin; i < end; ++i) {
      T sw = 0, sb = 0;
      for (std::int64_t blk = 0; blk < blocks; ++blk) {
        sw += partial[static_cast<std::size_t>(blk * 2 * len + i)];
        sb += partial[static_cast<std::size_t>(blk * 2 * len + len + i)];
      }
      if (gw != nullptr) gw[i] = sw;
      if (gb != nullptr) gb[i] = sb;
    }
  });
}

}  // namespace

void layer_norm(const detail::LayerNormArgs& a) {
  if (a.rows <= 0 || a.len <= 0) return;
  a.dtype == DType::F64 ? layer_norm_typed<double>(a) : layer_norm_typed<float>(a);
}
void layer_norm_backward(const detail::LayerNormArgs& a) {
  if (a.rows <= 0 || a.len <= 0) return;
  a.dtype == DType::F64 ? layer_norm_backward_typed<double>(a) : layer_norm_backward_typed<float>(a);
}
void batch_norm(const BatchNormArgs& a) { by_dtype<Forward>(a); }
void batch_norm_backward(const BatchNormArgs& a) { by_dtype<Backward>(a); }
void softmax(const detail::SoftmaxArgs& a) {
  if (a.rows > 0 && a.len > 0) by_dtype<SoftmaxForward>(a);
}
void softmax_backward(const detail::SoftmaxArgs& a) {
  if (a.rows > 0 && a.len > 0) by_dtype<SoftmaxBackward>(a);
}

}  // namespace ANVIL_CPU_ISA
}  // namespace anvil::cpu_backend
