// Fused batch norm (backend.h, Note [Fused batch norm]): one parallel pass
// over the channels. A thread owns whole channels, so a channel's N rows of
// S elements are read from memory once for its sums and again from the
// cache (a channel of ResNet-18's widest layer, [32, 64, 28, 28], is 98 KiB)
// for its output, and no per-channel partial results cross threads.
#include <algorithm>
#include <array>
#include <cmath>

#include "anvil/error.h"
#include "backends/cpu/isa.h"
#include "backends/cpu/loops.h"
#include "backends/cpu/parallel.h"

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

template <typename T>
double sum_or_squares(const T* __restrict x, const ChannelRows& r, const T* m) {
  double total = 0;
  if (r.s < kShortRow) {
    double partial[kShortRow] = {};
    for (std::int64_t i = 0; i < r.n; ++i) {
      const T* __restrict row = x + r.row(i);
      if (m == nullptr) {
#pragma omp simd
        for (std::int64_t j = 0; j < r.s; ++j) partial[j] += static_cast<double>(row[j]);
      } else {
        const T mean = *m;
#pragma omp simd
        for (std::int64_t j = 0; j < r.s; ++j) {
          const T d = row[j] - mean;
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
      T acc = 0;
      if (m == nullptr) {
#pragma omp simd reduction(+ : acc)
        for (std::int64_t j = j0; j < j1; ++j) acc += row[j];
      } else {
        const T mean = *m;
#pragma omp simd reduction(+ : acc)
        for (std::int64_t j = j0; j < j1; ++j) {
          const T d = row[j] - mean;
          acc += d * d;
        }
      }
      total += static_cast<double>(acc);
    }
  }
  return total;
}

template <typename T>
std::array<double, 2> gradient_sums(const T* __restrict g, const T* __restrict x, const ChannelRows& r, T mean) {
  std::array<double, 2> total{};
  if (r.s < kShortRow) {
    double pg[kShortRow] = {}, pgx[kShortRow] = {};
    for (std::int64_t i = 0; i < r.n; ++i) {
      const T* __restrict grow = g + r.row(i);
      const T* __restrict xrow = x + r.row(i);
#pragma omp simd
      for (std::int64_t j = 0; j < r.s; ++j) {
        pg[j] += static_cast<double>(grow[j]);
        pgx[j] += static_cast<double>(grow[j] * (xrow[j] - mean));
      }
    }
    for (std::int64_t j = 0; j < r.s; ++j) total[0] += pg[j], total[1] += pgx[j];
    return total;
  }
  for (std::int64_t i = 0; i < r.n; ++i) {
    const T* __restrict grow = g + r.row(i);
    const T* __restrict xrow = x + r.row(i);
    for (std::int64_t j0 = 0; j0 < r.s; j0 += kBlock) {
      const std::int64_t j1 = std::min(r.s, j0 + kBlock);
      T sg = 0, sgx = 0;
#pragma omp simd reduction(+ : sg, sgx)
      for (std::int64_t j = j0; j < j1; ++j) {
        sg += grow[j];
        sgx += grow[j] * (xrow[j] - mean);
      }
      total[0] += static_cast<double>(sg);
      total[1] += static_cast<double>(sgx);
    }
  }
  return total;
}

template <typename T>
void row_affine(T* __restrict y, const T* __restrict x, std::int64_t s, T a, T b) {
#pragma omp simd
  for (std::int64_t i = 0; i < s; ++i) y[i] = x[i] * a + b;
}

// dx = g * a - (x - mean) * k - c over one row.
template <typename T>
void row_input_gradient(T* __restrict dx, const T* __restrict g, const T* __restrict x, std::int64_t s, T mean, T a,
                        T k, T c) {
#pragma omp simd
  for (std::int64_t i = 0; i < s; ++i) dx[i] = g[i] * a - (x[i] - mean) * k - c;
}

// Channels per thread: a channel of N * S elements costs about three
// elementwise passes, so the elementwise grain in elements, over that.
std::int64_t channel_grain(const BatchNormArgs& a) {
  const std::int64_t per_channel = std::max<std::int64_t>(1, a.n * a.s);
  return std::max<std::int64_t>(1, kParallelGrain / (3 * per_channel));
}

template <typename T>
void batch_norm_typed(const BatchNormArgs& a) {
  const T* x = elements<const T>(a.x);
  T* y = elements<T>(a.y);
  T* mean = elements<T>(a.mean);
  T* var = elements<T>(a.var);
  T* invstd = elements<T>(a.invstd);
  const T* weight = elements<const T>(a.weight);
  const T* bias = elements<const T>(a.bias);
  const std::int64_t n = a.n, c = a.c, s = a.s;
  const double count = static_cast<double>(n * s);
  parallel_for(c, channel_grain(a), [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t ch = begin; ch < end; ++ch) {
      const ChannelRows rows{n, c, ch, s};
      T m, inv;
      if (a.training) {
        m = static_cast<T>(sum_or_squares<T>(x, rows, nullptr) / count);
        const double squares = sum_or_squares<T>(x, rows, &m);
        const double v = squares / count;
        inv = static_cast<T>(1.0 / std::sqrt(v + a.eps));
        mean[ch] = m;
        var[ch] = static_cast<T>(v);
        invstd[ch] = inv;
      } else {
        m = mean[ch];
        inv = invstd[ch];
      }
      const T scale = weight ? inv * weight[ch] : inv;
      const T shift = (bias ? bias[ch] : T(0)) - m * scale;
      for (std::int64_t i = 0; i < n; ++i) row_affine(y + rows.row(i), x + rows.row(i), s, scale, shift);
    }
  });
}

template <typename T>
void batch_norm_backward_typed(const BatchNormArgs& a) {
  const T* g = elements<const T>(a.grad);
  const T* x = elements<const T>(a.x);
  const T* mean = elements<const T>(a.mean);
  const T* invstd = elements<const T>(a.invstd);
  const T* weight = elements<const T>(a.weight);
  T* dx = elements<T>(a.grad_x);
  T* sum_g = elements<T>(a.sum_g);
  T* sum_gxc = elements<T>(a.sum_gxc);
  const std::int64_t n = a.n, c = a.c, s = a.s;
  const double count = static_cast<double>(n * s);
  parallel_for(c, channel_grain(a), [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t ch = begin; ch < end; ++ch) {
      const ChannelRows rows{n, c, ch, s};
      const T m = mean[ch], inv = invstd[ch];
      const auto sums = gradient_sums<T>(g, x, rows, m);
      sum_g[ch] = static_cast<T>(sums[0]);
      sum_gxc[ch] = static_cast<T>(sums[1]);
      if (dx == nullptr) continue;
      const T scale = weight ? inv * weight[ch] : inv;
      T k = 0, shift = 0;
      if (a.training) {
        k = static_cast<T>(static_cast<double>(scale) * static_cast<double>(inv) * static_cast<double>(inv) * sums[1] /
                           count);
        shift = static_cast<T>(static_cast<double>(scale) * sums[0] / count);
      }
      for (std::int64_t i = 0; i < n; ++i) {
        const std::int64_t row = rows.row(i);
        row_input_gradient(dx + row, g + row, x + row, s, m, scale, k, shift);
      }
    }
  });
}

// supports_fused() offers f32 and f64 only.
bool is_f64(const BatchNormArgs& a) {
  ANVIL_ASSERT(a.dtype == DType::F32 || a.dtype == DType::F64, "batch_norm: f32 or f64 expected, got ", a.dtype);
  return a.dtype == DType::F64;
}

}  // namespace

void batch_norm(const BatchNormArgs& a) { is_f64(a) ? batch_norm_typed<double>(a) : batch_norm_typed<float>(a); }
void batch_norm_backward(const BatchNormArgs& a) {
  is_f64(a) ? batch_norm_backward_typed<double>(a) : batch_norm_backward_typed<float>(a);
}

}  // namespace ANVIL_CPU_ISA
}  // namespace anvil::cpu_backend
