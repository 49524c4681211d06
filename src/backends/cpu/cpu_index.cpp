// index_select and gather: out[pos] = src[pos with dim replaced by index].
#include "anvil/error.h"
#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/dispatch.h"
#include "backends/cpu/parallel.h"

namespace anvil::cpu_backend {

void CpuBackend::index(int, const detail::IndexArgs& a) {
  const std::int64_t* idx = static_cast<const std::int64_t*>(a.index.data) + a.index.offset;
  // Validate every index first, so a bad one leaves `out` untouched and the
  // error names the first offender.
  const std::int64_t nidx = a.op == detail::IndexOp::IndexSelect ? a.shape[a.dim] : a.numel;
  for (std::int64_t i = 0; i < nidx; ++i) {
    std::int64_t v;
    if (a.op == detail::IndexOp::IndexSelect) {
      v = idx[i * a.index.strides[0]];
    } else {
      std::int64_t rem = i, off = 0;
      for (int d = a.ndim - 1; d >= 0; --d) {
        off += (rem % a.shape[d]) * a.index.strides[d];
        rem /= a.shape[d];
      }
      v = idx[off];
    }
    ANVIL_CHECK(v >= 0 && v < a.src_dim_size, IndexError,
                a.op == detail::IndexOp::IndexSelect ? "index_select" : "gather", ": index ", v,
                " is out of range; expected an index in [0, ", a.src_dim_size, "), got ", v, " at position ", i);
  }
  ANVIL_DISPATCH(a.out.dtype, T, {
    const T* src = static_cast<const T*>(a.src.data) + a.src.offset;
    T* out = static_cast<T*>(a.out.data) + a.out.offset;
    parallel_for(a.numel, kParallelGrain, [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t i = b; i < e; ++i) {
        std::int64_t rem = i, out_off = 0, src_off = 0, idx_off = 0, pos_dim = 0;
        for (int d = a.ndim - 1; d >= 0; --d) {
          const std::int64_t c = rem % a.shape[d];
          rem /= a.shape[d];
          out_off += c * a.out.strides[d];
          if (d == a.dim)
            pos_dim = c;
          else
            src_off += c * a.src.strides[d];
          idx_off += c * a.index.strides[d];
        }
        const std::int64_t v = a.op == detail::IndexOp::IndexSelect ? idx[pos_dim * a.index.strides[0]] : idx[idx_off];
        out[out_off] = src[src_off + v * a.src.strides[a.dim]];
      }
    });
  });
}

}  // namespace anvil::cpu_backend
