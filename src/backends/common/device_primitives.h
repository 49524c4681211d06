// The primitives of core/backend.h for a device that runs the kernels of
// src/kernels, written once for every device backend (DESIGN §2): which
// kernel, which variant, the argument block, the launch geometry. They run
// on a device_common::DeviceSlot (device_backend.h), with its lock held, which
// gives them:
//
//   template <class Request> Kernel kernel(const Request&);  // compiled on first use
//   Launch launch(Kernel);  // .buffer(handle) .arg(value) .scalar(ScalarArg)
//                           // .run(n, op) .run(dims, global, local, op)
//   void copy_within(void* dst, size_t dst_byte, const void* src, size_t src_byte,
//                    size_t bytes, const char* op);  // device-local copy
//   detail::CachingAllocator allocator;  // scratch blocks
//   void* index_error_buffer_locked(const char* op, int64 dim_size);
//   bool fp64(), is_cpu(); int compute_units(); size_t local_size(), max_work_group();
//   const std::string& label();
//
// run(dims, global, local) has OpenCL's meaning: `global` counts work-items
// (a multiple of `local`) in each dimension.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <initializer_list>
#include <string>

#include "anvil/error.h"
#include "backends/common/kernel_specs.h"
#include "backends/common/layouts.h"
#include "backends/common/scratch.h"
#include "core/backend.h"

namespace anvil::device_common {

// ---- argument blocks ------------------------------------------------------------

// Whether a tensor operand is dense in row-major order over the iteration
// shape (scalars count as dense).
inline bool dense(const detail::KernelOperand& o, const detail::ElementwiseArgs& a) {
  if (o.is_scalar) return true;
  std::int64_t expected = 1;
  for (int d = a.ndim - 1; d >= 0; --d) {
    if (a.shape[d] == 1) continue;
    if (o.strides[d] != expected) return false;
    expected *= a.shape[d];
  }
  return true;
}

inline bool all_dense(const detail::ElementwiseArgs& a) {
  if (!dense(a.out, a)) return false;
  for (int i = 0; i < a.nin; ++i)
    if (!dense(a.in[i], a)) return false;
  return true;
}

EwLayout ew_layout(const detail::ElementwiseArgs& a);
ReduceLayout reduce_layout(const detail::ReduceArgs& a, detail::ReduceOp op);
IndexLayout index_layout(const detail::IndexArgs& a);
GemmLayout gemm_layout(const detail::GemmArgs& a);
WindowLayout window_layout(const detail::Im2colArgs& a);
WindowLayout window_layout(const detail::Pool2dArgs& a);

// The kernel argument for a scalar operand (or a zero of its dtype for a tensor).
inline ScalarArg operand_scalar(const detail::KernelOperand& o) {
  return o.is_scalar ? scalar_arg(o.scalar, o.dtype) : scalar_arg(0.0, o.dtype);
}

// BLAS's leading dimension for a GemmMatrix holding op(M) (rows x cols);
// false when the matrix is not BLAS-shaped (its rows overlap). With one
// stored row ld is never used, so any value that satisfies BLAS's check is
// the same matrix.
inline bool blas_ld(const detail::GemmMatrix& x, std::int64_t rows, std::int64_t cols, std::int64_t& ld) {
  const std::int64_t stored_rows = x.trans ? cols : rows, stored_cols = x.trans ? rows : cols;
  if (stored_rows <= 1) {
    ld = std::max<std::int64_t>({x.ld, stored_cols, 1});
    return true;
  }
  if (x.ld < stored_cols || x.ld < 1) return false;
  ld = x.ld;
  return true;
}

inline std::size_t pow2_at_most(std::size_t n) {
  std::size_t p = 1;
  while (p * 2 <= n) p *= 2;
  return p;
}

// ---- the dense elementwise kernels (Note [Vector loads], kernel_specs.h) ----------------

// Whether every tensor operand starts on a whole vector of `width` elements,
// so the vector kernel (_cv) may run; scalars have no address.
template <class Q>
bool dense_vector_aligned(Q& q, int width, std::initializer_list<const detail::KernelOperand*> operands) {
  for (const detail::KernelOperand* o : operands) {
    if (o->is_scalar) continue;
    const std::size_t vector_bytes = static_cast<std::size_t>(width) * element_size(o->dtype);
    if (o->offset % width != 0 || q.base_alignment(o->data) % vector_bytes != 0) return false;
  }
  return true;
}

// The work-items a dense kernel needs for n elements in vectors of `width`
// (1: the element kernel): EW_PER_THREAD vectors each, and one per element
// of the tail.
inline std::int64_t dense_work_items(std::int64_t n, int width) {
  const std::int64_t per_thread = dense_elements_per_thread();
  return std::max((n / width + per_thread - 1) / per_thread, n % width);
}

// Calls launch(start, count) for consecutive pieces of [0, n), each at most
// dense_launch_limit() elements (a multiple of 16, so every piece of an
// aligned operand stays aligned): the kernels' indices are 32-bit.
template <class F>
void for_each_dense_piece(std::int64_t n, F&& launch) {
  const std::int64_t limit = dense_launch_limit();
  for (std::int64_t start = 0; start < n; start += limit) launch(start, std::min(limit, n - start));
}

// A dense operand's offset at element `start` of the op (a scalar has none).
inline std::int64_t offset_at(const detail::KernelOperand& o, std::int64_t start) {
  return o.is_scalar ? o.offset : o.offset + start;
}

// ---- fill, arange, copy -----------------------------------------------------------

template <class Q>
void fill(Q& q, const detail::KernelOperand& out, std::int64_t numel, const Scalar& value) {
  if (numel <= 0) return;
  q.launch(q.kernel(FillKernel{false, out.dtype, q.fp64()}))
      .buffer(out.data)
      .arg(out.offset)
      .arg(numel)
      .scalar(scalar_arg(value, out.dtype))
      .run(numel, "fill");
}

template <class Q>
void arange(Q& q, const detail::KernelOperand& out, std::int64_t numel, double start, double step) {
  if (numel <= 0) return;
  auto l = q.launch(q.kernel(FillKernel{true, out.dtype, q.fp64()}));
  l.buffer(out.data).arg(out.offset).arg(numel);
  if (q.fp64())
    l.arg(start).arg(step);
  else
    l.arg(static_cast<float>(start)).arg(static_cast<float>(step));
  l.run(numel, "arange");
}

template <class Q>
void copy(Q& q, const detail::ElementwiseArgs& a) {
  if (a.numel <= 0) return;
  const detail::KernelOperand& in = a.in[0];
  const bool is_dense = all_dense(a);
  if (is_dense && !in.is_scalar && in.dtype == a.out.dtype) {
    const std::size_t es = element_size(a.out.dtype);
    const std::size_t src = static_cast<std::size_t>(in.offset) * es, dst = static_cast<std::size_t>(a.out.offset) * es;
    const std::size_t bytes = static_cast<std::size_t>(a.numel) * es;
    const bool overlap = in.data == a.out.data && src < dst + bytes && dst < src + bytes;
    if (!overlap) {
      if (src == dst && in.data == a.out.data) return;
      q.copy_within(a.out.data, dst, in.data, src, bytes, "copy");
      return;
    }
  }
  if (is_dense && !in.is_scalar) {
    const int width = dense_vector_width({in.dtype, a.out.dtype});
    const bool vector = dense_vector_aligned(q, width, {&a.out, &in});
    const auto k = q.kernel(CopyKernel{in.dtype, a.out.dtype, false, vector});
    for_each_dense_piece(a.numel, [&](std::int64_t start, std::int64_t n) {
      q.launch(k)
          .buffer(a.out.data)
          .arg(a.out.offset + start)
          .buffer(in.data)
          .arg(in.offset + start)
          .arg(n)
          .run(dense_work_items(n, vector ? width : 1), "copy");
    });
    return;
  }
  q.launch(q.kernel(CopyKernel{in.dtype, a.out.dtype, true}))
      .buffer(a.out.data)
      .buffer(in.data)
      .scalar(operand_scalar(in))
      .arg(ew_layout(a))
      .run(a.numel, "copy");
}

// ---- unary, binary, where ---------------------------------------------------------

template <class Q>
void unary(Q& q, detail::UnaryOp op, const detail::UnaryParams& params, const detail::ElementwiseArgs& a) {
  if (a.numel <= 0) return;
  const char* opname = detail::name(op);
  const detail::KernelOperand& in = a.in[0];
  UnaryKernel request{op, in.dtype, a.out.dtype, !all_dense(a)};
  const DType tc = request.compute_type();
  const ScalarArg lo = scalar_arg(op == detail::UnaryOp::Clamp ? params.lo : 0.0, tc);
  const ScalarArg hi = scalar_arg(op == detail::UnaryOp::Clamp ? params.hi : 0.0, tc);
  if (!request.strided) {
    const int width = dense_vector_width({in.dtype, a.out.dtype});
    request.vector = dense_vector_aligned(q, width, {&a.out, &in});
    const auto k = q.kernel(request);
    for_each_dense_piece(a.numel, [&](std::int64_t start, std::int64_t n) {
      q.launch(k)
          .buffer(a.out.data)
          .arg(a.out.offset + start)
          .buffer(in.data)
          .arg(in.offset + start)
          .scalar(lo)
          .scalar(hi)
          .arg(n)
          .run(dense_work_items(n, request.vector ? width : 1), opname);
    });
    return;
  }
  q.launch(q.kernel(request))
      .buffer(a.out.data)
      .buffer(in.data)
      .scalar(lo)
      .scalar(hi)
      .arg(ew_layout(a))
      .run(a.numel, opname);
}

template <class Q>
void binary(Q& q, detail::BinaryOp op, const detail::ElementwiseArgs& a, const detail::BinaryPrologue& prologue = {}) {
  if (a.numel <= 0) return;
  const char* opname = detail::name(op);
  const detail::KernelOperand &x = a.in[0], &y = a.in[1];
  BinaryVariant variant = BinaryVariant::Strided;
  if (all_dense(a)) {
    if (!x.is_scalar && !y.is_scalar)
      variant = BinaryVariant::Dense;
    else if (!x.is_scalar)
      variant = BinaryVariant::DenseScalarB;
    else if (!y.is_scalar)
      variant = BinaryVariant::DenseScalarA;
  }
  if (variant != BinaryVariant::Strided) {
    // Dense: plain arguments (PoCL copies a by-value struct per launch).
    const int width = dense_vector_width({x.dtype, y.dtype, a.out.dtype});
    const bool vector = dense_vector_aligned(q, width, {&a.out, &x, &y});
    const auto k = q.kernel(BinaryKernel{op, x.dtype, y.dtype, a.out.dtype, variant, prologue, vector});
    const ScalarArg sx = operand_scalar(x), sy = operand_scalar(y);
    for_each_dense_piece(a.numel, [&](std::int64_t start, std::int64_t n) {
      q.launch(k)
          .buffer(a.out.data)
          .arg(a.out.offset + start)
          .buffer(x.data)
          .arg(offset_at(x, start))
          .buffer(y.data)
          .arg(offset_at(y, start))
          .scalar(sx)
          .scalar(sy)
          .arg(n)
          .run(dense_work_items(n, vector ? width : 1), opname);
    });
    return;
  }
  auto l = q.launch(q.kernel(BinaryKernel{op, x.dtype, y.dtype, a.out.dtype, variant, prologue}));
  l.buffer(a.out.data).buffer(x.data).buffer(y.data).scalar(operand_scalar(x)).scalar(operand_scalar(y));
  l.arg(ew_layout(a)).run(a.numel, opname);
}

template <class Q>
void where(Q& q, const detail::ElementwiseArgs& a) {
  if (a.numel <= 0) return;
  const detail::KernelOperand &c = a.in[0], &x = a.in[1], &y = a.in[2];
  const ScalarArg sc = c.is_scalar ? scalar_arg(c.scalar, DType::Bool) : scalar_arg(0.0, DType::Bool);
  const ScalarArg sx = operand_scalar(x), sy = operand_scalar(y);
  if (all_dense(a)) {
    const int width = dense_vector_width({DType::Bool, x.dtype, y.dtype, a.out.dtype});
    const bool vector = dense_vector_aligned(q, width, {&a.out, &c, &x, &y});
    const auto k = q.kernel(WhereKernel{x.dtype, y.dtype, a.out.dtype, false, vector});
    // where.kern's scalar_mask: bit 1 = cond, bit 2 = a, bit 3 = b
    const std::int32_t mask = (c.is_scalar ? 2 : 0) | (x.is_scalar ? 4 : 0) | (y.is_scalar ? 8 : 0);
    for_each_dense_piece(a.numel, [&](std::int64_t start, std::int64_t n) {
      q.launch(k)
          .buffer(a.out.data)
          .arg(a.out.offset + start)
          .buffer(c.data)
          .arg(offset_at(c, start))
          .buffer(x.data)
          .arg(offset_at(x, start))
          .buffer(y.data)
          .arg(offset_at(y, start))
          .scalar(sc)
          .scalar(sx)
          .scalar(sy)
          .arg(mask)
          .arg(n)
          .run(dense_work_items(n, vector ? width : 1), "where");
    });
    return;
  }
  auto l = q.launch(q.kernel(WhereKernel{x.dtype, y.dtype, a.out.dtype}));
  l.buffer(a.out.data).buffer(c.data).buffer(x.data).buffer(y.data);
  l.scalar(sc).scalar(sx).scalar(sy).arg(ew_layout(a)).run(a.numel, "where");
}

// ---- reductions -------------------------------------------------------------------

template <class Q>
void reduce(Q& q, detail::ReduceOp op, const detail::ReduceArgs& a) {
  if (a.out_numel <= 0) return;
  const char* opname = detail::name(op);
  ReduceLayout L = reduce_layout(a, op);
  auto request = [&](ReduceVariant v) { return ReduceKernel{op, a.in.dtype, a.out.dtype, q.fp64(), q.is_cpu(), v}; };
  const DType ta = request(ReduceVariant::PerItem).accumulator();
  const ScalarArg scale = scalar_arg(a.scale, request(ReduceVariant::PerItem).scale_type());
  const std::int64_t M = a.out_numel, R = a.reduce_numel;
  const std::int64_t cus = std::max(1, q.compute_units());

  // Many outputs or short rows: one work-item per output, in enough groups
  // to spread over every compute unit.
  if (R <= 32 || M >= cus * 64) {
    std::size_t group = std::clamp<std::size_t>(static_cast<std::size_t>(M / (4 * cus)), 1, q.local_size());
    if (!q.is_cpu())
      group = std::min(q.local_size(), std::max<std::size_t>(64, (group + 31) / 32 * 32));  // whole warps
    const std::size_t global = (static_cast<std::size_t>(M) + group - 1) / group * group;
    q.launch(q.kernel(request(ReduceVariant::PerItem)))
        .buffer(a.out.data)
        .buffer(a.in.data)
        .scalar(scale)
        .arg(L)
        .run(1, &global, &group, opname);
    return;
  }
  // Long rows: a work-group per (part, output); parts > 1 when there are too
  // few outputs to occupy the device, combined by a second pass.
  const std::size_t L0 =
      std::min<std::size_t>(pow2_at_most(std::min<std::size_t>(256, q.max_work_group())), q.is_cpu() ? 64 : 256);
  std::int64_t parts = (4 * cus + M - 1) / M;
  parts = std::clamp<std::int64_t>(parts, 1, std::max<std::int64_t>(1, R / (static_cast<std::int64_t>(L0) * 4)));
  parts = std::min<std::int64_t>(parts, 1024);
  L.parts = parts;
  const std::size_t global[2] = {L0 * static_cast<std::size_t>(parts), static_cast<std::size_t>(M)};
  const std::size_t local[2] = {L0, 1};
  if (parts == 1) {
    q.launch(q.kernel(request(ReduceVariant::PerGroup)))
        .buffer(a.out.data)
        .buffer(a.in.data)
        .buffer(a.out.data)
        .buffer(a.out.data)
        .scalar(scale)
        .arg(L)
        .run(2, global, local, opname);
    return;
  }
  const std::size_t nparts = static_cast<std::size_t>(M * parts);
  const Scratch part_v(q.allocator, nparts * element_size(ta)), part_i(q.allocator, nparts * sizeof(std::int64_t));
  q.launch(q.kernel(request(ReduceVariant::PerGroup)))
      .buffer(a.out.data)
      .buffer(a.in.data)
      .buffer(part_v.get())
      .buffer(part_i.get())
      .scalar(scale)
      .arg(L)
      .run(2, global, local, opname);
  const std::size_t L1 = std::min(L0, pow2_at_most(static_cast<std::size_t>(parts)));
  const std::size_t g2[2] = {L1, static_cast<std::size_t>(M)};
  const std::size_t l2[2] = {L1, 1};
  q.launch(q.kernel(request(ReduceVariant::Finish)))
      .buffer(a.out.data)
      .buffer(part_v.get())
      .buffer(part_i.get())
      .scalar(scale)
      .arg(L)
      .run(2, g2, l2, opname);
}

// ---- index, gemm, random ----------------------------------------------------------

template <class Q>
void index(Q& q, const detail::IndexArgs& a) {
  if (a.numel <= 0) return;
  const char* opname = detail::name(a.op);
  const bool scatter = detail::is_scatter(a.op);
  // A scatter's index addresses out's dim; a gather's, src's.
  void* err = q.index_error_buffer_locked(opname, scatter ? a.shape[a.dim] : a.src_dim_size);
  const std::int64_t items = scatter ? a.numel / a.shape[a.dim] : a.numel;  // one work-item per column
  if (items <= 0) return;
  IndexVariant variant = IndexVariant::Gather;
  if (scatter) variant = a.op == detail::IndexOp::IndexCopy ? IndexVariant::Copy : IndexVariant::Add;
  q.launch(q.kernel(IndexKernel{a.src.dtype, a.index.dtype, variant}))
      .buffer(a.out.data)
      .buffer(a.src.data)
      .buffer(a.index.data)
      .buffer(err)
      .arg(index_layout(a))
      .run(items, opname);
}

// Our tiled GEMM (gemm.kern): every dtype, any strides. Launched in pieces
// of at most 65535 tile rows and 65535 batch entries: CUDA's grid limit in
// y and z (OpenCL has none that low; one rule for both).
template <class Q>
void gemm_tiled(Q& q, const detail::GemmArgs& a) {
  if (a.m <= 0 || a.n <= 0 || a.batch <= 0) return;
  const GemmKernel request{a.dtype};
  constexpr std::int64_t kTile = 16, kMaxGroups = 65535;
  for (std::int64_t b0 = 0; b0 < a.batch; b0 += kMaxGroups) {
    for (std::int64_t r0 = 0; r0 < a.m; r0 += kMaxGroups * kTile) {
      detail::GemmArgs piece = a;
      piece.batch = std::min(kMaxGroups, a.batch - b0);
      piece.m = std::min(kMaxGroups * kTile, a.m - r0);
      piece.a.offset += b0 * a.a.batch_stride + r0 * (a.a.trans ? 1 : a.a.ld);
      piece.b.offset += b0 * a.b.batch_stride;
      piece.c.offset += b0 * a.c.batch_stride + r0 * a.c.ld;
      const std::size_t global[3] = {static_cast<std::size_t>((piece.n + kTile - 1) / kTile * kTile),
                                     static_cast<std::size_t>((piece.m + kTile - 1) / kTile * kTile),
                                     static_cast<std::size_t>(piece.batch)};
      const std::size_t local[3] = {kTile, kTile, 1};
      q.launch(q.kernel(request))
          .buffer(a.a.data)
          .buffer(a.b.data)
          .buffer(a.c.data)
          .scalar(scalar_arg(a.alpha, request.accumulator()))
          .scalar(scalar_arg(a.beta, request.accumulator()))
          .arg(gemm_layout(piece))
          .run(3, global, local, "matmul");
    }
  }
}

template <class Q>
void random(Q& q, const detail::RandomArgs& a) {
  const char* opname = detail::random_name(a.kind);
  if (a.numel <= 0) return;
  // Without fp64 the distributions compute in float (philox.h).
  auto l = q.launch(q.kernel(RandomKernel{a.kind, a.out.dtype, q.fp64()}));
  l.buffer(a.out.data).arg(a.out.offset).arg(a.numel).arg(a.seed).arg(a.offset);
  if (a.kind == detail::RandomKind::Randint)
    l.arg(static_cast<std::int64_t>(a.a)).arg(static_cast<std::int64_t>(a.b));
  else if (q.fp64())
    l.arg(a.a).arg(a.b);
  else
    l.arg(static_cast<float>(a.a)).arg(static_cast<float>(a.b));
  l.run(a.numel, opname);
}

// ---- row primitives: cumsum and argsort (rows.kern) ---------------------------------

template <class Q>
void scan(Q& q, const detail::ScanArgs& a) {
  if (a.rows <= 0 || a.len <= 0) return;
  q.launch(q.kernel(RowKernel{false, a.dtype, q.fp64()}))
      .buffer(a.out.data)
      .buffer(a.in.data)
      .arg(a.rows)
      .arg(a.len)
      .arg(a.out.offset)
      .arg(a.in.offset)
      .arg(static_cast<std::int64_t>(a.reverse))
      .run(a.rows, "cumsum");
}

template <class Q>
void argsort(Q& q, const detail::SortArgs& a) {
  const std::int64_t total = a.rows * a.len;
  if (total <= 0) return;
  q.launch(q.kernel(RowKernel{true, a.dtype, q.fp64()}))
      .buffer(a.indices.data)
      .buffer(a.in.data)
      .arg(total)
      .arg(a.len)
      .arg(a.indices.offset)
      .arg(a.in.offset)
      .arg(static_cast<std::int64_t>(a.descending))
      .run(total, "sort");
}

// ---- softmax and log_softmax (softmax.kern): Note [Fused softmax] -----------------

template <class Q>
void softmax(Q& q, const detail::SoftmaxArgs& a, bool backward) {
  if (a.rows <= 0 || a.len <= 0) return;
  auto l = q.launch(q.kernel(SoftmaxKernel{backward, a.dtype}));
  if (backward)
    l.buffer(a.grad_x.data).buffer(a.y.data).buffer(a.grad.data).arg(a.rows).arg(a.len).arg(a.grad_x.offset);
  else
    l.buffer(a.y.data).buffer(a.x.data).arg(a.rows).arg(a.len);
  l.arg(a.y.offset).arg(backward ? a.grad.offset : a.x.offset);
  l.arg(static_cast<std::int32_t>(a.log)).run(a.rows, backward ? "softmax_backward" : "softmax");
}

// ---- layer_norm (layer_norm.kern): Note [Fused layer norm] ------------------------

// The rows a work-item sums for the weight's and bias's gradients: the
// blocks, and so the bits, follow from `rows` alone.
inline constexpr std::int64_t kLayerNormBlockRows = 32;

// layer_norm.kern's flags: 1 weight, 2 bias, 4 grad_weight, 8 grad_bias.
inline std::int32_t layer_norm_flags(const detail::LayerNormArgs& a) {
  return (a.weight.data ? 1 : 0) | (a.bias.data ? 2 : 0) | (a.grad_weight.data ? 4 : 0) | (a.grad_bias.data ? 8 : 0);
}

// The operands as layer_norm.kern takes them, each a buffer and an offset;
// an absent one passes x's, never touched (the flags say which).
template <class L>
void layer_norm_operands(L& l, const detail::LayerNormArgs& a,
                         std::initializer_list<const detail::KernelOperand*> operands) {
  for (const detail::KernelOperand* op : operands) {
    const detail::KernelOperand& o = op->data ? *op : a.x;
    l.buffer(o.data).arg(o.offset);
  }
}

template <class Q>
void layer_norm(Q& q, const detail::LayerNormArgs& a) {
  if (a.rows <= 0 || a.len <= 0) return;
  auto l = q.launch(q.kernel(LayerNormKernel{LayerNormKernel::Entry::Forward, a.dtype}));
  layer_norm_operands(l, a, {&a.y, &a.x, &a.weight, &a.bias, &a.mean, &a.invstd});
  l.arg(a.rows).arg(a.len).scalar(scalar_arg(a.eps, a.dtype)).arg(layer_norm_flags(a)).run(a.rows, "layer_norm");
}

// grad_x by rows; grad_weight and grad_bias, when wanted, by blocks of
// rows and then over the blocks: three launches at most.
template <class Q>
void layer_norm_backward(Q& q, const detail::LayerNormArgs& a) {
  if (a.rows <= 0 || a.len <= 0) return;
  const std::int32_t flags = layer_norm_flags(a);
  if (a.grad_x.data) {
    auto l = q.launch(q.kernel(LayerNormKernel{LayerNormKernel::Entry::Backward, a.dtype}));
    layer_norm_operands(l, a, {&a.grad_x, &a.grad, &a.x, &a.weight, &a.mean, &a.invstd});
    l.arg(a.rows).arg(a.len).arg(flags).run(a.rows, "layer_norm_backward");
  }
  if (!a.grad_weight.data && !a.grad_bias.data) return;
  const std::int64_t blocks = (a.rows + kLayerNormBlockRows - 1) / kLayerNormBlockRows;
  const Scratch partial(q.allocator, 2 * static_cast<std::size_t>(blocks * a.len) * element_size(a.dtype));
  auto sums = q.launch(q.kernel(LayerNormKernel{LayerNormKernel::Entry::ParamsPartial, a.dtype}));
  sums.buffer(partial.get());
  layer_norm_operands(sums, a, {&a.grad, &a.x, &a.mean, &a.invstd});
  sums.arg(a.rows).arg(a.len).arg(kLayerNormBlockRows).run(blocks * a.len, "layer_norm_backward");
  auto total = q.launch(q.kernel(LayerNormKernel{LayerNormKernel::Entry::Params, a.dtype}));
  layer_norm_operands(total, a, {&a.grad_weight, &a.grad_bias});
  total.buffer(partial.get()).arg(blocks).arg(a.len).arg(flags).run(a.len, "layer_norm_backward");
}

// ---- fused optimiser steps (optional in core/backend.h) ----------------------------

inline std::int32_t sgd_flags(const detail::OptimizerStepArgs& a, bool first) {
  return (a.weight_decay != 0 ? 1 : 0) | (a.momentum != 0 ? 2 : 0) | (a.nesterov ? 4 : 0) | (first ? 8 : 0);
}
// optim.kern's Adam scalars and flags (1 L2 decay, 2 decoupled decay).
template <class L>
void adam_scalars(L& l, const detail::OptimizerStepArgs& a) {
  const DType t = a.dtype;
  for (double s : {a.weight_decay, a.beta1, a.beta2, 1 - a.beta1, 1 - a.beta2, a.bias_correction2, a.eps,
                   a.lr / a.bias_correction1, 1 - a.lr * a.weight_decay})
    l.scalar(scalar_arg(s, t));
  const bool decay = a.weight_decay != 0;
  l.arg(static_cast<std::int32_t>(decay && !a.decoupled ? 1 : decay ? 2 : 0));
}

template <class Q>
void optimizer_step(Q& q, const detail::OptimizerStepArgs& a) {
  if (a.numel <= 0) return;
  const DType t = a.dtype;
  auto l = q.launch(q.kernel(OptimKernel{a.kind, t, false}));
  l.buffer(a.param.data).arg(a.param.offset).buffer(a.grad.data).arg(a.grad.offset);
  if (a.kind == detail::OptimizerKind::Sgd) {
    const bool momentum = a.momentum != 0;
    const detail::KernelOperand& buf = momentum ? a.state0 : a.param;  // unread without momentum
    l.buffer(buf.data).arg(buf.offset).arg(a.numel);
    l.scalar(scalar_arg(a.lr, t)).scalar(scalar_arg(a.weight_decay, t)).scalar(scalar_arg(a.momentum, t));
    l.scalar(scalar_arg(1 - a.dampening, t)).arg(sgd_flags(a, a.first)).run(a.numel, "sgd step");
    return;
  }
  l.buffer(a.state0.data).arg(a.state0.offset).buffer(a.state1.data).arg(a.state1.offset).arg(a.numel);
  adam_scalars(l, a);
  l.run(a.numel, "adam step");
}

// ceil(N / kOptimizerSlots) launches or a few more (Note [Multi-tensor
// optimiser steps]): runs of consecutive tensors that share `first`.
template <class Q>
void optimizer_step_list(Q& q, const detail::OptimizerStepListArgs& a) {
  const detail::OptimizerStepArgs& o = a.step;
  const auto ntensors = static_cast<std::int64_t>(a.tensors.size());
  const bool sgd = o.kind == detail::OptimizerKind::Sgd;
  for (std::int64_t first = 0; first < ntensors;) {
    std::int64_t end = first + 1, total = a.tensors[first].numel;
    while (end < ntensors && end - first < detail::kOptimizerSlots && a.tensors[end].first == a.tensors[first].first)
      total += a.tensors[end++].numel;
    const detail::OptimizerTensor& head = a.tensors[first];
    if (total > 0) {
      auto l = q.launch(q.kernel(OptimKernel{o.kind, o.dtype, true}));
      l.buffer(a.table.data).arg(ntensors).arg(first).arg(static_cast<std::int32_t>(end - first));
      if (sgd) {
        const bool momentum = o.momentum != 0;
        l.buffer(momentum ? head.state0.data : head.param.data);  // unread without momentum
        l.scalar(scalar_arg(o.lr, o.dtype)).scalar(scalar_arg(o.weight_decay, o.dtype));
        l.scalar(scalar_arg(o.momentum, o.dtype)).scalar(scalar_arg(1 - o.dampening, o.dtype));
        l.arg(sgd_flags(o, head.first));
      } else {
        l.buffer(head.state0.data).buffer(head.state1.data);
        adam_scalars(l, o);
      }
      // Unused slots repeat the first tensor's buffers (never read).
      for (std::int64_t k = 0; k < detail::kOptimizerSlots; ++k) {
        const detail::OptimizerTensor& x = first + k < end ? a.tensors[first + k] : head;
        l.buffer(x.param.data).buffer(x.grad.data);
      }
      l.run(total, sgd ? "sgd step" : "adam step");
    }
    first = end;
  }
}

// ---- fused batch norm (optional in core/backend.h) --------------------------------

// norm.kern's work-groups: `parts` per channel, of the reductions' group
// size (64 on CPU-type devices, whose groups each run on one thread; 256 on
// GPUs), a power of two as the kernel's tree needs, even for channels of
// fewer elements: PoCL 3.1 crashed running this kernel in work-groups of 2
// and 4 work-items (a group sized to the channel, for batch norm of
// [2..4, C]), and ran it in groups of 1 and of 8 to 64. Parts > 1 when the
// channels alone cannot occupy the device (as the reductions split long
// rows), each part at least 4 groups' worth of elements; ANVIL_NORM_PARTS=N
// asks for N (tests use it to run the split pass on PoCL).
template <class Q>
int norm_parts(Q& q, const detail::BatchNormArgs& a, std::size_t local) {
  const std::int64_t total = a.n * a.s;
  std::int64_t parts = (4 * static_cast<std::int64_t>(q.compute_units()) + a.c - 1) / a.c;
  if (const char* forced = std::getenv("ANVIL_NORM_PARTS"); forced != nullptr && std::atoi(forced) > 0)
    parts = std::atoi(forced);
  else
    parts = std::min<std::int64_t>(parts, total / (static_cast<std::int64_t>(local) * 4));
  return static_cast<int>(
      std::clamp<std::int64_t>(parts, 1, std::min<std::int64_t>(64, std::max<std::int64_t>(total, 1))));
}

// The flags of norm.kern: 1 training, 2 weight, 4 bias, 8 grad_x, 16
// running_mean, 32 running_var, 64 var, 128 sum_gxc, 256 grad_weight, 512
// residual, 1024 relu, 2048 grad_residual.
inline std::int32_t norm_flags(const detail::BatchNormArgs& a) {
  return (a.training ? 1 : 0) | (a.weight.data ? 2 : 0) | (a.bias.data ? 4 : 0) | (a.grad_x.data ? 8 : 0) |
         (a.running_mean.data ? 16 : 0) | (a.running_var.data ? 32 : 0) | (a.var.data ? 64 : 0) |
         (a.sum_gxc.data ? 128 : 0) | (a.grad_weight.data ? 256 : 0) | (a.residual.data ? 512 : 0) |
         (a.relu ? 1024 : 0) | (a.grad_residual.data ? 2048 : 0);
}

// Either kernel of norm.kern: its operands (each a buffer and an offset;
// an absent one passes x's, never touched), then n, c, s, the forward's
// eps and running-statistics factors, the chunks' sums and the parts, and
// the flags, over C * parts work-groups; first the partial kernel where
// the channels are split (evaluation's forward needs no sums).
template <class Q>
void launch_norm(Q& q, const detail::BatchNormArgs& a, bool backward,
                 std::initializer_list<const detail::KernelOperand*> operands, const char* what) {
  if (a.n * a.c * a.s <= 0) return;
  const NormKernel request{backward, a.dtype, q.fp64() && q.is_cpu()};
  const std::size_t local =
      std::min<std::size_t>(pow2_at_most(std::min<std::size_t>(256, q.max_work_group())), q.is_cpu() ? 64 : 256);
  const int parts = backward || a.training ? norm_parts(q, a, local) : 1;
  const std::size_t global = local * static_cast<std::size_t>(a.c) * static_cast<std::size_t>(parts);
  const Scratch partial(
      q.allocator, parts > 1 ? 2 * static_cast<std::size_t>(a.c * parts) * element_size(request.accumulator()) : 0);
  const auto run = [&](const NormKernel& k) {
    auto l = q.launch(q.kernel(k));
    for (const detail::KernelOperand* op : operands) {
      const detail::KernelOperand& o = op->data ? *op : a.x;
      l.buffer(o.data).arg(o.offset);
    }
    l.arg(a.n).arg(a.c).arg(a.s);
    if (!backward) {
      const DType p = a.param_dtype();
      l.scalar(scalar_arg(a.eps, request.accumulator())).scalar(scalar_arg(1 - a.momentum, p));
      l.scalar(scalar_arg(a.momentum, p)).scalar(scalar_arg(a.momentum * a.unbias, p));
    }
    l.buffer(parts > 1 ? partial.get() : a.x.data).arg(parts).arg(norm_flags(a)).run(1, &global, &local, what);
  };
  if (parts > 1) {
    NormKernel first = request;
    first.partial = true;
    run(first);
  }
  run(request);
}

// var is null in evaluation, and unread there; so are absent weight, bias
// and residual.
template <class Q>
void batch_norm(Q& q, const detail::BatchNormArgs& a) {
  launch_norm(
      q, a, false,
      {&a.y, &a.x, &a.mean, &a.var, &a.invstd, &a.weight, &a.bias, &a.running_mean, &a.running_var, &a.residual},
      "batch_norm");
}

// grad_x is null when the input's gradient is not wanted; y (the forward's
// output, ReLU's mask) is read with relu only, grad_residual written when given.
template <class Q>
void batch_norm_backward(Q& q, const detail::BatchNormArgs& a) {
  launch_norm(q, a, true,
              {&a.grad_x, &a.grad, &a.x, &a.mean, &a.invstd, &a.weight, &a.sum_g, &a.sum_gxc, &a.grad_weight, &a.y,
               &a.grad_residual},
              "batch_norm_backward");
}

// ---- fused window kernels (optional in core/backend.h) -----------------------------

template <class Q>
void im2col(Q& q, const detail::Im2colArgs& a) {
  const std::int64_t total = a.g.n * a.g.c * a.g.kh * a.g.kw * a.g.oh * a.g.ow;
  if (total <= 0) return;
  q.launch(q.kernel(WindowKernel{detail::FusedOp::Im2col, a.dtype}))
      .buffer(a.cols.data)
      .buffer(a.image.data)
      .arg(total)
      .arg(window_layout(a))
      .run(total, "im2col");
}

template <class Q>
void col2im(Q& q, const detail::Im2colArgs& a) {
  const std::int64_t total = a.g.n * a.g.c * a.g.h * a.g.w;
  if (total <= 0) return;
  q.launch(q.kernel(WindowKernel{detail::FusedOp::Col2im, a.dtype}))
      .buffer(a.image.data)
      .buffer(a.cols.data)
      .arg(total)
      .arg(window_layout(a))
      .run(total, "col2im");
}

template <class Q>
void max_pool2d(Q& q, const detail::Pool2dArgs& a) {
  const std::int64_t total = a.g.n * a.g.c * a.g.oh * a.g.ow;
  if (total <= 0) return;
  q.launch(q.kernel(WindowKernel{detail::FusedOp::MaxPool2d, a.dtype}))
      .buffer(a.out.data)
      .buffer(a.indices.data)
      .buffer(a.image.data)
      .arg(total)
      .arg(window_layout(a))
      .run(total, "max_pool2d");
}

template <class Q>
void max_pool2d_backward(Q& q, const detail::Pool2dArgs& a) {
  const std::int64_t total = a.g.n * a.g.c * a.g.h * a.g.w;
  if (total <= 0) return;
  q.launch(q.kernel(WindowKernel{detail::FusedOp::MaxPool2dBackward, a.dtype}))
      .buffer(a.image.data)
      .buffer(a.out.data)
      .buffer(a.indices.data)
      .arg(total)
      .arg(window_layout(a))
      .run(total, "max_pool2d_backward");
}

// ---- interpolate (optional in core/backend.h, Note [Interpolation]) ------------------

inline InterpLayout interp_layout(const detail::InterpolateArgs& a, const detail::KernelOperand& image) {
  return {a.n,
          a.c,
          a.h,
          a.w,
          a.oh,
          a.ow,
          image.offset,
          image.strides[0],
          image.strides[1],
          image.strides[2],
          image.strides[3],
          a.out.offset,
          a.mode == detail::InterpMode::Bilinear,
          a.align_corners};
}

// The forward over every output element (image strided), the backward over
// every input element (image contiguous, overwritten).
template <class Q>
void interpolate(Q& q, const detail::InterpolateArgs& a, bool backward) {
  const std::int64_t total = a.n * a.c * (backward ? a.h * a.w : a.oh * a.ow);
  if (total <= 0) return;
  detail::KernelOperand image = a.image;
  if (backward) {
    image.strides[3] = 1;
    image.strides[2] = a.w;
    image.strides[1] = a.h * a.w;
    image.strides[0] = a.c * a.h * a.w;
  }
  const InterpKernel request{backward, a.dtype};
  q.launch(q.kernel(request))
      .buffer(backward ? image.data : a.out.data)
      .buffer(backward ? a.out.data : image.data)
      .arg(total)
      .scalar(scalar_arg(a.scale_h, request.compute_type()))
      .scalar(scalar_arg(a.scale_w, request.compute_type()))
      .arg(interp_layout(a, image))
      .run(total, backward ? "interpolate_backward" : "interpolate");
}

}  // namespace anvil::device_common
