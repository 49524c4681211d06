// GEMM: OpenBLAS for f32/f64 (parallel inside, on anvil's one pool, on as
// many threads as the product's size repays), plain loops for integer dtypes.
#include <cblas.h>
#include <omp.h>

#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/dispatch.h"
#include "backends/cpu/threads.h"

namespace anvil::cpu_backend {

using detail::GemmArgs;

namespace {

template <typename T>
void blas_gemm(const GemmArgs& g, std::int64_t b) {
  const T* a = static_cast<const T*>(g.a.data) + g.a.offset + b * g.a.batch_stride;
  const T* bm = static_cast<const T*>(g.b.data) + g.b.offset + b * g.b.batch_stride;
  T* c = static_cast<T*>(g.c.data) + g.c.offset + b * g.c.batch_stride;
  const auto ta = g.a.trans ? CblasTrans : CblasNoTrans;
  const auto tb = g.b.trans ? CblasTrans : CblasNoTrans;
  const blasint m = static_cast<blasint>(g.m), n = static_cast<blasint>(g.n), k = static_cast<blasint>(g.k);
  const blasint lda = static_cast<blasint>(g.a.ld), ldb = static_cast<blasint>(g.b.ld),
                ldc = static_cast<blasint>(g.c.ld);
  if constexpr (std::is_same_v<T, float>)
    cblas_sgemm(CblasRowMajor, ta, tb, m, n, k, static_cast<float>(g.alpha), a, lda, bm, ldb,
                static_cast<float>(g.beta), c, ldc);
  else
    cblas_dgemm(CblasRowMajor, ta, tb, m, n, k, g.alpha, a, lda, bm, ldb, g.beta, c, ldc);
}

template <typename T>
void loop_gemm(const GemmArgs& g, std::int64_t b) {
  const T* a = static_cast<const T*>(g.a.data) + g.a.offset + b * g.a.batch_stride;
  const T* bm = static_cast<const T*>(g.b.data) + g.b.offset + b * g.b.batch_stride;
  T* c = static_cast<T*>(g.c.data) + g.c.offset + b * g.c.batch_stride;
  auto at = [&](std::int64_t i, std::int64_t p) { return g.a.trans ? a[p * g.a.ld + i] : a[i * g.a.ld + p]; };
  auto bt = [&](std::int64_t p, std::int64_t j) { return g.b.trans ? bm[j * g.b.ld + p] : bm[p * g.b.ld + j]; };
  for (std::int64_t i = 0; i < g.m; ++i)
    for (std::int64_t j = 0; j < g.n; ++j) {
      T acc = 0;
      for (std::int64_t p = 0; p < g.k; ++p) acc = static_cast<T>(acc + at(i, p) * bt(p, j));
      T& dst = c[i * g.c.ld + j];
      dst = static_cast<T>(static_cast<T>(g.alpha) * acc + (g.beta == 0 ? T(0) : static_cast<T>(g.beta) * dst));
    }
}

// f16 and bf16: each matrix widened to f32, one sgemm (f32 accumulation),
// the result rounded once. Debian's OpenBLAS 0.3.21 declares cblas_sbgemm in
// cblas.h but its library is built without BUILD_BFLOAT16 and does not export
// it, so bf16 takes this path too.
template <typename T>
void half_gemm(const GemmArgs& g, std::int64_t b, std::vector<float>& fa, std::vector<float>& fb,
               std::vector<float>& fc) {
  const T* a = static_cast<const T*>(g.a.data) + g.a.offset + b * g.a.batch_stride;
  const T* bm = static_cast<const T*>(g.b.data) + g.b.offset + b * g.b.batch_stride;
  T* c = static_cast<T*>(g.c.data) + g.c.offset + b * g.c.batch_stride;
  // Each operand packed densely in its stored orientation (rows x cols, ld),
  // a row at a time through the bulk conversions (core/half.h).
  auto widen = [](const T* src, std::int64_t rows, std::int64_t cols, std::int64_t ld, std::vector<float>& dst) {
    dst.resize(static_cast<std::size_t>(rows * cols));
    for (std::int64_t r = 0; r < rows; ++r) detail::widen_to_f32(src + r * ld, dst.data() + r * cols, cols);
  };
  const std::int64_t a_rows = g.a.trans ? g.k : g.m, a_cols = g.a.trans ? g.m : g.k;
  const std::int64_t b_rows = g.b.trans ? g.n : g.k, b_cols = g.b.trans ? g.k : g.n;
  widen(a, a_rows, a_cols, g.a.ld, fa);
  widen(bm, b_rows, b_cols, g.b.ld, fb);
  fc.assign(static_cast<std::size_t>(g.m * g.n), 0.0f);
  if (g.beta != 0) widen(c, g.m, g.n, g.c.ld, fc);
  cblas_sgemm(CblasRowMajor, g.a.trans ? CblasTrans : CblasNoTrans, g.b.trans ? CblasTrans : CblasNoTrans,
              static_cast<blasint>(g.m), static_cast<blasint>(g.n), static_cast<blasint>(g.k),
              static_cast<float>(g.alpha), fa.data(), static_cast<blasint>(std::max<std::int64_t>(1, a_cols)),
              fb.data(), static_cast<blasint>(std::max<std::int64_t>(1, b_cols)), static_cast<float>(g.beta), fc.data(),
              static_cast<blasint>(std::max<std::int64_t>(1, g.n)));
  for (std::int64_t i = 0; i < g.m; ++i) detail::narrow_from_f32(fc.data() + i * g.n, c + i * g.c.ld, g.n);
}

template <typename T>
void gemm_typed(const GemmArgs& g) {
  // One matrix at a time, each parallel inside OpenBLAS where it is large
  // enough. Never call OpenBLAS from several threads at once: its OpenMP
  // build serialises concurrent calls on a lock, and a batch of 32x32
  // products run "in parallel" that way took 50x longer than in sequence.
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    const BlasThreads threads(gemm_threads(g.m, g.n, g.k, omp_get_max_threads()));
    for (std::int64_t i = 0; i < g.batch; ++i) blas_gemm<T>(g, i);
  } else if constexpr (detail::is_half_v<T>) {
    const BlasThreads threads(gemm_threads(g.m, g.n, g.k, omp_get_max_threads()));
    std::vector<float> fa, fb, fc;
    for (std::int64_t i = 0; i < g.batch; ++i) half_gemm<T>(g, i, fa, fb, fc);
  } else {
    for (std::int64_t i = 0; i < g.batch; ++i) loop_gemm<T>(g, i);
  }
}

}  // namespace

void CpuBackend::gemm(int, const GemmArgs& g) { ANVIL_DISPATCH(g.dtype, T, gemm_typed<T>(g)); }

}  // namespace anvil::cpu_backend
