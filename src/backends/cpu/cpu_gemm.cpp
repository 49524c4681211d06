// GEMM: libxsmm's JIT kernels for small f32/f64 products; oneDNN for
// larger f32 ones on CPUs with AVX-512, for batches of f32 products each too
// small to thread on the others, and for bf16 where the CPU computes in it
// (cpu_gemm_dnnl.cpp); OpenBLAS for the rest (parallel inside, on anvil's
// one pool, on as many threads as the product's size repays); plain loops
// for integer dtypes.
#include <cblas.h>
#include <libxsmm.h>
#include <omp.h>

#include <type_traits>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/cpu_gemm_dnnl.h"
#include "backends/cpu/dtype_switch.h"
#include "backends/cpu/parallel.h"
#include "backends/cpu/threads.h"

// Note [libxsmm for small GEMMs]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A product goes to libxsmm when m·n·k ≤ kXsmmMaxWork (80³), or when neither
// operand is transposed and k ≤ 128, m·n·k ≤ 100³; and only when its output
// rows (n) are a multiple of an AVX2 register's lanes or at least 8 registers
// long, alpha is 1 and beta 0 or 1, B is not transposed (1.17's JIT has no
// TRANS_A) and libxsmm dispatches a kernel; else oneDNN or OpenBLAS. Why:
// measured by bench_gemm_small, libxsmm takes 0.08-0.5x OpenBLAS's time up to
// 32³ but loses beyond ~80³ and on short odd rows (docs/measurements.md has
// the tables). Dispatch is a registry lookup (~30 ns), so kernels are not
// cached here. A batch runs one kernel call per item, over anvil's pool when
// the work repays threads (gemm_threads). BLIS wins some mid sizes but exports
// OpenBLAS's symbols (Note [One process per BLAS]), so it is not used.

namespace anvil::cpu_backend {

using detail::GemmArgs;

namespace {

template <typename T>
void blas_gemm(const GemmArgs& g, std::int64_t b) {
  const T* a = static_cast<const T*>(g.a.data) + detail::gemm_batch_offset(g, g.a, b);
  const T* bm = static_cast<const T*>(g.b.data) + detail::gemm_batch_offset(g, g.b, b);
  T* c = static_cast<T*>(g.c.data) + detail::gemm_batch_offset(g, g.c, b);
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

// Products up to this m·n·k go to libxsmm (Note [libxsmm for small GEMMs]);
// untransposed ones with a short k up to the larger bound.
constexpr std::int64_t kXsmmMaxWork = std::int64_t{80} * 80 * 80;
constexpr std::int64_t kXsmmMaxWorkNN = std::int64_t{100} * 100 * 100;
constexpr std::int64_t kXsmmMaxKNN = 128;

template <typename T>
using XsmmKernel = std::conditional_t<std::is_same_v<T, float>, libxsmm_smmfunction, libxsmm_dmmfunction>;

// libxsmm's kernel for row-major C (m x n, ldc) = op(A) (m x k) · B (k x n),
// beta 0 or 1, or null. libxsmm is column-major: row-major C = op(A)·B is
// column-major Cᵀ = Bᵀ·op(A)ᵀ, so B's buffer is libxsmm's A, A's its B, and
// row-major A transposed is libxsmm's TRANS_B.
template <typename T>
XsmmKernel<T> xsmm_dispatch(std::int64_t m, std::int64_t n, std::int64_t k, std::int64_t lda, std::int64_t ldb,
                            std::int64_t ldc, bool a_trans, bool beta_one) {
  const auto xm = static_cast<libxsmm_blasint>(n), xn = static_cast<libxsmm_blasint>(m),
             xk = static_cast<libxsmm_blasint>(k);
  const auto xlda = static_cast<libxsmm_blasint>(ldb), xldb = static_cast<libxsmm_blasint>(lda),
             xldc = static_cast<libxsmm_blasint>(ldc);
  const int flags = (a_trans ? LIBXSMM_GEMM_FLAG_TRANS_B : 0) | (beta_one ? 0 : LIBXSMM_GEMM_FLAG_BETA_0);
  const int prefetch = LIBXSMM_PREFETCH_NONE;
  const T alpha = 1, beta = beta_one ? 1 : 0;
  if constexpr (std::is_same_v<T, float>)
    return libxsmm_smmdispatch(xm, xn, xk, &xlda, &xldb, &xldc, &alpha, &beta, &flags, &prefetch);
  else
    return libxsmm_dmmdispatch(xm, xn, xk, &xlda, &xldb, &xldc, &alpha, &beta, &flags, &prefetch);
}

// Whether the leading dimensions fit libxsmm's column-major view of `g`.
bool xsmm_leading_dims_fit(const GemmArgs& g) {
  return g.b.ld >= g.n && g.a.ld >= (g.a.trans ? g.m : g.k) && g.c.ld >= g.n;
}

// libxsmm's kernel for every matrix of `g`, or null where OpenBLAS takes it.
template <typename T>
XsmmKernel<T> xsmm_kernel(const GemmArgs& g) {
  if (g.m <= 0 || g.n <= 0 || g.k <= 0) return nullptr;
  const std::int64_t work = g.m * g.n * g.k;
  const bool short_nn = !g.a.trans && !g.b.trans && g.k <= kXsmmMaxKNN;
  if (work > (short_nn ? kXsmmMaxWorkNN : kXsmmMaxWork)) return nullptr;
  if (g.alpha != 1 || (g.beta != 0 && g.beta != 1) || g.b.trans) return nullptr;
  // Output rows libxsmm vectorises poorly (a masked remainder that is a
  // large part of the row): n = 10, 12, 20 ran at 0.4-0.9x OpenBLAS's speed.
  constexpr std::int64_t lanes = 32 / sizeof(T);  // one AVX2 register
  if (g.n % lanes != 0 && g.n < 8 * lanes) return nullptr;
  if (!xsmm_leading_dims_fit(g)) return nullptr;
  return xsmm_dispatch<T>(g.m, g.n, g.k, g.a.ld, g.b.ld, g.c.ld, g.a.trans, g.beta != 0);
}

// Note [Splitting k between threads]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A weight's gradient, goᵀ·x over the batch, has a small output (64 x 64 in
// the ViT) and a long k (2176): oneDNN 2.6 and OpenBLAS share out the output's
// tiles, so such a product ran on about one thread (133 µs on one thread,
// 113 on two). Here each thread takes a range of k, sums it in chunks of
// kSplitChunk with libxsmm's kernel into a partial C of its own, and the
// partials are added into C: the sum's order depends on the thread count,
// within a GEMM's rounding (as oneDNN's own k-parallel reduction does).
// Taken when the output has fewer than kSplitTilesPerThread tiles of
// kSplitTile elements for each thread and every thread gets kSplitMinK of k.
constexpr std::int64_t kSplitChunk = 128;
constexpr std::int64_t kSplitTile = 32 * 64;
constexpr std::int64_t kSplitTilesPerThread = 4;
constexpr std::int64_t kSplitMinK = 384;

// The team a k split gives `g`, or 1 where it is not such a product.
int k_split_threads(const GemmArgs& g) {
  // Inside a parallel region (a nested one would be a team of one), no split.
  if (g.batch != 1 || g.b.trans || g.m <= 0 || g.n <= 0 || omp_in_parallel()) return 1;
  if (!xsmm_leading_dims_fit(g)) return 1;
  const int threads = std::min<int>(gemm_threads(g.m, g.n, g.k, usable_threads()),
                                    static_cast<int>(std::min<std::int64_t>(64, g.k / kSplitMinK)));
  return threads >= 2 && g.m * g.n < kSplitTilesPerThread * kSplitTile * threads ? threads : 1;
}

// False where libxsmm has no kernel for the chunks: the caller then takes
// another path.
template <typename T>
bool k_split_gemm(const GemmArgs& g, int threads, detail::CachingAllocator& allocator) {
  const std::int64_t tail = g.k % kSplitChunk;
  // Kernels for a whole chunk and for the last, shorter one, first and after.
  XsmmKernel<T> first = xsmm_dispatch<T>(g.m, g.n, kSplitChunk, g.a.ld, g.b.ld, g.n, g.a.trans, false);
  XsmmKernel<T> next = xsmm_dispatch<T>(g.m, g.n, kSplitChunk, g.a.ld, g.b.ld, g.n, g.a.trans, true);
  XsmmKernel<T> tail_first =
      tail == 0 ? first : xsmm_dispatch<T>(g.m, g.n, tail, g.a.ld, g.b.ld, g.n, g.a.trans, false);
  XsmmKernel<T> tail_next = tail == 0 ? next : xsmm_dispatch<T>(g.m, g.n, tail, g.a.ld, g.b.ld, g.n, g.a.trans, true);
  if (!first || !next || !tail_first || !tail_next) return false;
  const std::int64_t area = g.m * g.n;
  const std::size_t bytes = static_cast<std::size_t>(threads * area) * sizeof(T);
  struct Scratch {  // the partials, returned however this ends
    detail::CachingAllocator& allocator;
    std::size_t bytes;
    void* data = allocator.allocate(bytes);
    ~Scratch() { allocator.deallocate(data, bytes); }
  } scratch{allocator, bytes};
  T* partials = static_cast<T*>(scratch.data);
  const T* a = static_cast<const T*>(g.a.data) + detail::gemm_batch_offset(g, g.a, 0);
  const T* b = static_cast<const T*>(g.b.data) + detail::gemm_batch_offset(g, g.b, 0);
  record_k_split_gemm();
  const ParallelWork work(threads, gemm_width(g.m, g.n, g.k));
  // Chunks of k in order, each thread a contiguous run of them.
  const std::int64_t total_chunks = (g.k + kSplitChunk - 1) / kSplitChunk;
  int team = 0;  // the team OpenMP gave, which may be smaller than asked
  auto partial_of_thread = [&](int t, int nt) {
    if (t == 0) {
      record_parallel_region(nt);
      team = nt;
    }
    const std::int64_t per = (total_chunks + nt - 1) / nt;
    const std::int64_t begin = std::min(total_chunks, t * per), end = std::min(total_chunks, begin + per);
    T* c = partials + t * area;
    if (begin == end) {
      std::fill(c, c + area, T(0));
      return;
    }
    for (std::int64_t ch = begin; ch < end; ++ch) {
      const std::int64_t k0 = ch * kSplitChunk;
      const bool short_chunk = k0 + kSplitChunk > g.k;
      const XsmmKernel<T> kernel = ch == begin ? (short_chunk ? tail_first : first) : (short_chunk ? tail_next : next);
      const T* ak = a + (g.a.trans ? k0 * g.a.ld : k0);
      kernel(b + k0 * g.b.ld, ak, c);
    }
  };
  run_region(threads, partial_of_thread);
  // C = alpha Σ partials + beta C, a row at a time (C may be strided; beta 0
  // never reads it).
  T* c = static_cast<T*>(g.c.data) + detail::gemm_batch_offset(g, g.c, 0);
  const T alpha = static_cast<T>(g.alpha), beta = static_cast<T>(g.beta);
  for (std::int64_t i = 0; i < g.m; ++i) {
    T* row = c + i * g.c.ld;
    for (std::int64_t j = 0; j < g.n; ++j) {
      T sum = partials[i * g.n + j];
      for (int t = 1; t < team; ++t) sum += partials[t * area + i * g.n + j];
      row[j] = beta == T(0) ? alpha * sum : alpha * sum + beta * row[j];
    }
  }
  return true;
}

template <typename T>
void xsmm_gemm(const GemmArgs& g, XsmmKernel<T> kernel) {
  const T* a = static_cast<const T*>(g.a.data);
  const T* bm = static_cast<const T*>(g.b.data);
  T* c = static_cast<T*>(g.c.data);
  record_small_gemm();
  // Batch items per thread: as much work as gemm_threads gives a thread.
  const std::int64_t grain = std::max<std::int64_t>(1, kGemmWorkPerThread / (g.m * g.n * g.k));
  parallel_for(g.batch, grain, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t i = begin; i < end; ++i)
      kernel(bm + detail::gemm_batch_offset(g, g.b, i), a + detail::gemm_batch_offset(g, g.a, i),
             c + detail::gemm_batch_offset(g, g.c, i));
  });
}

template <typename T>
void loop_gemm(const GemmArgs& g, std::int64_t b) {
  const T* a = static_cast<const T*>(g.a.data) + detail::gemm_batch_offset(g, g.a, b);
  const T* bm = static_cast<const T*>(g.b.data) + detail::gemm_batch_offset(g, g.b, b);
  T* c = static_cast<T*>(g.c.data) + detail::gemm_batch_offset(g, g.c, b);
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

// f16, and bf16 where oneDNN does not take it: each matrix widened to f32,
// one sgemm (f32 accumulation), the result rounded once. Debian's OpenBLAS
// 0.3.21 declares cblas_sbgemm in cblas.h but its library is built without
// BUILD_BFLOAT16 and does not export it, so bf16 takes this path too.
template <typename T>
void half_gemm(const GemmArgs& g, std::int64_t b, std::vector<float>& fa, std::vector<float>& fb,
               std::vector<float>& fc) {
  const T* a = static_cast<const T*>(g.a.data) + detail::gemm_batch_offset(g, g.a, b);
  const T* bm = static_cast<const T*>(g.b.data) + detail::gemm_batch_offset(g, g.b, b);
  T* c = static_cast<T*>(g.c.data) + detail::gemm_batch_offset(g, g.c, b);
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

// The bias (GemmArgs::bias) written into every row of C, for the paths that
// then add the product (beta 1): libxsmm, OpenBLAS and the loops.
template <typename T>
void write_bias_rows(const GemmArgs& g) {
  const T* bias = static_cast<const T*>(g.bias) + g.bias_offset;
  T* c = static_cast<T*>(g.c.data);
  const std::int64_t rows = g.batch * g.m;
  parallel_for(rows, std::max<std::int64_t>(1, kParallelGrain / g.n), [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t r = begin; r < end; ++r)
      std::copy(bias, bias + g.n, c + detail::gemm_batch_offset(g, g.c, r / g.m) + r % g.m * g.c.ld);
  });
}

template <typename T>
void gemm_typed(const GemmArgs& g, detail::CachingAllocator& allocator) {
  // The bias: oneDNN adds it in its epilogue; elsewhere it is written into C
  // and the product added. Products small enough for libxsmm stay there.
  if (g.bias != nullptr) {
    ANVIL_ASSERT(g.beta == 0, "gemm: a bias with beta ", g.beta);
    GemmArgs added = g;
    added.bias = nullptr;
    added.beta = 1;
    bool ours = false;  // libxsmm's small product or a k split
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>)
      ours = xsmm_kernel<T>(added) != nullptr || k_split_threads(added) > 1;
    if (!ours && dnnl_gemm(g, allocator)) return;
    write_bias_rows<T>(g);
    return gemm_typed<T>(added, allocator);
  }
  // One matrix at a time, each parallel inside OpenBLAS where it is large
  // enough. Never call OpenBLAS from several threads at once: its OpenMP
  // build serialises concurrent calls on a lock, and a batch of 32x32
  // products run "in parallel" that way took 50x longer than in sequence.
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    if (const XsmmKernel<T> kernel = xsmm_kernel<T>(g)) return xsmm_gemm<T>(g, kernel);
    if (const int threads = k_split_threads(g); threads > 1 && k_split_gemm<T>(g, threads, allocator)) return;
    if constexpr (std::is_same_v<T, float>)
      if (dnnl_gemm(g, allocator)) return;
    // See Note [Fewer threads on a busy machine] in machine_load.h.
    const BlasThreads threads(gemm_threads(g.m, g.n, g.k, usable_threads()));
    // One piece per product (Note [Parallel cost report]).
    for (std::int64_t i = 0; i < g.batch; ++i) {
      const ParallelWork work(threads.threads(), gemm_width(g.m, g.n, g.k));
      blas_gemm<T>(g, i);
    }
  } else if constexpr (detail::is_half_v<T>) {
    if (dnnl_gemm(g, allocator)) return;
    const BlasThreads threads(gemm_threads(g.m, g.n, g.k, usable_threads()));
    std::vector<float> fa, fb, fc;
    for (std::int64_t i = 0; i < g.batch; ++i) {
      const ParallelWork work(threads.threads(), gemm_width(g.m, g.n, g.k));
      half_gemm<T>(g, i, fa, fb, fc);
    }
  } else {
    for (std::int64_t i = 0; i < g.batch; ++i) loop_gemm<T>(g, i);
  }
}

}  // namespace

void CpuBackend::gemm(int, const GemmArgs& g) {
  count(detail::traffic(g));
  ANVIL_DISPATCH(g.dtype, T, gemm_typed<T>(g, allocator_));
}

}  // namespace anvil::cpu_backend
