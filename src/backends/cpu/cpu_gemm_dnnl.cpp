// f32 GEMM through oneDNN's matmul on CPUs with AVX-512, bf16 on those
// with bf16 instructions. See Note [GEMM through oneDNN].
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

// Note [GEMM through oneDNN]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~
// bf16: Debian's OpenBLAS has no bf16 GEMM (cpu_gemm.cpp), so bf16 products
// were widened to f32 for sgemm and rounded back. Where the CPU has bf16
// dot-product instructions (AVX512_BF16: Cooper Lake, Sapphire Rapids,
// Zen 4), oneDNN's matmul computes on bf16 directly with f32 accumulation
// and one rounding of each result, the same contract, as LibTorch does on
// such CPUs. Measured on a 2-core Zen 4 (bench_compare, both threads),
// matmul n = 256 and 1024: the widening path 90 and 168 GFLOP/s, oneDNN
// alone 536 and 545 (430 and 440 on one thread); LibTorch's bf16 459 and
// 505. Elsewhere oneDNN would emulate bf16 and the widening path stays.
//
// f32: OpenBLAS 0.3.21 runs its AVX2 (Haswell) kernels on Zen 4, and has no
// AVX-512 ones for it; oneDNN's matmul has. On the same machine (bench_compare
// --baseline, both threads, one run) oneDNN against OpenBLAS called directly,
// n = 128 / 256 / 512 / 1024 / 4096: 1.07 / 1.17 / 1.71 / 1.87 / 1.67x,
// where anvil on OpenBLAS measured 0.57 / 0.70 / 0.96 / 1.01 / 0.99x; the
// GRU language model's step (32×256×768 products and their gradients) 17.4
// -> 11.5 ms on one thread. With oneDNN held to AVX2 the two libraries were
// even (n = 128 / 256 / 1024: 0.62 / 0.88 / 1.00x against 0.58 / 0.81 /
// 1.01x), so without AVX-512 OpenBLAS keeps f32. Products small enough for
// libxsmm (Note [libxsmm for small GEMMs]) stay there; f64 stays on OpenBLAS.
//
// The whole batch is one primitive call (a broadcast operand has batch 1);
// alpha is an output scale and beta a sum post-op; primitives are cached by
// shape, layout, dtype, alpha, beta and thread count; threads follow the
// product's size as for OpenBLAS (Note [Threads from the work's size]).

namespace {

using detail::GemmArgs;
using dnnl::memory;

constexpr std::size_t kCacheCapacity = 64;

struct Key {
  std::array<std::int64_t, 12> layout;  // batch, m, n, k, trans and ld of a and b, batch strides, ldc, c's batch stride
  double alpha, beta;
  DType dtype;
  int threads;
  auto operator<=>(const Key&) const = default;
};

// A matrix operand of the product as oneDNN sees it: [batch or 1, rows,
// cols] over the stored (possibly transposed) layout.
memory::desc desc_of(const detail::GemmMatrix& x, std::int64_t batch, std::int64_t rows, std::int64_t cols,
                     memory::data_type type) {
  const std::int64_t b = x.batch_stride == 0 ? 1 : batch;
  const std::int64_t batch_stride = x.batch_stride == 0 ? rows * cols : x.batch_stride;
  const memory::dims strides = x.trans ? memory::dims{batch_stride, 1, x.ld} : memory::dims{batch_stride, x.ld, 1};
  return memory::desc({b, rows, cols}, type, strides);
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
    const memory::data_type type = dnnl_data_type(g.dtype);
    const memory::desc a = desc_of(g.a, g.batch, g.m, g.k, type), b = desc_of(g.b, g.batch, g.k, g.n, type),
                       out = desc_of(c, g.batch, g.m, g.n, type);
    const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a, b, out), attr, dnnl_engine());
    return Matmul{dnnl::matmul(pd), a, b, out, pd.scratchpad_desc()};
  } catch (const dnnl::error&) {
    return std::nullopt;
  }
}

void* pointer_of(const detail::GemmMatrix& x, DType t) {
  return static_cast<char*>(x.data) + x.offset * static_cast<std::int64_t>(element_size(t));
}

}  // namespace

bool dnnl_gemm(const GemmArgs& g, detail::CachingAllocator& allocator) {
  if (g.batch <= 0 || g.m <= 0 || g.n <= 0 || g.k <= 0) return false;
  if (g.dtype == DType::BF16 ? !cpu_has_bf16_dot() : !(g.dtype == DType::F32 && cpu_has_avx512())) return false;
  // A bf16 multiply-add here costs about a quarter of OpenBLAS's f32 one (see
  // the Note), so a product repays a thread at four times the size.
  const std::int64_t cost_k = g.dtype == DType::BF16 ? std::max<std::int64_t>(1, g.k / 4) : g.k;
  const DnnlThreads threads(omp_in_parallel() ? 1 : gemm_threads(g.batch * g.m, g.n, cost_k, usable_threads()));
  static DnnlCache<Key, std::optional<Matmul>> cache(kCacheCapacity);
  const Key key{{g.batch, g.m, g.n, g.k, g.a.trans, g.a.ld, g.b.trans, g.b.ld, g.a.batch_stride, g.b.batch_stride,
                 g.c.ld, g.c.batch_stride},
                g.alpha,
                g.beta,
                g.dtype,
                threads.threads()};
  const std::optional<Matmul> matmul = cache.get(key, [&] { return create(g); });
  if (!matmul) return false;
  record_gemm_call(threads.threads());
  try {
    DnnlTemporaries temporaries(allocator);
    dnnl::stream s(dnnl_engine());
    memory a(matmul->a, dnnl_engine(), pointer_of(g.a, g.dtype)), b(matmul->b, dnnl_engine(), pointer_of(g.b, g.dtype)),
        c(matmul->c, dnnl_engine(), pointer_of(g.c, g.dtype)), scratchpad = temporaries.make(matmul->scratchpad);
    matmul->primitive.execute(
        s, {{DNNL_ARG_SRC, a}, {DNNL_ARG_WEIGHTS, b}, {DNNL_ARG_DST, c}, {DNNL_ARG_SCRATCHPAD, scratchpad}});
    s.wait();
  } catch (const dnnl::error& e) {
    throw BackendError(detail::cat("matmul: oneDNN failed (status ", static_cast<int>(e.status), ": ", e.what(),
                                   ") for a ", g.dtype, " product of [", g.m, ", ", g.k, "] and [", g.k, ", ", g.n,
                                   "], batch ", g.batch));
  }
  return true;
}

}  // namespace anvil::cpu_backend
