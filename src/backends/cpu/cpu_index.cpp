// index_select and gather: out[pos] = src[pos with dim replaced by index];
// index_add, scatter_add and index_copy: the other way round, into out.
#include <algorithm>
#include <cstring>

#include "anvil/error.h"
#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/dtype_switch.h"
#include "backends/cpu/parallel.h"

namespace anvil::cpu_backend {

namespace {
// index_add, scatter_add and index_copy: one column (every coordinate but
// `dim`) per iteration, its adds (or copies) in index order -- the order of
// the device kernel (src/kernels/index.kern), so every backend gives the same
// bits and the last of repeated copies wins.
void scatter(const detail::IndexArgs& a) {
  const bool one_d = a.op == detail::IndexOp::IndexAdd || a.op == detail::IndexOp::IndexCopy;
  const bool copy = a.op == detail::IndexOp::IndexCopy;
  const std::int64_t* idx = static_cast<const std::int64_t*>(a.index.data) + a.index.offset;
  const std::int64_t n = a.shape[a.dim], count = a.src_dim_size, columns = a.numel / n;
  const auto idx_stride = [&](int d) {
    if (one_d) return d == a.dim ? a.index.strides[0] : std::int64_t{0};
    return a.index.strides[d];
  };
  const auto column = [&](std::int64_t i, std::int64_t& o_out, std::int64_t& o_src, std::int64_t& o_idx) {
    o_out = o_src = o_idx = 0;
    for (int d = a.ndim - 1; d >= 0; --d) {
      if (d == a.dim) continue;
      const std::int64_t c = i % a.shape[d];
      i /= a.shape[d];
      o_out += c * a.out.strides[d];
      o_src += c * a.src.strides[d];
      o_idx += c * idx_stride(d);
    }
  };
  // Validate first, so a bad index leaves `out` untouched.
  const std::int64_t idx_columns = one_d ? 1 : columns;
  for (std::int64_t i = 0; i < idx_columns; ++i) {
    std::int64_t o_out, o_src, o_idx;
    column(i, o_out, o_src, o_idx);
    for (std::int64_t k = 0; k < count; ++k) {
      const std::int64_t v = idx[o_idx + k * idx_stride(a.dim)];
      ANVIL_CHECK(v >= 0 && v < n, IndexError, detail::name(a.op), ": index ", v,
                  " is out of range; expected an index in [0, ", n, "), got ", v, " at position ", k);
    }
  }
  ANVIL_DISPATCH(a.out.dtype, T, {
    const T* src = static_cast<const T*>(a.src.data) + a.src.offset;
    T* out = static_cast<T*>(a.out.data) + a.out.offset;
    const std::int64_t grain = std::max<std::int64_t>(1, kParallelGrain / std::max<std::int64_t>(count, 1));
    parallel_for(columns, grain, [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t i = b; i < e; ++i) {
        std::int64_t o_out, o_src, o_idx;
        column(i, o_out, o_src, o_idx);
        for (std::int64_t k = 0; k < count; ++k) {
          const std::int64_t j = idx[o_idx + k * idx_stride(a.dim)];
          T& o = out[o_out + j * a.out.strides[a.dim]];
          const T s = src[o_src + k * a.src.strides[a.dim]];
          o = copy ? s : static_cast<T>(o + s);
        }
      }
    });
  });
}

// index_select of dense tensors (the DataLoader's batches: rows of a dataset
// in shuffled order) as one memcpy per selected block of the dims after
// `dim`; false, doing nothing, for any other layout. Gathering scattered
// rows is bound by memory latency, not bandwidth, so threads pay off from a
// smaller size than in streaming loops.
bool select_blocks(const detail::IndexArgs& a, const std::int64_t* idx) {
  const std::size_t es = element_size(a.out.dtype);
  std::int64_t inner = 1;
  for (int d = a.ndim - 1; d > a.dim; --d) inner *= a.shape[d];
  // Dense means row-major strides for out (over its own shape) and for src
  // (the same shape but src_dim_size along dim).
  std::int64_t out_stride = 1, src_stride = 1;
  for (int d = a.ndim - 1; d >= 0; --d) {
    const std::int64_t src_size = d == a.dim ? a.src_dim_size : a.shape[d];
    if (a.shape[d] != 1 && a.out.strides[d] != out_stride) return false;
    if (src_size != 1 && a.src.strides[d] != src_stride) return false;
    out_stride *= a.shape[d];
    src_stride *= src_size;
  }
  const std::int64_t count = a.shape[a.dim], blocks = a.numel / std::max<std::int64_t>(inner, 1);
  if (inner == 0 || count == 0) return true;
  const auto* src = static_cast<const char*>(a.src.data) + a.src.offset * static_cast<std::int64_t>(es);
  auto* out = static_cast<char*>(a.out.data) + a.out.offset * static_cast<std::int64_t>(es);
  const std::size_t block_bytes = static_cast<std::size_t>(inner) * es;
  constexpr std::int64_t kGatherGrainBytes = std::int64_t{64} << 10;
  const std::int64_t grain = std::max<std::int64_t>(1, kGatherGrainBytes / static_cast<std::int64_t>(block_bytes));
  parallel_for(blocks, grain, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t i = b; i < e; ++i) {
      const std::int64_t outer = i / count, k = i % count;
      const std::int64_t v = idx[k * a.index.strides[0]];
      std::memcpy(out + static_cast<std::size_t>(i) * block_bytes,
                  src + static_cast<std::size_t>(outer * a.src_dim_size + v) * block_bytes, block_bytes);
    }
  });
  return true;
}
}  // namespace

void CpuBackend::index(int, const detail::IndexArgs& a) {
  count(detail::traffic(a));
  if (detail::is_scatter(a.op)) return scatter(a);
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
    ANVIL_CHECK(v >= 0 && v < a.src_dim_size, IndexError, detail::name(a.op), ": index ", v,
                " is out of range; expected an index in [0, ", a.src_dim_size, "), got ", v, " at position ", i);
  }
  if (a.op == detail::IndexOp::IndexSelect && select_blocks(a, idx)) return;
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
