// Reductions: sum, prod, max, min, argmax, argmin are primitives; mean, var,
// std, norm and logsumexp are written here from them, once for every backend.
#include <cmath>
#include <limits>

#include "anvil/autograd.h"
#include "autograd/graph.h"
#include "core/observer.h"
#include "ops/autocast.h"
#include "ops/op_common.h"

namespace anvil {

using detail::ReduceOp;

namespace detail {

Tensor reduce_op(ReduceOp op, const char* opname, const Tensor& x, const Dims& dims, bool keepdim, DType out_dtype,
                 double scale) {
  ANVIL_PROFILE_OP(opname, &x);
  check_defined(opname, x);
  const TensorImpl& xi = x.impl_ref();
  const int nd = xi.dim();
  bool reduced[kMaxDims] = {};
  if (dims.empty()) {
    for (int i = 0; i < nd; ++i) reduced[i] = true;
  } else {
    for (std::int64_t d : dims) {
      const int w = wrap_dim(static_cast<int>(d), nd, opname);
      if (nd == 0) continue;
      ANVIL_CHECK(!reduced[w], IndexError, opname, ": dim ", w, " appears more than once; expected distinct dims, got ",
                  dims);
      reduced[w] = true;
    }
  }
  const bool is_arg = op == ReduceOp::ArgMax || op == ReduceOp::ArgMin;
  Shape out_shape;
  std::int64_t reduce_numel = 1;
  for (int i = 0; i < nd; ++i) {
    if (reduced[i]) {
      reduce_numel *= xi.shape()[i];
      if (keepdim) out_shape.push_back(1);
    } else {
      out_shape.push_back(xi.shape()[i]);
    }
  }
  if (reduce_numel == 0)
    ANVIL_CHECK(op == ReduceOp::Sum || op == ReduceOp::Prod || op == ReduceOp::SumSquares, IndexError, opname,
                ": cannot reduce over an empty dimension (no identity); expected a non-empty dim, got shape ",
                xi.shape());
  Tensor out = make_empty(out_shape, out_dtype, xi.device());
  if (!is_arg) record_reduce(op, out, x, dims, keepdim, scale);
  if (out.numel() == 0) return out;
  const Tensor in = is_arg ? x : cast(x, out_dtype);
  const TensorImpl& ii = in.impl_ref();

  ReduceArgs a;
  a.out = operand(out);
  a.in = operand(in);
  a.scale = scale;
  a.out_numel = out.numel();
  a.reduce_numel = reduce_numel;
  // Kept dims then reduced dims, size-1 dims dropped, neighbours merged when
  // the input steps through them as one.
  const Strides out_strides = contiguous_strides(out_shape);
  std::int64_t shape[kMaxDims], in_st[kMaxDims], out_st[kMaxDims];
  int n = 0, out_dim = 0;
  auto push = [&](std::int64_t size, std::int64_t ist, std::int64_t ost, bool can_merge) {
    if (size == 1) return;
    if (can_merge && n > 0 && in_st[n - 1] == ist * size && out_st[n - 1] == ost * size) {
      shape[n - 1] *= size;
      in_st[n - 1] = ist;
      out_st[n - 1] = ost;
      return;
    }
    shape[n] = size;
    in_st[n] = ist;
    out_st[n] = ost;
    ++n;
  };
  for (int i = 0; i < nd; ++i) {
    if (reduced[i]) {
      if (keepdim) ++out_dim;
      continue;
    }
    push(ii.shape()[i], ii.strides()[i], out_strides[out_dim++], true);
  }
  a.nkept = n;
  for (int i = 0; i < nd; ++i)
    if (reduced[i]) push(ii.shape()[i], ii.strides()[i], 0, n > a.nkept);
  a.nreduced = n - a.nkept;
  for (int i = 0; i < n; ++i) {
    a.shape[i] = shape[i];
    a.in.strides[i] = in_st[i];
    a.out.strides[i] = out_st[i];
  }
  dispatch::reduce(opname, ii.device(), op, a);
  return out;
}

DType sum_dtype(DType t) { return is_floating(t) ? t : DType::I64; }

void check_floating(const char* op, DType t) {
  ANVIL_CHECK(is_floating(t), DTypeError, op, ": needs a floating-point input; expected f16, bf16, f32 or f64, got ", t,
              "; convert with .to(f32)");
}

}  // namespace detail

using detail::reduce_op;

namespace {
// sum / prod with a requested dtype: x converted to it, reduced in its
// accumulator (i64 for the integers, whose low bits are what a narrower
// accumulator would hold), the result converted back to it.
Tensor reduce_as(Tensor (*reduce)(const Tensor&, const Dims&, bool, std::optional<DType>), const Tensor& x,
                 const Dims& dims, bool keepdim, DType dtype) {
  const Tensor out = reduce(x.dtype() == dtype ? x : x.to(dtype), dims, keepdim, std::nullopt);
  return out.dtype() == dtype ? out : out.to(dtype);
}
}  // namespace

Tensor sum(const Tensor& x, const Dims& dims, bool keepdim, std::optional<DType> dtype) {
  detail::check_defined("sum", x);
  if (dtype) return reduce_as(&sum, x, dims, keepdim, *dtype);
  if (auto c = detail::autocast_inputs(detail::AutocastList::Fp32, {&x})) return sum((*c)[0], dims, keepdim);
  return reduce_op(ReduceOp::Sum, "sum", x, dims, keepdim, detail::sum_dtype(x.dtype()));
}

Tensor prod(const Tensor& x, const Dims& dims, bool keepdim, std::optional<DType> dtype) {
  detail::check_defined("prod", x);
  if (dtype) return reduce_as(&prod, x, dims, keepdim, *dtype);
  if (auto c = detail::autocast_inputs(detail::AutocastList::Fp32, {&x})) return prod((*c)[0], dims, keepdim);
  return reduce_op(ReduceOp::Prod, "prod", x, dims, keepdim, detail::sum_dtype(x.dtype()));
}

namespace {
std::int64_t reduced_count(const Tensor& x, const Dims& dims, const char* op) {
  if (dims.empty()) return x.numel();
  std::int64_t n = 1;
  for (std::int64_t d : dims) n *= x.dim() == 0 ? 1 : x.shape()[detail::wrap_dim(static_cast<int>(d), x.dim(), op)];
  return n;
}
}  // namespace

Tensor mean(const Tensor& x, const Dims& dims, bool keepdim) {
  detail::check_defined("mean", x);
  if (auto c = detail::autocast_inputs(detail::AutocastList::Fp32, {&x})) return mean((*c)[0], dims, keepdim);
  detail::check_floating("mean", x.dtype());
  const std::int64_t n = reduced_count(x, dims, "mean");
  const double scale = n == 0 ? std::numeric_limits<double>::quiet_NaN() : 1.0 / static_cast<double>(n);
  return reduce_op(ReduceOp::Sum, "mean", x, dims, keepdim, x.dtype(), scale);
}

Tensor amax(const Tensor& x, const Dims& dims, bool keepdim) {
  detail::check_defined("amax", x);
  return reduce_op(ReduceOp::Max, "amax", x, dims, keepdim, x.dtype());
}

Tensor amin(const Tensor& x, const Dims& dims, bool keepdim) {
  detail::check_defined("amin", x);
  return reduce_op(ReduceOp::Min, "amin", x, dims, keepdim, x.dtype());
}

Tensor max(const Tensor& x) {
  detail::check_defined("max", x);
  return reduce_op(ReduceOp::Max, "max", x, {}, false, x.dtype());
}

Tensor min(const Tensor& x) {
  detail::check_defined("min", x);
  return reduce_op(ReduceOp::Min, "min", x, {}, false, x.dtype());
}

namespace {
// torch.max(x, dim): the arg reduction validates (under `name`), and the
// values are gathered at its indices, so they agree with them and the
// gradient reaches that index alone (GatherBackward), as in PyTorch.
ValuesIndices values_indices(ReduceOp arg_op, const char* name, const Tensor& x, int dim, bool keepdim) {
  detail::check_defined(name, x);
  Tensor indices = reduce_op(arg_op, name, x, dim, true, DType::I64);
  if (x.dim() == 0) return {x.clone(), indices};  // gather needs a dim to index
  dim = detail::wrap_dim(dim, x.dim(), name);
  Tensor values = gather(x, dim, indices);
  if (!keepdim) return {values.squeeze(dim), indices.squeeze(dim)};
  return {values, indices};
}
}  // namespace

ValuesIndices max(const Tensor& x, int dim, bool keepdim) {
  return values_indices(ReduceOp::ArgMax, "max", x, dim, keepdim);
}
ValuesIndices min(const Tensor& x, int dim, bool keepdim) {
  return values_indices(ReduceOp::ArgMin, "min", x, dim, keepdim);
}

namespace {
Tensor arg_reduce(ReduceOp op, const char* name, const Tensor& x, std::optional<int> dim, bool keepdim) {
  detail::check_defined(name, x);
  if (!dim) {
    Tensor r = reduce_op(op, name, x.reshape({-1}), {}, false, DType::I64);
    return keepdim ? r.reshape(Shape::filled(x.dim(), 1)) : r;
  }
  return reduce_op(op, name, x, *dim, keepdim, DType::I64);
}
}  // namespace

Tensor argmax(const Tensor& x, std::optional<int> dim, bool keepdim) {
  return arg_reduce(ReduceOp::ArgMax, "argmax", x, dim, keepdim);
}
Tensor argmin(const Tensor& x, std::optional<int> dim, bool keepdim) {
  return arg_reduce(ReduceOp::ArgMin, "argmin", x, dim, keepdim);
}

Tensor var(const Tensor& x, const Dims& dims, bool keepdim, std::int64_t correction) {
  ANVIL_PROFILE_OP("var", &x);
  detail::check_defined("var", x);
  detail::check_floating("var", x.dtype());
  const std::int64_t n = reduced_count(x, dims, "var");
  const Tensor centered = x - mean(x, dims, true);
  const double denom = static_cast<double>(n - correction);
  const double scale = denom <= 0 ? std::numeric_limits<double>::quiet_NaN() : 1.0 / denom;
  return reduce_op(ReduceOp::Sum, "var", centered * centered, dims, keepdim, x.dtype(), scale);
}

Tensor std(const Tensor& x, const Dims& dims, bool keepdim, std::int64_t correction) {
  ANVIL_PROFILE_OP("std", &x);
  return sqrt(var(x, dims, keepdim, correction));
}

Tensor norm(const Tensor& x, const Dims& dims, bool keepdim) {
  ANVIL_PROFILE_OP("norm", &x);
  detail::check_defined("norm", x);
  if (auto c = detail::autocast_inputs(detail::AutocastList::Fp32, {&x})) return norm((*c)[0], dims, keepdim);
  detail::check_floating("norm", x.dtype());
  Tensor out;
  {
    NoGradGuard no_grad;  // its own rule: the chain through sqrt is NaN at 0
    // A 16-bit sum of squares overflows long before its root does (f16:
    // 256^2): f16 and bf16 compute in f32 and round once, as PyTorch does.
    const Tensor xf = is_half(x.dtype()) ? x.to(f32) : x;
    out = sqrt(detail::reduce_op(ReduceOp::SumSquares, "norm", xf, dims, keepdim, xf.dtype())).to(x.dtype());
  }
  detail::record_norm(out, x, dims);
  return out;
}

Tensor logsumexp(const Tensor& x, const Dims& dims, bool keepdim) {
  ANVIL_PROFILE_OP("logsumexp", &x);
  detail::check_defined("logsumexp", x);
  if (auto c = detail::autocast_inputs(detail::AutocastList::Fp32, {&x})) return logsumexp((*c)[0], dims, keepdim);
  // Integers compute in the default float dtype; f16 and bf16 in f32 too,
  // rounded once at the end (a 16-bit sum of exps overflows f16 at 65504).
  const Tensor xf = is_floating(x.dtype()) && !is_half(x.dtype()) ? x : x.to(f32);
  const DType out_dtype = is_half(x.dtype()) ? x.dtype() : xf.dtype();
  // Shift by the max for stability; an all -inf (or +inf) slice shifts by 0
  // so the result is -inf (or inf) rather than nan.
  Tensor m = amax(xf, dims, true).detach();  // the shift cancels out of the gradient
  m = where(abs(m) == std::numeric_limits<double>::infinity(), 0.0, m);
  Tensor r = (log(sum(exp(xf - m), dims, true)) + m).to(out_dtype);
  if (keepdim) return r;
  return reduce_op(ReduceOp::Sum, "logsumexp", r, dims, false, r.dtype());
}

// --- Tensor members ---------------------------------------------------------------------
Tensor Tensor::sum(const Dims& dims, bool keepdim, std::optional<DType> dtype) const {
  return anvil::sum(*this, dims, keepdim, dtype);
}
Tensor Tensor::mean(const Dims& dims, bool keepdim) const { return anvil::mean(*this, dims, keepdim); }
Tensor Tensor::prod(const Dims& dims, bool keepdim, std::optional<DType> dtype) const {
  return anvil::prod(*this, dims, keepdim, dtype);
}
Tensor Tensor::amax(const Dims& dims, bool keepdim) const { return anvil::amax(*this, dims, keepdim); }
Tensor Tensor::amin(const Dims& dims, bool keepdim) const { return anvil::amin(*this, dims, keepdim); }
Tensor Tensor::max() const { return anvil::max(*this); }
Tensor Tensor::min() const { return anvil::min(*this); }
ValuesIndices Tensor::max(int dim, bool keepdim) const { return anvil::max(*this, dim, keepdim); }
ValuesIndices Tensor::min(int dim, bool keepdim) const { return anvil::min(*this, dim, keepdim); }
Tensor Tensor::argmax() const { return anvil::argmax(*this); }
Tensor Tensor::argmax(int dim, bool keepdim) const { return anvil::argmax(*this, dim, keepdim); }
Tensor Tensor::argmin() const { return anvil::argmin(*this); }
Tensor Tensor::argmin(int dim, bool keepdim) const { return anvil::argmin(*this, dim, keepdim); }
Tensor Tensor::var(const Dims& dims, bool keepdim, std::int64_t correction) const {
  return anvil::var(*this, dims, keepdim, correction);
}
Tensor Tensor::std(const Dims& dims, bool keepdim, std::int64_t correction) const {
  return anvil::std(*this, dims, keepdim, correction);
}
Tensor Tensor::norm(const Dims& dims, bool keepdim) const { return anvil::norm(*this, dims, keepdim); }
Tensor Tensor::logsumexp(const Dims& dims, bool keepdim) const { return anvil::logsumexp(*this, dims, keepdim); }

}  // namespace anvil
