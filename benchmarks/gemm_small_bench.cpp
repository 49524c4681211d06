// Issue 12: single-threaded f32 GEMM on the shapes anvil's CPU backend meets
// most, OpenBLAS (cblas_sgemm, row-major, as src/backends/cpu/cpu_gemm.cpp
// calls it) against libxsmm 1.17's JIT kernels (libxsmm-dev) and BLIS 0.9
// (libblis-dev, optional). Prints GFLOP/s per library, shape and transpose
// combination, the median of `reps` samples; each sample repeats the product
// enough times to last about a millisecond. Used for Note [libxsmm for small
// GEMMs] in cpu_gemm.cpp. Times are the calling thread's CPU time (see
// thread_cpu_seconds). Usage: bench_gemm_small [reps]
//
// BLIS exports the BLAS and CBLAS symbols too (sgemm_, cblas_sgemm), so it is
// not linked: it is dlopen'ed with RTLD_LOCAL and reached only through
// bli_sgemm, which keeps cblas_sgemm (and libxsmm's own BLAS fallback) on
// OpenBLAS; main() checks that with dladdr and says which file it resolved to.
#include <cblas.h>
#include <dlfcn.h>
#include <libxsmm.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "timing.h"

namespace {

struct Shape {
  const char* what;
  int m, k, n;     // row-major C(m×n) = op(A)(m×k) · op(B)(k×n)
  int batch;       // products per sample (one kernel call each)
  const char* ta;  // transpose combinations that occur for this shape
};

// The shapes of issue 12: the chapter's exercise, the matmul rows of
// bench_compare, a GRU step (batch 32, hidden 256, three gates; forward
// x·W, backward dG·Wᵀ and Xᵀ·dG), the MLP (784-256-10, batch 256) and
// LeNet's conv GEMMs per sample (im2col, weight × columns), batched; then
// narrow outputs (few columns, as in a classifier head) and small batched
// products, where the crossover rule of cpu_gemm.cpp must hold too.
const Shape kShapes[] = {
    {"chapter 100^3", 100, 100, 100, 1, "NN,NT,TN"},
    {"matmul 64^3", 64, 64, 64, 1, "NN,NT,TN"},
    {"matmul 128^3", 128, 128, 128, 1, "NN,NT,TN"},
    {"gru fwd", 32, 256, 768, 1, "NN,NT"},
    {"gru dX", 32, 768, 256, 1, "NN,NT"},
    {"gru dW", 256, 32, 768, 1, "TN"},
    {"mlp fc1", 256, 784, 256, 1, "NN,NT,TN"},
    {"mlp fc2", 256, 256, 10, 1, "NN,NT,TN"},
    {"lenet c1 x256", 6, 25, 784, 256, "NN,NT"},
    {"lenet c2 x256", 16, 150, 100, 256, "NN,NT"},
    {"narrow n=10", 64, 256, 10, 1, "NN,TN"},
    {"narrow n=12", 64, 256, 12, 1, "NN,TN"},
    {"narrow n=16", 64, 256, 16, 1, "NN,TN"},
    {"narrow n=20", 64, 256, 20, 1, "NN,TN"},
    {"narrow n=40", 64, 256, 40, 1, "NN,TN"},
    {"narrow n=10 k32", 64, 32, 10, 1, "NN,TN"},
    {"bmm 32^3 x64", 32, 32, 32, 64, "NN,TN"},
    {"bmm 8x64x8 x256", 8, 64, 8, 256, "NN,TN"},
};

using BliSgemm = void (*)(int, int, std::int64_t, std::int64_t, std::int64_t, const float*, const float*, std::int64_t,
                          std::int64_t, const float*, std::int64_t, std::int64_t, const float*, float*, std::int64_t,
                          std::int64_t);
// BLIS's trans_t: BLIS_NO_TRANSPOSE = 0, BLIS_TRANSPOSE = BLIS_TRANS_BIT
// (1 << 3), and conj_t is not involved for real types.
// Kernels without prefetch arguments, as cpu_gemm.cpp dispatches them.
const int kNoPrefetch = LIBXSMM_PREFETCH_NONE;

constexpr int kBlisNoTrans = 0, kBlisTrans = 1 << 3;

struct Operands {
  std::vector<float> a, b, c;
  int lda, ldb, ldc;
  std::size_t a_size, b_size, c_size;  // per batch item
};

Operands make_operands(const Shape& s, bool ta, bool tb) {
  Operands o;
  o.lda = ta ? s.m : s.k;
  o.ldb = tb ? s.k : s.n;
  o.ldc = s.n;
  o.a_size = static_cast<std::size_t>(s.m) * s.k;
  o.b_size = static_cast<std::size_t>(s.k) * s.n;
  o.c_size = static_cast<std::size_t>(s.m) * s.n;
  std::mt19937 gen(7);
  std::uniform_real_distribution<float> u(-1, 1);
  o.a.resize(o.a_size * s.batch);
  o.b.resize(o.b_size * s.batch);
  o.c.assign(o.c_size * s.batch, 0.0f);
  for (auto& x : o.a) x = u(gen);
  for (auto& x : o.b) x = u(gen);
  return o;
}

// This thread's CPU seconds: every product here runs on the calling thread,
// and on a machine shared with other builds the wall clock mostly measures
// how long the scheduler kept us off the core.
double thread_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

// Median CPU seconds of one sample of `inner` repetitions of `fn`.
template <typename Fn>
double time_sample(int reps, int inner, Fn&& fn) {
  return anvil::bench::median_of(1, reps, [&] {
    const double t0 = thread_cpu_seconds();
    for (int r = 0; r < inner; ++r) fn();
    return thread_cpu_seconds() - t0;
  });
}

double max_abs_diff(const std::vector<float>& x, const std::vector<float>& y) {
  double d = 0;
  for (std::size_t i = 0; i < x.size(); ++i) d = std::max(d, static_cast<double>(std::fabs(x[i] - y[i])));
  return d;
}

// libxsmm's time over OpenBLAS's for one n×n×n product in T, A transposed
// or not (row-major), beta 0; NaN where libxsmm has no kernel.
template <typename T>
double square_ratio(int n, bool ta, int reps, int inner) {
  std::vector<T> a(static_cast<std::size_t>(n) * n, T(0.5)), b(a), c(a);
  const T one = 1, zero = 0;
  const auto trans_a = ta ? CblasTrans : CblasNoTrans;
  auto run_openblas = [&] {
    if constexpr (std::is_same_v<T, float>)
      cblas_sgemm(CblasRowMajor, trans_a, CblasNoTrans, n, n, n, one, a.data(), n, b.data(), n, zero, c.data(), n);
    else
      cblas_dgemm(CblasRowMajor, trans_a, CblasNoTrans, n, n, n, one, a.data(), n, b.data(), n, zero, c.data(), n);
  };
  const int flags = ta ? LIBXSMM_GEMM_FLAG_TRANS_B : 0;
  const libxsmm_blasint ld = n;
  using Kernel = std::conditional_t<std::is_same_v<T, float>, libxsmm_smmfunction, libxsmm_dmmfunction>;
  Kernel kernel;
  if constexpr (std::is_same_v<T, float>)
    kernel = libxsmm_smmdispatch(n, n, n, &ld, &ld, &ld, &one, &zero, &flags, &kNoPrefetch);
  else
    kernel = libxsmm_dmmdispatch(n, n, n, &ld, &ld, &ld, &one, &zero, &flags, &kNoPrefetch);
  if (!kernel) return NAN;
  auto run_xsmm = [&] { kernel(b.data(), a.data(), c.data()); };
  return time_sample(reps, inner, run_xsmm) / time_sample(reps, inner, run_openblas);
}

}  // namespace

int main(int argc, char** argv) {
  const int reps = argc > 1 ? std::atoi(argv[1]) : 7;
  openblas_set_num_threads(1);
  libxsmm_init();

  Dl_info info{};
  dladdr(reinterpret_cast<void*>(&cblas_sgemm), &info);
  std::printf("cblas_sgemm from %s (%s)\n", info.dli_fname ? info.dli_fname : "?", openblas_get_config());

  BliSgemm bli_sgemm = nullptr;
  if (void* blis = dlopen("libblis.so.4", RTLD_NOW | RTLD_LOCAL)) {
    bli_sgemm = reinterpret_cast<BliSgemm>(dlsym(blis, "bli_sgemm"));
    if (auto set_threads = reinterpret_cast<void (*)(std::int64_t)>(dlsym(blis, "bli_thread_set_num_threads")))
      set_threads(1);
  }
  if (!bli_sgemm) std::printf("BLIS not found (apt-get install libblis-dev): its column is n/a\n");

  // What a dispatch costs once the kernel exists (libxsmm's code registry
  // is a hash lookup): the price of dispatching on every GEMM call.
  {
    const float alpha = 1, beta = 0;
    const int flags = LIBXSMM_GEMM_FLAG_NONE;
    volatile libxsmm_smmfunction sink = nullptr;
    libxsmm_smmdispatch(100, 100, 100, nullptr, nullptr, nullptr, &alpha, &beta, &flags, &kNoPrefetch);
    const int n = 100000;
    const double s = time_sample(reps, n, [&] {
      sink = libxsmm_smmdispatch(100, 100, 100, nullptr, nullptr, nullptr, &alpha, &beta, &flags, &kNoPrefetch);
    });
    std::printf("libxsmm_smmdispatch of a cached kernel: %.1f ns per call\n\n", s / n * 1e9);
    (void)sink;
  }

  std::printf("%-15s %-4s %6s %6s %6s   GFLOP/s: %9s %9s %9s   libxsmm/OpenBLAS\n", "shape", "op", "m", "k", "n",
              "OpenBLAS", "libxsmm", "BLIS");
  for (const Shape& s : kShapes) {
    for (std::string combos = s.ta; !combos.empty();) {
      const std::string op = combos.substr(0, 2);
      combos = combos.size() > 3 ? combos.substr(3) : "";
      const bool ta = op[0] == 'T', tb = op[1] == 'T';
      Operands o = make_operands(s, ta, tb);
      const double flops = 2.0 * s.m * s.n * s.k * s.batch;
      const int inner = std::max(1, static_cast<int>(2e7 / flops));  // ~1-2 ms a sample at 10-20 GFLOP/s

      auto run_openblas = [&] {
        for (int i = 0; i < s.batch; ++i)
          cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, s.m, s.n, s.k,
                      1.0f, o.a.data() + i * o.a_size, o.lda, o.b.data() + i * o.b_size, o.ldb, 0.0f,
                      o.c.data() + i * o.c_size, o.ldc);
      };
      run_openblas();
      const std::vector<float> reference = o.c;
      const double t_openblas = time_sample(reps, inner, run_openblas);

      // Row-major C = op(A)·op(B) is column-major Cᵀ = op(B)ᵀ·op(A)ᵀ: B's
      // buffer is libxsmm's A, A's its B, the transposes swap with them.
      const float alpha = 1, beta = 0;
      const int flags = (tb ? LIBXSMM_GEMM_FLAG_TRANS_A : 0) | (ta ? LIBXSMM_GEMM_FLAG_TRANS_B : 0);
      const libxsmm_blasint xm = s.n, xn = s.m, xk = s.k, xlda = o.ldb, xldb = o.lda, xldc = o.ldc;
      const libxsmm_smmfunction kernel =
          libxsmm_smmdispatch(xm, xn, xk, &xlda, &xldb, &xldc, &alpha, &beta, &flags, &kNoPrefetch);
      double t_xsmm = NAN;
      if (kernel) {
        auto run_xsmm = [&] {
          for (int i = 0; i < s.batch; ++i)
            kernel(o.b.data() + i * o.b_size, o.a.data() + i * o.a_size, o.c.data() + i * o.c_size);
        };
        std::fill(o.c.begin(), o.c.end(), 0.0f);
        run_xsmm();
        const double err = max_abs_diff(o.c, reference);
        if (err > 1e-3) std::printf("  libxsmm %s %s differs from OpenBLAS by %g\n", s.what, op.c_str(), err);
        t_xsmm = time_sample(reps, inner, run_xsmm);
      }

      double t_blis = NAN;
      if (bli_sgemm) {
        const float one = 1, zero = 0;
        auto run_blis = [&] {
          for (int i = 0; i < s.batch; ++i)
            bli_sgemm(ta ? kBlisTrans : kBlisNoTrans, tb ? kBlisTrans : kBlisNoTrans, s.m, s.n, s.k, &one,
                      o.a.data() + i * o.a_size, o.lda, 1, o.b.data() + i * o.b_size, o.ldb, 1, &zero,
                      o.c.data() + i * o.c_size, o.ldc, 1);
        };
        std::fill(o.c.begin(), o.c.end(), 0.0f);
        run_blis();
        const double err = max_abs_diff(o.c, reference);
        if (err > 1e-3) std::printf("  BLIS %s %s differs from OpenBLAS by %g\n", s.what, op.c_str(), err);
        t_blis = time_sample(reps, inner, run_blis);
      }

      auto gflops = [&](double t) { return flops * inner / t * 1e-9; };
      std::printf("%-15s %-4s %6d %6d %6d            %9.1f %9.1f %9.1f   %.2f%s\n", s.what, op.c_str(), s.m, s.k, s.n,
                  gflops(t_openblas), gflops(t_xsmm), gflops(t_blis), t_openblas / t_xsmm,
                  kernel ? "" : " (no JIT kernel)");
    }
  }

  // The crossover: square products, f32 and f64, the two transpose cases
  // libxsmm 1.17 JIT-compiles (row-major NN and TN; NT has no kernel).
  std::printf("\nsquare n^3, libxsmm time / OpenBLAS time (below 1: libxsmm faster)\n%6s %8s %8s %8s %8s\n", "n",
              "f32 NN", "f32 TN", "f64 NN", "f64 TN");
  for (int n : {4, 8, 16, 24, 32, 48, 64, 80, 96, 100, 112, 128, 160}) {
    std::printf("%6d", n);
    for (bool f64 : {false, true})
      for (bool ta : {false, true}) {
        const double flops = 2.0 * n * n * n;
        const int inner = std::max(1, static_cast<int>(2e7 / flops));
        const double ratio = f64 ? square_ratio<double>(n, ta, reps, inner) : square_ratio<float>(n, ta, reps, inner);
        std::printf(" %8.2f", ratio);
      }
    std::printf("\n");
  }
  libxsmm_finalize();
}
