// The scans of anvil/ops.def (cumsum), sort and topk: the row primitives of
// core/backend.h (ScanArgs, SortArgs) behind PyTorch's ops. The dim is moved
// last and the input made contiguous here, once, so a backend sees plain rows.
#include "anvil/autograd.h"
#include "autograd/graph.h"
#include "core/observer.h"
#include "ops/dispatch.h"
#include "ops/op_common.h"

namespace anvil {

namespace {
// x with `dim` last, contiguous: its rows are what the primitives take.
Tensor rows_of(const Tensor& x, int dim) { return x.transpose(dim, -1).contiguous(); }
}  // namespace

namespace detail {

Tensor scan_along(ScanOp op, const Tensor& x, int dim, bool reverse) {
  ANVIL_ASSERT(x.dim() > 0 && (x.dtype() == DType::F32 || x.dtype() == DType::F64 || x.dtype() == DType::I64),
               "scan_along: unexpected ", x.shape(), " ", x.dtype());
  // The Scan primitive sums (ScanArgs); a scan of another kind needs its own.
  ANVIL_ASSERT(row(op).kind == ScanKind::Sum, "scan_along: no primitive for ", name(op));
  Tensor out;
  {
    NoGradGuard no_grad;
    ANVIL_PROFILE_OP(name(op), &x);
    const Tensor in = rows_of(x, dim);
    Tensor o = make_empty(in.shape(), x.dtype(), x.device());
    const std::int64_t len = x.size(dim);
    if (o.numel() > 0)
      dispatch::scan(name(op), x.device(),
                     {.dtype = x.dtype(),
                      .rows = o.numel() / len,
                      .len = len,
                      .reverse = reverse,
                      .out = operand(o),
                      .in = operand(in)});
    out = o.transpose(dim, -1);
  }
  record_scan(op, out, x, dim, reverse);
  return out;
}

namespace {
Tensor scan_op(ScanOp op, const Tensor& x, int dim) {
  const char* opname = name(op);
  check_defined(opname, x);
  // PyTorch: integers and bool sum in i64, floats in their own dtype.
  const DType t = is_floating(x.dtype()) ? x.dtype() : DType::I64;
  if (x.dim() == 0) {
    wrap_dim(dim, 1, opname);
    return cast(x, t).clone();
  }
  dim = wrap_dim(dim, x.dim(), opname);
  // f16 and bf16 accumulate in f32 (DESIGN §4.2) and round once at the end,
  // as PyTorch's CPU cumsum of a half does.
  if (is_half(t)) return cast(scan_along(op, cast(x, DType::F32), dim, false), t).contiguous();
  return scan_along(op, cast(x, t), dim, false).contiguous();
}
}  // namespace

}  // namespace detail

// The scans (anvil/ops.def): free function and method.
#define ANVIL_SCAN_OP(Op, name, ...)                                                            \
  Tensor name(const Tensor& x, int dim) { return detail::scan_op(detail::ScanOp::Op, x, dim); } \
  Tensor Tensor::name(int dim) const { return detail::scan_op(detail::ScanOp::Op, *this, dim); }
#include "anvil/ops.def"

ValuesIndices sort(const Tensor& x, int dim, bool descending) {
  detail::check_defined("sort", x);
  if (x.dim() == 0) {
    detail::wrap_dim(dim, 1, "sort");
    return {x.clone(), zeros({}, x.device(), DType::I64)};
  }
  dim = detail::wrap_dim(dim, x.dim(), "sort");
  Tensor indices;
  {
    NoGradGuard no_grad;
    // A half widens to f32 exactly and in order, so its rows sort as f32 and
    // the row primitive needs no 16-bit variant.
    const Tensor in = rows_of(is_half(x.dtype()) ? detail::cast(x, DType::F32) : x, dim);
    ANVIL_PROFILE_OP("sort", &x);
    Tensor idx = detail::make_empty(in.shape(), DType::I64, x.device());
    const std::int64_t len = x.size(dim);
    if (idx.numel() > 0)
      detail::dispatch::argsort("sort", x.device(),
                                {.dtype = in.dtype(),
                                 .rows = idx.numel() / len,
                                 .len = len,
                                 .descending = descending,
                                 .indices = detail::operand(idx),
                                 .in = detail::operand(in)});
    indices = idx.transpose(dim, -1).contiguous();
  }
  // The values are gathered at the indices, so the gradient goes back
  // through gather's rule (a scatter to where each value came from).
  return {gather(x, dim, indices), indices};
}

ValuesIndices topk(const Tensor& x, std::int64_t k, int dim, bool largest, bool sorted) {
  detail::check_defined("topk", x);
  const int d = detail::wrap_dim(dim, std::max(x.dim(), 1), "topk");
  const std::int64_t n = x.dim() == 0 ? 1 : x.size(d);
  ANVIL_CHECK(k >= 0 && k <= n, ValueError, "topk: k is out of range for dim ", d, "; expected 0 <= k <= ", n, ", got ",
              k);
  // Always sorted: PyTorch leaves the order unspecified when sorted=false.
  (void)sorted;
  if (x.dim() == 0) return sort(x, dim, largest);
  Tensor indices;
  {
    NoGradGuard no_grad;
    indices = sort(x, d, largest).indices.narrow(d, 0, k).contiguous();
  }
  return {gather(x, d, indices), indices};
}

// --- Tensor members ---------------------------------------------------------------------
ValuesIndices Tensor::sort(int dim, bool descending) const { return anvil::sort(*this, dim, descending); }
ValuesIndices Tensor::topk(std::int64_t k, int dim, bool largest, bool sorted) const {
  return anvil::topk(*this, k, dim, largest, sorted);
}

}  // namespace anvil
