// f32 GEMM through oneDNN's matmul on CPUs with AVX-512, bf16 on those
// with bf16 instructions. See Note [GEMM through oneDNN].
#include "backends/cpu/cpu_gemm_dnnl.h"

#include <omp.h>

#include <algorithm>
#include <array>
#include <compare>
#include <oneapi/dnnl/dnnl.hpp>
#include <optional>
#include <string_view>
#include <unordered_map>

#include "anvil/error.h"
#include "backends/cpu/dnnl_common.h"
#include "backends/cpu/threads.h"
#include "core/half.h"

namespace anvil::cpu_backend {

// Note [GEMM through oneDNN]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~
// bf16: Debian's OpenBLAS has none, so where the CPU has AVX512_BF16 oneDNN's
// matmul computes on bf16 with f32 accumulation and one rounding (LibTorch's
// contract too): 545 against 168 GFLOP/s widened (2-core Zen 4, n = 1024).
// f32 on AVX-512 CPUs: OpenBLAS 0.3.21 has no AVX-512 kernels, oneDNN has
// (1.87x at n = 1024). Without AVX-512 the two were even, so OpenBLAS keeps
// f32, except a batch of products each too small to thread, which OpenBLAS
// runs one by one on one thread and oneDNN as one call across the pool.
// libxsmm keeps the small products; f64 stays on OpenBLAS. alpha is an output
// scale, beta a sum post-op, a bias row (GemmArgs::bias) oneDNN's bias;
// primitives are cached by layout, dtype, alpha, beta, bias and threads
// (Note [Threads from the work's size]). docs/measurements.md.

namespace {

using detail::GemmArgs;
using dnnl::memory;

constexpr std::size_t kCacheCapacity = 64;

struct Key {
  // batch, m, n, k, trans and ld of a and b, their batch strides, ldc, c's
  // batch stride, and the two-level batch's inner count and outer strides
  std::array<std::int64_t, 16> layout;
  double alpha, beta;
  bool bias;
  DType dtype;
  int threads;
  auto operator<=>(const Key&) const = default;
};

// A matrix operand of the product as oneDNN sees it: [batch or 1, rows,
// cols] over the stored (possibly transposed) layout, or [outer or 1, inner
// or 1, rows, cols] for a two-level batch (Note [Two-level batches]).
memory::desc desc_of(const GemmArgs& g, const detail::GemmMatrix& x, std::int64_t rows, std::int64_t cols,
                     memory::data_type type) {
  const std::int64_t row_stride = x.trans ? 1 : x.ld, col_stride = x.trans ? x.ld : 1;
  const std::int64_t inner = detail::is_two_level(g) ? g.inner_batch : g.batch;
  const std::int64_t b = x.batch_stride == 0 ? 1 : inner;
  const std::int64_t batch_stride = x.batch_stride == 0 ? rows * cols : x.batch_stride;
  if (!detail::is_two_level(g))
    return memory::desc({b, rows, cols}, type, memory::dims{batch_stride, row_stride, col_stride});
  const std::int64_t outer = x.outer_stride == 0 ? 1 : g.batch / g.inner_batch;
  const std::int64_t outer_stride = x.outer_stride == 0 ? b * batch_stride : x.outer_stride;
  return memory::desc({outer, b, rows, cols}, type, memory::dims{outer_stride, batch_stride, row_stride, col_stride});
}

struct Matmul {
  dnnl::matmul primitive;
  memory::desc a, b, c, bias, scratchpad;  // bias: zero where there is none
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
    const memory::desc a = desc_of(g, g.a, g.m, g.k, type), b = desc_of(g, g.b, g.k, g.n, type),
                       out = desc_of(g, c, g.m, g.n, type);
    // The bias row, broadcast over the batch and the rows.
    const memory::desc bias = g.bias == nullptr         ? memory::desc()
                              : detail::is_two_level(g) ? memory::desc({1, 1, 1, g.n}, type, {g.n, g.n, g.n, 1})
                                                        : memory::desc({1, 1, g.n}, type, {g.n, g.n, 1});
    const dnnl::matmul::primitive_desc pd(
        g.bias != nullptr ? dnnl::matmul::desc(a, b, bias, out) : dnnl::matmul::desc(a, b, out), attr, dnnl_engine());
    // A two-level batch whose outer stride is the shorter ([h, N] of heads
    // stored [N, L, h, d]) gets oneDNN 2.6's gemm:jit, which took 3 ms for
    // 12 products of 5x6x7 that brgemm does in 3 µs: the loops take those.
    if (detail::is_two_level(g) && std::string_view(pd.impl_info_str()).substr(0, 3) != "brg") return std::nullopt;
    return Matmul{dnnl::matmul(pd), a, b, out, bias, pd.scratchpad_desc()};
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
  if (g.dtype == DType::BF16 ? !cpu_has_bf16_dot() : g.dtype != DType::F32) return false;
  if (g.dtype == DType::F32 && !cpu_has_avx512() && (g.batch == 1 || gemm_threads(g.m, g.n, g.k, usable_threads()) > 1))
    return false;
  // A bf16 multiply-add here costs about a quarter of OpenBLAS's f32 one (see
  // the Note), so a product repays a thread at four times the size.
  const std::int64_t cost_k = g.dtype == DType::BF16 ? std::max<std::int64_t>(1, g.k / 4) : g.k;
  const DnnlThreads threads(omp_in_parallel() ? 1 : gemm_threads(g.batch * g.m, g.n, cost_k, usable_threads()));
  static DnnlCache<Key, std::optional<Matmul>> cache(kCacheCapacity);
  const Key key{{g.batch, g.m, g.n, g.k, g.a.trans, g.a.ld, g.b.trans, g.b.ld, g.a.batch_stride, g.b.batch_stride,
                 g.c.ld, g.c.batch_stride, g.inner_batch, g.a.outer_stride, g.b.outer_stride, g.c.outer_stride},
                g.alpha,
                g.beta,
                g.bias != nullptr,
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
    const ParallelWork work(threads.threads(), gemm_width(g.batch * g.m, g.n, cost_k));
    std::unordered_map<int, memory> args{
        {DNNL_ARG_SRC, a}, {DNNL_ARG_WEIGHTS, b}, {DNNL_ARG_DST, c}, {DNNL_ARG_SCRATCHPAD, scratchpad}};
    if (g.bias != nullptr)
      args.emplace(DNNL_ARG_BIAS, memory(matmul->bias, dnnl_engine(),
                                         static_cast<char*>(const_cast<void*>(g.bias)) +
                                             g.bias_offset * static_cast<std::int64_t>(element_size(g.dtype))));
    matmul->primitive.execute(s, args);
    s.wait();
  } catch (const dnnl::error& e) {
    throw BackendError(detail::cat("matmul: oneDNN failed (status ", static_cast<int>(e.status), ": ", e.what(),
                                   ") for a ", g.dtype, " product of [", g.m, ", ", g.k, "] and [", g.k, ", ", g.n,
                                   "], batch ", g.batch));
  }
  return true;
}

}  // namespace anvil::cpu_backend
