// The CPU elementwise driver: walks an ElementwiseArgs iteration space row by
// row (the last dim is the row) and hands each row to a typed row function,
// in parallel when there is enough work.
#pragma once

#include <cstdint>
#include <type_traits>

#include "backends/cpu/isa.h"
#include "backends/cpu/parallel.h"
#include "core/backend.h"
#include "core/half.h"

namespace anvil::cpu_backend {
inline namespace ANVIL_CPU_ISA {

// Pointer to element 0 of an operand; a scalar operand points at `slot`
// (already converted to T) and gets stride 0 everywhere.
template <typename T>
T* operand_ptr(const detail::KernelOperand& op, T* slot) {
  if (op.is_scalar) {
    if constexpr (detail::is_half_v<std::remove_const_t<T>>)
      *slot = T(op.scalar.to<float>());
    else
      *slot = op.scalar.to<T>();
    return slot;
  }
  return static_cast<T*>(op.data) + op.offset;
}

// Pointer to element 0 of a tensor operand; null for an absent one (data
// null: an optional weight, an unwanted output).
template <typename T>
T* elements(const detail::KernelOperand& op) {
  return op.data == nullptr ? nullptr : static_cast<T*>(op.data) + op.offset;
}

// Note [Short rows]
// The general reduction loop sums each contiguous row as a vector loop,
// whose horizontal sum at the end dominates when rows are short: batch
// norm's mean over [32, 512, 4, 4] (dims 0, 2, 3: 512 outputs, each 32 rows
// of 16) took 0.10 ms, as long as over [32, 64, 28, 28] with six times the
// elements. Added element-wise into one row of partial results it takes
// 0.056 ms, and that batch norm's forward 0.31 ms against 0.38 (two threads;
// LibTorch 0.19). Rows of at most kShortRow elements take that path, in the
// reductions (cpu_reduce.cpp) and in the fused batch norm (cpu_norm.cpp).
inline constexpr std::int64_t kShortRow = 64;

inline std::int64_t operand_stride(const detail::KernelOperand& op, int dim) {
  return op.is_scalar ? 0 : op.strides[dim];
}

// row(ptrs..., n, strides...) is called for every row; `ptrs` is a tuple-free
// array of up to 4 base pointers (out first) as char* with element sizes.
// `grain`: the least elements worth a thread (parallel.h).
template <int N, typename Row>
void for_each_row(const detail::ElementwiseArgs& a, char* const (&base)[N], const std::int64_t (&elem_size)[N],
                  const detail::KernelOperand* const (&ops)[N], Row&& row, std::int64_t grain = kParallelGrain) {
  const int nd = a.ndim;
  if (a.numel == 0) return;
  if (nd == 0) {
    std::int64_t st[N] = {};
    row(base, std::int64_t{1}, st);
    return;
  }
  const std::int64_t inner = a.shape[nd - 1];
  std::int64_t inner_stride[N];
  for (int k = 0; k < N; ++k) inner_stride[k] = operand_stride(*ops[k], nd - 1);
  if (nd == 1) {
    parallel_for(inner, grain, [&](std::int64_t begin, std::int64_t end) {
      char* p[N];
      for (int k = 0; k < N; ++k) p[k] = base[k] + begin * inner_stride[k] * elem_size[k];
      row(p, end - begin, inner_stride);
    });
    return;
  }
  const std::int64_t rows = a.numel / inner;
  const std::int64_t row_grain = inner >= grain ? 1 : grain / inner;
  parallel_for(rows, row_grain, [&](std::int64_t begin, std::int64_t end) {
    // Position of row `begin` (one div/mod per dim), then an odometer: rows
    // are often short (an im2col row is a kernel width), so per-row division
    // would cost more than the row itself.
    std::int64_t idx[kMaxDims] = {};
    char* p[N];
    for (int k = 0; k < N; ++k) p[k] = base[k];
    std::int64_t rem = begin;
    for (int d = nd - 2; d >= 0; --d) {
      idx[d] = rem % a.shape[d];
      rem /= a.shape[d];
      for (int k = 0; k < N; ++k) p[k] += idx[d] * operand_stride(*ops[k], d) * elem_size[k];
    }
    for (std::int64_t r = begin; r < end; ++r) {
      row(p, inner, inner_stride);
      for (int d = nd - 2; d >= 0; --d) {
        for (int k = 0; k < N; ++k) p[k] += operand_stride(*ops[k], d) * elem_size[k];
        if (++idx[d] < a.shape[d]) break;
        for (int k = 0; k < N; ++k) p[k] -= a.shape[d] * operand_stride(*ops[k], d) * elem_size[k];
        idx[d] = 0;
      }
    }
  });
}

}  // namespace ANVIL_CPU_ISA
}  // namespace anvil::cpu_backend
