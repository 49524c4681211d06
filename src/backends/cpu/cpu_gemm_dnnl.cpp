// bf16 GEMM through oneDNN's matmul on CPUs with bf16 instructions. See
// Note [bf16 GEMM through oneDNN].
#include "backends/cpu/cpu_gemm_dnnl.h"

#include <omp.h>

#include <algorithm>
#include <array>
#include <compare>
#include <oneapi/dnnl/dnnl.hpp>
#include <optional>

#include "anvil/error.h"
#include "backends/cpu/dnnl_common.h"
#include "backends/cpu/threads.h"
#include "core/half.h"

namespace anvil::cpu_backend {

// Note [bf16 GEMM through oneDNN]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Debian's OpenBLAS has no bf16 GEMM (cpu_gemm.cpp), so bf16 products were
// widened to f32 for sgemm and rounded back. Where the CPU has bf16
// dot-product instructions (AVX512_BF16: Cooper Lake, Sapphire Rapids,
// Zen 4), oneDNN's matmul computes on bf16 directly with f32 accumulation
// and one rounding of each result, the same contract, as LibTorch does on
// such CPUs. Measured on a 2-core Zen 4 (bench_compare, both threads),
// matmul n = 256 and 1024: the widening path 90 and 168 GFLOP/s, oneDNN
// alone 536 and 545 (430 and 440 on one thread); LibTorch's bf16 459 and
// 505. Elsewhere oneDNN would emulate bf16 and the widening path stays.
// The whole batch is one primitive call (a broadcast operand has batch 1);
// alpha is an output scale and beta a sum post-op; primitives are cached by
// shape, layout, alpha, beta and thread count; threads follow the product's
// size as for OpenBLAS (Note [Threads from the work's size]).

namespace {

using detail::GemmArgs;
using dnnl::memory;

constexpr std::size_t kCacheCapacity = 64;

struct Key {
  std::array<std::int64_t, 12> layout;  // batch, m, n, k, trans and ld of a and b, batch strides, ldc, c's batch stride
  double alpha, beta;
  int threads;
  auto operator<=>(const Key&) const = default;
};

// A matrix operand of the product as oneDNN sees it: [batch or 1, rows,
// cols] over the stored (possibly transposed) layout.
memory::desc desc_of(const detail::GemmMatrix& x, std::int64_t batch, std::int64_t rows, std::int64_t cols) {
  const std::int64_t b = x.batch_stride == 0 ? 1 : batch;
  const std::int64_t batch_stride = x.batch_stride == 0 ? rows * cols : x.batch_stride;
  const memory::dims strides = x.trans ? memory::dims{batch_stride, 1, x.ld} : memory::dims{batch_stride, x.ld, 1};
  return memory::desc({b, rows, cols}, memory::data_type::bf16, strides);
}

struct Matmul {
  dnnl::matmul primitive;
  memory::desc a, b, c, scratchpad;
};

// The primitive for `g`, or nothing where oneDNN has no implementation for it.
std::optional<Matmul> create(const GemmArgs& g) {
  dnnl::primitive_attr attr;
  // The caller's scratchpad, so one primitive can run on several threads at once.
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  if (g.alpha != 1.0) attr.set_output_scales(0, {static_cast<float>(g.alpha)});
  if (g.beta != 0.0) {
    dnnl::post_ops sum;
    sum.append_sum(static_cast<float>(g.beta));
    attr.set_post_ops(sum);
  }
  detail::GemmMatrix c = g.c;
  if (g.batch == 1) c.batch_stride = g.m * g.c.ld;  // unused, but never 0 for the output
  try {
    const memory::desc a = desc_of(g.a, g.batch, g.m, g.k), b = desc_of(g.b, g.batch, g.k, g.n),
                       out = desc_of(c, g.batch, g.m, g.n);
    const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a, b, out), attr, dnnl_engine());
    return Matmul{dnnl::matmul(pd), a, b, out, pd.scratchpad_desc()};
  } catch (const dnnl::error&) {
    return std::nullopt;
  }
}

void* pointer_of(const detail::GemmMatrix& x) { return static_cast<detail::BFloat16*>(x.data) + x.offset; }

}  // namespace

bool dnnl_bf16_gemm(const GemmArgs& g) {
  if (g.dtype != DType::BF16 || g.batch <= 0 || g.m <= 0 || g.n <= 0 || g.k <= 0 || !cpu_has_bf16_dot()) return false;
  // A bf16 multiply-add here costs about a quarter of OpenBLAS's f32 one (see
  // the Note), so a product repays a thread at four times the size.
  const DnnlThreads threads(
      omp_in_parallel() ? 1
                        : gemm_threads(g.batch * g.m, g.n, std::max<std::int64_t>(1, g.k / 4), usable_blas_threads()));
  static DnnlCache<Key, std::optional<Matmul>> cache(kCacheCapacity);
  const Key key{{g.batch, g.m, g.n, g.k, g.a.trans, g.a.ld, g.b.trans, g.b.ld, g.a.batch_stride, g.b.batch_stride,
                 g.c.ld, g.c.batch_stride},
                g.alpha,
                g.beta,
                threads.threads()};
  const std::optional<Matmul> matmul = cache.get(key, [&] { return create(g); });
  if (!matmul) return false;
  try {
    dnnl::stream s(dnnl_engine());
    memory a(matmul->a, dnnl_engine(), pointer_of(g.a)), b(matmul->b, dnnl_engine(), pointer_of(g.b)),
        c(matmul->c, dnnl_engine(), pointer_of(g.c)), scratchpad(matmul->scratchpad, dnnl_engine());
    matmul->primitive.execute(
        s, {{DNNL_ARG_SRC, a}, {DNNL_ARG_WEIGHTS, b}, {DNNL_ARG_DST, c}, {DNNL_ARG_SCRATCHPAD, scratchpad}});
    s.wait();
  } catch (const dnnl::error& e) {
    throw BackendError(detail::cat("matmul: oneDNN failed (status ", static_cast<int>(e.status), ": ", e.what(),
                                   ") for a bf16 product of [", g.m, ", ", g.k, "] and [", g.k, ", ", g.n, "], batch ",
                                   g.batch));
  }
  return true;
}

}  // namespace anvil::cpu_backend
