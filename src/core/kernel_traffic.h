// The bytes a primitive reads and writes, from its arguments (Note [What a
// launch is], anvil/ledger.h): each tensor operand's own elements, once,
// whatever the kernel's access pattern. Shared by every backend so the
// CPU and the devices count a step alike.
#pragma once

#include <algorithm>
#include <cstdint>
#include <initializer_list>

#include "core/backend.h"
#include "core/ledger_counters.h"

namespace anvil::detail {

struct Traffic {
  std::uint64_t read = 0, written = 0;
};

// Distinct elements of a strided operand over `shape` (0-stride dims are
// broadcast, read once); none for a C++ scalar.
inline std::uint64_t operand_bytes(const KernelOperand& o, const std::int64_t* shape, int ndim) noexcept {
  if (o.is_scalar || o.data == nullptr) return 0;
  std::uint64_t n = 1;
  for (int d = 0; d < ndim; ++d)
    if (o.strides[d] != 0 && shape[d] > 0) n *= static_cast<std::uint64_t>(shape[d]);
  return n * element_size(o.dtype);
}
// A contiguous operand of `numel` elements (none when absent).
inline std::uint64_t dense_bytes(const KernelOperand& o, std::int64_t numel) noexcept {
  return o.data == nullptr || numel <= 0 ? 0 : static_cast<std::uint64_t>(numel) * element_size(o.dtype);
}

inline Traffic traffic(const ElementwiseArgs& a) noexcept {
  if (a.numel <= 0) return {};
  Traffic t{0, dense_bytes(a.out, a.numel)};
  for (int i = 0; i < a.nin; ++i) t.read += operand_bytes(a.in[i], a.shape, a.ndim);
  return t;
}
inline Traffic traffic(const ReduceArgs& a) noexcept {
  if (a.out_numel <= 0) return {};
  return {operand_bytes(a.in, a.shape, a.nkept + a.nreduced), dense_bytes(a.out, a.out_numel)};
}
inline Traffic traffic(const GemmArgs& a) noexcept {
  if (a.m <= 0 || a.n <= 0 || a.batch <= 0) return {};
  const auto matrix = [&](const GemmMatrix& x, std::int64_t rows, std::int64_t cols) {
    // Each distinct matrix once: a zero stride repeats one over its level.
    const std::int64_t inner = is_two_level(a) ? a.inner_batch : a.batch;
    const std::int64_t outer = is_two_level(a) && x.outer_stride != 0 ? a.batch / a.inner_batch : 1;
    const std::int64_t copies = outer * (x.batch_stride == 0 ? 1 : inner);
    return static_cast<std::uint64_t>(copies * rows * cols) * element_size(a.dtype);
  };
  const std::uint64_t c = matrix(a.c, a.m, a.n);
  return {matrix(a.a, a.m, a.k) + matrix(a.b, a.k, a.n) + (a.beta != 0 ? c : 0), c};
}
inline Traffic traffic(const IndexArgs& a) noexcept {
  if (a.numel <= 0) return {};
  // A gather reads as many src and index elements as it writes; a scatter
  // reads src and index (out's shape but src_dim_size along dim) and
  // updates as many elements of out.
  std::uint64_t moved = static_cast<std::uint64_t>(a.numel);
  if (is_scatter(a.op) && a.shape[a.dim] > 0)
    moved = moved / static_cast<std::uint64_t>(a.shape[a.dim]) * static_cast<std::uint64_t>(a.src_dim_size);
  const std::uint64_t es = element_size(a.src.dtype);
  const std::uint64_t index = (a.op == IndexOp::IndexSelect || a.op == IndexOp::IndexAdd || a.op == IndexOp::IndexCopy
                                   ? static_cast<std::uint64_t>(is_scatter(a.op) ? a.src_dim_size : a.shape[a.dim])
                                   : moved) *
                              element_size(a.index.dtype);
  const bool adds = a.op == IndexOp::IndexAdd || a.op == IndexOp::ScatterAdd;
  return {moved * es + index + (adds ? moved * es : 0), moved * es};
}
inline Traffic traffic(const ScanArgs& a) noexcept {
  const std::int64_t n = a.rows * a.len;
  return {dense_bytes(a.in, n), dense_bytes(a.out, n)};
}
inline Traffic traffic(const SortArgs& a) noexcept {
  const std::int64_t n = a.rows * a.len;
  return {dense_bytes(a.in, n), dense_bytes(a.indices, n)};
}
inline std::int64_t image_numel(const Window2dGeometry& g) noexcept { return g.n * g.c * g.h * g.w; }
inline std::int64_t window_numel(const Window2dGeometry& g) noexcept { return g.n * g.c * g.oh * g.ow; }
inline Traffic traffic(const Im2colArgs& a, bool col2im) noexcept {
  const std::uint64_t image = dense_bytes(a.image, image_numel(a.g)),
                      cols = dense_bytes(a.cols, window_numel(a.g) * a.g.kh * a.g.kw);
  return col2im ? Traffic{cols, image} : Traffic{image, cols};
}
inline Traffic traffic(const Pool2dArgs& a, bool backward) noexcept {
  const std::uint64_t image = dense_bytes(a.image, image_numel(a.g)), out = dense_bytes(a.out, window_numel(a.g)),
                      indices = dense_bytes(a.indices, window_numel(a.g));
  return backward ? Traffic{out + indices, image} : Traffic{image, out + indices};
}
// Conv2d: the family's operands in the roles Conv2dArgs gives them.
inline Traffic traffic(const Conv2dArgs& a, FusedOp which) noexcept {
  const Window2dGeometry& g = a.g;
  const std::uint64_t image = dense_bytes(a.image, image_numel(g)),
                      out = dense_bytes(a.out, g.n * a.out_channels * g.oh * g.ow),
                      weight = dense_bytes(a.weight,
                                           a.out_channels * (g.c / std::max<std::int64_t>(a.groups, 1)) * g.kh * g.kw),
                      bias = a.has_bias ? dense_bytes(a.bias, a.out_channels) : 0;
  if (which == FusedOp::Conv2d) return {image + weight + bias, out};
  if (which == FusedOp::Conv2dBackwardData) return {out + weight, image};
  return {image + out, weight + bias};
}
inline Traffic traffic(const BatchNormArgs& a, bool backward) noexcept {
  const std::int64_t n = a.n * a.c * a.s;
  const auto per_channel = [&](std::initializer_list<const KernelOperand*> ops) {
    std::uint64_t b = 0;
    for (const KernelOperand* o : ops) b += dense_bytes(*o, a.c);
    return b;
  };
  if (backward)
    return {dense_bytes(a.grad, n) + dense_bytes(a.x, n) + dense_bytes(a.y, n) +
                per_channel({&a.mean, &a.invstd, &a.weight}),
            dense_bytes(a.grad_x, n) + dense_bytes(a.grad_residual, n) +
                per_channel({&a.sum_g, &a.sum_gxc, &a.grad_weight})};
  const std::uint64_t stats = per_channel({&a.mean, &a.invstd}) + (a.training ? per_channel({&a.var}) : 0),
                      running = a.training ? per_channel({&a.running_mean, &a.running_var}) : 0;
  return {dense_bytes(a.x, n) + dense_bytes(a.residual, n) + per_channel({&a.weight, &a.bias}) +
              (a.training ? 0 : stats) + running,
          dense_bytes(a.y, n) + (a.training ? stats : 0) + running};
}
inline Traffic traffic(const InterpolateArgs& a, bool backward) noexcept {
  const std::uint64_t image = dense_bytes(a.image, a.n * a.c * a.h * a.w),
                      out = dense_bytes(a.out, a.n * a.c * a.oh * a.ow);
  return backward ? Traffic{out, image} : Traffic{image, out};
}
inline Traffic traffic(const SoftmaxArgs& a, bool backward) noexcept {
  const std::int64_t n = a.rows * a.len;
  return backward ? Traffic{dense_bytes(a.y, n) + dense_bytes(a.grad, n), dense_bytes(a.grad_x, n)}
                  : Traffic{dense_bytes(a.x, n), dense_bytes(a.y, n)};
}
inline Traffic traffic(const LayerNormArgs& a, bool backward) noexcept {
  const std::int64_t n = a.rows * a.len;
  const std::uint64_t stats = dense_bytes(a.mean, a.rows) + dense_bytes(a.invstd, a.rows),
                      params = dense_bytes(a.weight, a.len) + dense_bytes(a.bias, a.len);
  if (backward)
    return {dense_bytes(a.grad, n) + dense_bytes(a.x, n) + stats + dense_bytes(a.weight, a.len),
            dense_bytes(a.grad_x, n) + dense_bytes(a.grad_weight, a.len) + dense_bytes(a.grad_bias, a.len)};
  return {dense_bytes(a.x, n) + params, dense_bytes(a.y, n) + stats};
}
inline Traffic traffic(const OptimizerStepArgs& a) noexcept {
  const bool sgd = a.kind == OptimizerKind::Sgd;
  const std::uint64_t p = dense_bytes(a.param, a.numel),
                      state = sgd ? (a.momentum != 0 ? dense_bytes(a.state0, a.numel) : 0)
                                  : dense_bytes(a.state0, a.numel) + dense_bytes(a.state1, a.numel);
  // A first SGD step writes its momentum buffer without reading it.
  return {p + dense_bytes(a.grad, a.numel) + (sgd && a.first ? 0 : state), p + state};
}

inline Traffic traffic(const OptimizerStepListArgs& a) noexcept {
  Traffic t{dense_bytes(a.table, 4 * static_cast<std::int64_t>(a.tensors.size()) + 1), 0};
  for (std::size_t i = 0; i < a.tensors.size(); ++i) {
    const Traffic one = traffic(a.one(i));
    t.read += one.read;
    t.written += one.written;
  }
  return t;
}

// One primitive's count on device `d`: `launches` commands and its traffic.
inline void count_work(Device d, std::uint64_t launches, Traffic t) noexcept {
  WorkCounters& c = work_counters(d);
  if (launches) c.launch(launches);
  c.traffic(t.read, t.written);
}

}  // namespace anvil::detail
