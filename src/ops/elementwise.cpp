// Elementwise ops: what they mean (dtype promotion, broadcasting, the device
// check), once for every backend. Autograd records here too (see
// src/autograd).
#include <cmath>
#include <limits>
#include <optional>

#include "anvil/autocast.h"
#include "autograd/graph.h"
#include "core/observer.h"
#include "ops/autocast.h"
#include "ops/op_common.h"

namespace anvil {

using detail::BinaryOp;
using detail::UnaryOp;

namespace detail {

namespace {
// The dtype the kernel computes in: true division and pow of integers
// happen in the default float dtype, as in PyTorch.
DType compute_dtype(BinaryOp op, DType promoted) {
  if (computes_in_float(op) && !is_floating(promoted)) return DType::F32;
  return promoted;
}

void check_arithmetic(const char* op, BinaryOp bop, DType t) {
  ANVIL_CHECK(
      !(t == DType::Bool && row(bop).rule == BinaryRule::Numeric), DTypeError, op,
      bop == BinaryOp::Sub ? ": subtraction of bool tensors is not supported" : ": not defined for bool tensors",
      "; expected a numeric dtype, got bool; use logical ops or convert with .to(i64)");
  ANVIL_CHECK(!is_activation_backward(bop) || is_floating(t), DTypeError, op,
              ": defined for floating-point tensors only; expected f32, f64, f16 or bf16, got ", t);
  ANVIL_CHECK(!is_bitwise(bop) || !is_floating(t), DTypeError, op,
              ": defined for integer and bool tensors only, as in PyTorch; expected i32, i64, u8 or bool, got ", t);
  ANVIL_CHECK(!is_shift(bop) || t != DType::Bool, DTypeError, op,
              ": defined for integer tensors only, as in PyTorch; expected i32, i64 or u8, got bool");
}
}  // namespace

Tensor binary_op(BinaryOp op, const Tensor& a, const Tensor& b) {
  if (row(op).autocast == AutocastPolicy::Fp32)
    if (auto c = autocast_inputs(AutocastList::Fp32, {&a, &b})) return binary_op(op, (*c)[0], (*c)[1]);
  const char* opname = name(op);
  ANVIL_PROFILE_OP(opname, &a, &b);
  const Device d = check_same_device(opname, {&a, &b});
  const DType promoted = promote(a.impl_ref().dtype(), b.impl_ref().dtype());
  check_arithmetic(opname, op, promoted);
  const DType ct = compute_dtype(op, promoted);
  const DType out_t = is_comparison(op) ? DType::Bool : ct;
  const Shape& sa = a.impl_ref().shape();
  const Shape& sb = b.impl_ref().shape();
  const Shape shape = sa == sb ? sa : broadcast_shapes(sa, sb, opname);
  Tensor out = make_empty(shape, out_t, d, output_format(shape, {&a, &b}));
  record_binary(op, out, a, b);
  if (out.numel() == 0) return out;
  const Tensor ca = cast(a, ct), cb = cast(b, ct);
  dispatch::binary(d, op, elementwise_args(out, {&ca, &cb}));
  return out;
}

Tensor binary_scalar_op(BinaryOp op, const Tensor& a, const Scalar& s, bool scalar_first) {
  if (row(op).autocast == AutocastPolicy::Fp32)
    if (auto c = autocast_inputs(AutocastList::Fp32, {&a})) return binary_scalar_op(op, (*c)[0], s, scalar_first);
  const char* opname = name(op);
  ANVIL_PROFILE_OP(opname, &a, nullptr);
  check_defined(opname, a);
  const Device d = a.impl_ref().device();
  const DType promoted = promote(a.impl_ref().dtype(), s);
  check_arithmetic(opname, op, promoted);
  // As PyTorch: the result would be 0 for every base but ±1 (scalar.h gives
  // that for tensor exponents, as torch does).
  ANVIL_CHECK(!(op == BinaryOp::Pow && !scalar_first && !is_floating(promoted) && s.to_double() < 0), ValueError,
              opname, ": integers to negative integer powers are not allowed; expected an exponent >= 0, got ",
              s.to_double(), "; convert the base with .to(f32)");
  const DType ct = compute_dtype(op, promoted);
  Tensor out =
      make_empty(a.impl_ref().shape(), is_comparison(op) ? DType::Bool : ct, d, output_format(a.shape(), {&a}));
  record_binary_scalar(op, out, a, s, scalar_first);
  if (out.numel() == 0) return out;
  const Tensor ca = cast(a, ct);
  ElementwiseArgs args =
      scalar_first ? elementwise_args(out, {nullptr, &ca}, {s}, ct) : elementwise_args(out, {&ca, nullptr}, {s}, ct);
  dispatch::binary(d, op, args);
  return out;
}

Tensor activation_backward(BinaryOp op, const Tensor& grad, const Tensor& saved) {
  ANVIL_ASSERT(is_activation_backward(op), "activation_backward: ", name(op), " is not an activation's backward");
  return binary_op(op, grad, saved);
}

// In place: self = self op other. The result must fit self's dtype, and
// other must broadcast to self's shape (self never grows).
void binary_inplace(BinaryOp op, const Tensor& self, const Tensor* other, const Scalar* s) {
  const char* opname = name(op);
  ANVIL_PROFILE_OP(opname, &self, other);
  if (other)
    check_same_device(opname, {&self, other});
  else
    check_defined(opname, self);
  check_inplace(opname, self, other, "_");
  const TensorImpl& si = self.impl_ref();
  const DType promoted = other ? promote(si.dtype(), other->impl_ref().dtype()) : promote(si.dtype(), *s);
  const DType ct = compute_dtype(op, promoted);
  ANVIL_CHECK(!(is_floating(ct) && !is_floating(si.dtype())), DTypeError, opname, "_: result type ", ct,
              " cannot be stored in the in-place tensor; expected a result of dtype ", si.dtype(), ", got ", ct,
              "; use the out-of-place op");
  check_arithmetic(opname, op, si.dtype());
  if (other) {
    const Shape bs = broadcast_shapes(si.shape(), other->impl_ref().shape(), opname);
    ANVIL_CHECK(bs == si.shape(), ShapeError, opname, "_: other does not broadcast to the in-place tensor; expected ",
                "a shape broadcastable to ", si.shape(), ", got ", other->impl_ref().shape());
  }
  if (si.numel() == 0) return;
  const DType t = si.dtype();
  if (other) {
    const Tensor co = unaliased(cast(*other, t), self);
    dispatch::binary(si.device(), op, elementwise_args(self, {&self, &co}));
  } else {
    dispatch::binary(si.device(), op, elementwise_args(self, {&self, nullptr}, {*s}, t));
  }
}

Tensor unary_op(UnaryOp op, const Tensor& x, const UnaryParams& params) {
  const char* opname = name(op);
  ANVIL_PROFILE_OP(opname, &x);
  check_defined(opname, x);
  // Autocast's f32 list (anvil/autocast.h): the ops whose 16-bit results lose the
  // most (exponentials, logarithms, reciprocals), marked Fp32 in anvil/ops.def.
  if (row(op).autocast == AutocastPolicy::Fp32)
    if (auto c = autocast_inputs(AutocastList::Fp32, {&x})) return unary_op(op, (*c)[0], params);
  const TensorImpl& xi = x.impl_ref();
  DType t = xi.dtype();
  if (computes_in_float(op) && !is_floating(t)) t = DType::F32;  // integers compute in the default float dtype
  if (is_rounding(op)) {
    ANVIL_CHECK(t != DType::Bool, DTypeError, opname, ": not defined for bool tensors; expected a numeric dtype, ",
                "got bool");
    if (!is_floating(t)) return clone(x);  // an integer is its own floor, ceil and round, as in PyTorch
  }
  if (row(op).rule == UnaryRule::Numeric)
    ANVIL_CHECK(t != DType::Bool, DTypeError, opname, ": not defined for bool tensors; expected a numeric dtype, ",
                "got bool; use logical_not");
  // A bool result (logical_not, isnan) reads its input in the input's own dtype.
  const bool to_bool = row(op).rule == UnaryRule::ToBool;
  Tensor out = make_empty(xi.shape(), to_bool ? DType::Bool : t, xi.device(), output_format(xi.shape(), {&x}));
  record_unary(op, out, x, params);
  if (out.numel() == 0) return out;
  const Tensor cx = cast(x, t);
  dispatch::unary(xi.device(), op, params, elementwise_args(out, {&cx}));
  return out;
}

void unary_inplace(UnaryOp op, const Tensor& x, const UnaryParams& params = {}) {
  const char* opname = name(op);
  ANVIL_PROFILE_OP(opname, &x);
  check_defined(opname, x);
  const TensorImpl& xi = x.impl_ref();
  check_inplace(opname, x, nullptr, "_");
  if (computes_in_float(op))
    ANVIL_CHECK(is_floating(xi.dtype()), DTypeError, opname,
                "_: result is floating point; expected a float tensor, got ", xi.dtype());
  if (xi.numel() == 0) return;
  dispatch::unary(xi.device(), op, params, elementwise_args(x, {&x}));
}

UnaryParams clamp_params(const char* op, DType t, const std::optional<Scalar>& lo, const std::optional<Scalar>& hi) {
  ANVIL_CHECK(lo || hi, ValueError, op, ": at least one bound is needed; expected lo or hi, got neither");
  ANVIL_CHECK(t != DType::Bool, DTypeError, op, ": not defined for bool tensors; expected a numeric dtype, got bool");
  UnaryParams p;
  p.lo = lo ? lo->to_double() : -std::numeric_limits<double>::infinity();
  p.hi = hi ? hi->to_double() : std::numeric_limits<double>::infinity();
  return p;
}

}  // namespace detail

using detail::binary_op;
using detail::binary_scalar_op;

// The elementwise ops of two operands (anvil/ops.def): free functions and methods,
// in the forms their rows name.
#define ANVIL_BINARY_TENSOR(Op, name)                                                     \
  Tensor name(const Tensor& a, const Tensor& b) { return binary_op(BinaryOp::Op, a, b); } \
  Tensor Tensor::name(const Tensor& other) const { return binary_op(BinaryOp::Op, *this, other); }
#define ANVIL_BINARY_SCALAR(Op, name)                                                                   \
  Tensor name(const Tensor& a, const Scalar& b) { return binary_scalar_op(BinaryOp::Op, a, b, false); } \
  Tensor Tensor::name(const Scalar& other) const { return binary_scalar_op(BinaryOp::Op, *this, other, false); }
#define ANVIL_BINARY_SCALAR_FIRST(Op, name) \
  Tensor name(const Scalar& a, const Tensor& b) { return binary_scalar_op(BinaryOp::Op, b, a, true); }
#include "anvil/ops.def"
Tensor add(const Tensor& a, const Tensor& b, const Scalar& alpha) { return binary_op(BinaryOp::Add, a, mul(b, alpha)); }
Tensor operator&(const Tensor& a, const Tensor& b) { return bitwise_and(a, b); }
Tensor operator|(const Tensor& a, const Tensor& b) { return bitwise_or(a, b); }
Tensor operator^(const Tensor& a, const Tensor& b) { return bitwise_xor(a, b); }
Tensor operator&(const Tensor& a, const Scalar& b) { return bitwise_and(a, b); }
Tensor operator|(const Tensor& a, const Scalar& b) { return bitwise_or(a, b); }
Tensor operator^(const Tensor& a, const Scalar& b) { return bitwise_xor(a, b); }

// The elementwise ops of one tensor (anvil/ops.def): free function and method.
#define ANVIL_UNARY_OP(Op, name, ...)                                       \
  Tensor name(const Tensor& x) { return detail::unary_op(UnaryOp::Op, x); } \
  Tensor Tensor::name() const { return detail::unary_op(UnaryOp::Op, *this); }
#define ANVIL_UNARY_OP_WITH_PARAMS(...)
#include "anvil/ops.def"
Tensor clamp(const Tensor& x, std::optional<Scalar> lo, std::optional<Scalar> hi) {
  detail::check_defined("clamp", x);
  // The bounds take part in the result's dtype, as in PyTorch: an integer
  // tensor clamped to 2.5 is a float one.
  DType t = x.dtype();
  if (t != DType::Bool) {
    if (lo) t = promote(t, *lo);
    if (hi) t = promote(t, *hi);
  }
  if (t != x.dtype()) return clamp(x.to(t), lo, hi);
  return detail::unary_op(UnaryOp::Clamp, x, detail::clamp_params("clamp", x.dtype(), lo, hi));
}

namespace {
Tensor where_impl(const Tensor& cond, const Tensor* a, const Tensor* b, const Scalar* sa, const Scalar* sb) {
  ANVIL_PROFILE_OP("where", &cond, a, b);
  std::vector<const Tensor*> ts{&cond};
  if (a) ts.push_back(a);
  if (b) ts.push_back(b);
  Device d;
  if (ts.size() == 3)
    d = detail::check_same_device("where", {ts[0], ts[1], ts[2]});
  else if (ts.size() == 2)
    d = detail::check_same_device("where", {ts[0], ts[1]});
  else
    d = detail::check_same_device("where", {ts[0]});
  ANVIL_CHECK(cond.dtype() == DType::Bool, DTypeError, "where: condition must be bool; expected bool, got ",
              cond.dtype(), "; compare first, e.g. x > 0");
  DType t;
  if (a && b)
    t = promote(a->dtype(), b->dtype());
  else if (a)
    t = promote(a->dtype(), *sb);
  else
    t = promote(b->dtype(), *sa);
  Shape shape = cond.shape();
  if (a) shape = broadcast_shapes(shape, a->shape(), "where");
  if (b) shape = broadcast_shapes(shape, b->shape(), "where");
  Tensor out = detail::make_empty(shape, t, d, detail::output_format(shape, {a, b, &cond}));
  detail::record_where(out, cond, a, b);
  if (out.numel() == 0) return out;
  const Tensor ca = a ? detail::cast(*a, t) : Tensor(), cb = b ? detail::cast(*b, t) : Tensor();
  detail::ElementwiseArgs args;
  if (a && b)
    args = detail::elementwise_args(out, {&cond, &ca, &cb});
  else if (a)
    args = detail::elementwise_args(out, {&cond, &ca, nullptr}, {*sb}, t);
  else
    args = detail::elementwise_args(out, {&cond, nullptr, &cb}, {*sa}, t);
  detail::dispatch::where(d, args);
  return out;
}
}  // namespace

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  return where_impl(cond, &a, &b, nullptr, nullptr);
}
Tensor where(const Tensor& cond, const Scalar& a, const Tensor& b) {
  return where_impl(cond, nullptr, &b, &a, nullptr);
}
Tensor where(const Tensor& cond, const Tensor& a, const Scalar& b) {
  return where_impl(cond, &a, nullptr, nullptr, &b);
}

namespace {
// value as a scalar of dtype t (a float truncates into an integer dtype, as in PyTorch),
// so that where() keeps t.
Scalar scalar_of(DType t, const Scalar& value) {
  if (is_floating(t)) return Scalar(value.to_double());
  if (t == DType::Bool) return Scalar(value.to<bool>());
  return Scalar(value.to<std::int64_t>());
}

Tensor triangle(const char* op, const Tensor& x, std::int64_t diagonal, bool lower) {
  detail::check_defined(op, x);
  ANVIL_CHECK(x.dim() >= 2, ShapeError, op, ": needs a matrix or a batch of them; expected at least 2 dims, got ",
              x.dim());
  const Device d = x.device();
  const Tensor rows = arange(x.size(-2), d, DType::I64).unsqueeze(1);
  const Tensor cols = arange(x.size(-1), d, DType::I64);
  const Tensor offset = cols - rows;  // [rows, cols]: column - row
  const Tensor keep = lower ? offset <= diagonal : offset >= diagonal;
  return where(keep, x, scalar_of(x.dtype(), 0));
}
}  // namespace

Tensor masked_fill(const Tensor& x, const Tensor& mask, const Scalar& value) {
  detail::check_defined("masked_fill", x);
  detail::check_defined("masked_fill", mask);
  ANVIL_CHECK(mask.dtype() == DType::Bool, DTypeError, "masked_fill: mask must be bool; expected bool, got ",
              mask.dtype(), "; compare first, e.g. x > 0");
  const Tensor out = where(mask, scalar_of(x.dtype(), value), x);
  return out.dtype() == x.dtype() ? out : out.to(x.dtype());
}
Tensor tril(const Tensor& x, std::int64_t diagonal) { return triangle("tril", x, diagonal, true); }
Tensor triu(const Tensor& x, std::int64_t diagonal) { return triangle("triu", x, diagonal, false); }

Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
Tensor operator+(const Tensor& a, const Scalar& b) { return add(a, b); }
Tensor operator-(const Tensor& a, const Scalar& b) { return sub(a, b); }
Tensor operator*(const Tensor& a, const Scalar& b) { return mul(a, b); }
Tensor operator/(const Tensor& a, const Scalar& b) { return div(a, b); }
Tensor operator+(const Scalar& a, const Tensor& b) { return add(b, a); }
Tensor operator-(const Scalar& a, const Tensor& b) { return sub(a, b); }
Tensor operator*(const Scalar& a, const Tensor& b) { return mul(b, a); }
Tensor operator/(const Scalar& a, const Tensor& b) { return div(a, b); }
Tensor operator-(const Tensor& a) { return neg(a); }
Tensor operator==(const Tensor& a, const Tensor& b) { return eq(a, b); }
Tensor operator!=(const Tensor& a, const Tensor& b) { return ne(a, b); }
Tensor operator<(const Tensor& a, const Tensor& b) { return lt(a, b); }
Tensor operator<=(const Tensor& a, const Tensor& b) { return le(a, b); }
Tensor operator>(const Tensor& a, const Tensor& b) { return gt(a, b); }
Tensor operator>=(const Tensor& a, const Tensor& b) { return ge(a, b); }
Tensor operator==(const Tensor& a, const Scalar& b) { return eq(a, b); }
Tensor operator!=(const Tensor& a, const Scalar& b) { return ne(a, b); }
Tensor operator<(const Tensor& a, const Scalar& b) { return lt(a, b); }
Tensor operator<=(const Tensor& a, const Scalar& b) { return le(a, b); }
Tensor operator>(const Tensor& a, const Scalar& b) { return gt(a, b); }
Tensor operator>=(const Tensor& a, const Scalar& b) { return ge(a, b); }
Tensor& operator+=(Tensor& a, const Tensor& b) { return a.add_(b); }
Tensor& operator-=(Tensor& a, const Tensor& b) { return a.sub_(b); }
Tensor& operator*=(Tensor& a, const Tensor& b) { return a.mul_(b); }
Tensor& operator/=(Tensor& a, const Tensor& b) { return a.div_(b); }
Tensor& operator+=(Tensor& a, const Scalar& b) { return a.add_(b); }
Tensor& operator-=(Tensor& a, const Scalar& b) { return a.sub_(b); }
Tensor& operator*=(Tensor& a, const Scalar& b) { return a.mul_(b); }
Tensor& operator/=(Tensor& a, const Scalar& b) { return a.div_(b); }

namespace {
void binary_out(BinaryOp op, Tensor& out, const Tensor& a, const Tensor& b) {
  const char* opname = detail::name(op);
  ANVIL_PROFILE_OP(opname, &a, &b);
  const Device d = detail::check_same_device(opname, {&out, &a, &b});
  detail::check_inplace(opname, out, &a);
  detail::check_inplace(opname, out, &b);
  const Shape bs = broadcast_shapes(a.shape(), b.shape(), opname);
  ANVIL_CHECK(bs == out.shape(), ShapeError, opname, "_out: out has the wrong shape; expected ", bs, ", got ",
              out.shape());
  const DType t = out.dtype();
  ANVIL_CHECK(promote(a.dtype(), b.dtype()) == t, DTypeError, opname, "_out: out has the wrong dtype; expected ",
              promote(a.dtype(), b.dtype()), ", got ", t);
  if (out.numel() == 0) return;
  const Tensor ua = detail::unaliased(a, out), ub = detail::unaliased(b, out);
  detail::dispatch::binary(d, op, detail::elementwise_args(out, {&ua, &ub}));
}
}  // namespace

void add_out(Tensor& out, const Tensor& a, const Tensor& b) { binary_out(BinaryOp::Add, out, a, b); }
void mul_out(Tensor& out, const Tensor& a, const Tensor& b) { binary_out(BinaryOp::Mul, out, a, b); }

// --- Tensor members that are elementwise ops --------------------------------------
Tensor Tensor::clamp(std::optional<Scalar> lo, std::optional<Scalar> hi) const { return anvil::clamp(*this, lo, hi); }
Tensor Tensor::masked_fill(const Tensor& mask, const Scalar& value) const {
  return anvil::masked_fill(*this, mask, value);
}
Tensor Tensor::tril(std::int64_t diagonal) const { return anvil::tril(*this, diagonal); }
Tensor Tensor::triu(std::int64_t diagonal) const { return anvil::triu(*this, diagonal); }
Tensor Tensor::add(const Tensor& o, const Scalar& alpha) const { return anvil::add(*this, o, alpha); }
Tensor Tensor::where(const Tensor& condition, const Tensor& other) const {
  return anvil::where(condition, *this, other);
}
Tensor Tensor::where(const Tensor& condition, const Scalar& other) const {
  return anvil::where(condition, *this, other);
}

Tensor& Tensor::add_(const Tensor& o) {
  detail::binary_inplace(BinaryOp::Add, *this, &o, nullptr);
  return *this;
}
Tensor& Tensor::add_(const Scalar& o) {
  detail::binary_inplace(BinaryOp::Add, *this, nullptr, &o);
  return *this;
}
Tensor& Tensor::sub_(const Tensor& o) {
  detail::binary_inplace(BinaryOp::Sub, *this, &o, nullptr);
  return *this;
}
Tensor& Tensor::sub_(const Scalar& o) {
  detail::binary_inplace(BinaryOp::Sub, *this, nullptr, &o);
  return *this;
}
Tensor& Tensor::mul_(const Tensor& o) {
  detail::binary_inplace(BinaryOp::Mul, *this, &o, nullptr);
  return *this;
}
Tensor& Tensor::mul_(const Scalar& o) {
  detail::binary_inplace(BinaryOp::Mul, *this, nullptr, &o);
  return *this;
}
Tensor& Tensor::div_(const Tensor& o) {
  detail::binary_inplace(BinaryOp::Div, *this, &o, nullptr);
  return *this;
}
Tensor& Tensor::div_(const Scalar& o) {
  detail::binary_inplace(BinaryOp::Div, *this, nullptr, &o);
  return *this;
}
Tensor& Tensor::pow_(const Scalar& o) {
  detail::binary_inplace(BinaryOp::Pow, *this, nullptr, &o);
  return *this;
}
Tensor& Tensor::clamp_(std::optional<Scalar> lo, std::optional<Scalar> hi) {
  detail::check_defined("clamp", *this);
  for (const auto& bound : {lo, hi})
    ANVIL_CHECK(!bound || promote(dtype(), *bound) == dtype() || dtype() == DType::Bool, DTypeError,
                "clamp_: a bound of ", *bound, " makes the result ", promote(dtype(), *bound),
                ", which cannot be stored in the in-place tensor; expected a result of dtype ", dtype(),
                "; use the out-of-place clamp");
  detail::unary_inplace(UnaryOp::Clamp, *this, detail::clamp_params("clamp", dtype(), lo, hi));
  return *this;
}
Tensor& Tensor::relu_() {
  detail::unary_inplace(UnaryOp::Relu, *this);
  return *this;
}
Tensor& Tensor::exp_() {
  detail::unary_inplace(UnaryOp::Exp, *this);
  return *this;
}
Tensor& Tensor::neg_() {
  detail::unary_inplace(UnaryOp::Neg, *this);
  return *this;
}

Tensor& Tensor::fill_(const Scalar& v) {
  ANVIL_PROFILE_OP("fill_", this);
  detail::check_defined("fill_", *this);
  detail::check_inplace("fill_", *this);
  const detail::TensorImpl& si = impl_ref();
  if (si.numel() == 0) return *this;
  if (si.is_contiguous()) {
    detail::dispatch::fill("fill_", si.device(), detail::operand(*this), si.numel(), v);
  } else {
    detail::dispatch::copy("fill_", si.device(), detail::elementwise_args(*this, {nullptr}, {v}, si.dtype()));
  }
  return *this;
}
Tensor& Tensor::zero_() { return fill_(0); }

Tensor& Tensor::copy_(const Tensor& src) {
  detail::check_same_device("copy_", {this, &src});
  detail::check_inplace("copy_", *this, &src);
  const Shape bs = broadcast_shapes(shape(), src.shape(), "copy_");
  ANVIL_CHECK(bs == shape(), ShapeError,
              "copy_: source does not broadcast to the destination; expected a shape "
              "broadcastable to ",
              shape(), ", got ", src.shape());
  detail::copy_into(*this, src);
  return *this;
}

// ---- Lazy: a unary op fused into a binary op (Note [Unary into binary]) ---------------

namespace detail {

struct LazyAccess {
  static const Tensor& input(const Lazy& x) { return x.x_; }
  static UnaryOp op(const Lazy& x) { return x.op_ == Lazy::kNoOp ? UnaryOp::Count : static_cast<UnaryOp>(x.op_); }
};

namespace {

// `op` on the two operands (a null Lazy is the C++ scalar `s`, on that side)
// in one fused pass, or nothing when the fused kernel
// does not apply (see anvil/ops.h): the caller then runs op by op, which also
// raises every error the operands deserve.
std::optional<Tensor> try_unary_binary(BinaryOp op, const Lazy* a, const Lazy* b, const Scalar* s) {
  const Lazy* lazies[2] = {a, b};
  const Tensor* first = nullptr;
  BinaryPrologue prologue;
  for (int i = 0; i < 2; ++i) {
    if (!lazies[i]) continue;
    const Tensor& x = LazyAccess::input(*lazies[i]);
    prologue.pre[i] = LazyAccess::op(*lazies[i]);
    // A unary op whose result is not its input's dtype (logical_not) is not a prologue.
    if (prologue.pre[i] != UnaryOp::Count && row(prologue.pre[i]).rule == UnaryRule::ToBool) return std::nullopt;
    if (!x.defined() || !is_floating(x.dtype()) || !x.is_contiguous()) return std::nullopt;
    if (first && (x.device() != first->device() || x.dtype() != first->dtype() || x.shape() != first->shape()))
      return std::nullopt;
    if (!first) first = &x;
  }
  if (!prologue.any() || !first) return std::nullopt;
  const Tensor& x = *first;
  const DType t = x.dtype();
  const Device d = x.device();
  if (s && promote(t, *s) != t) return std::nullopt;
  const Tensor* inputs[2] = {a ? &LazyAccess::input(*a) : nullptr, b ? &LazyAccess::input(*b) : nullptr};
  if (should_record({inputs[0], inputs[1]}) || amp::is_autocast_enabled(d.type())) return std::nullopt;
  if (!has_fused(x, {FusedOp::UnaryBinary})) return std::nullopt;
  Tensor out = make_empty(x.shape(), t, d, output_format(x.shape(), {inputs[0], inputs[1]}));
  if (out.numel() == 0) return out;
  const ElementwiseArgs args =
      s ? elementwise_args(out, {inputs[0], inputs[1]}, {*s}, t) : elementwise_args(out, {inputs[0], inputs[1]});
  check_supported(name(op), Primitive::Binary, t, d);
  ANVIL_PROFILE_OP(name(op), inputs[0], inputs[1]);
  dispatch::unary_binary(d, op, prologue, args);
  return out;
}

Tensor lazy_binary(BinaryOp op, const Lazy& a, const Lazy& b) {
  if (auto out = try_unary_binary(op, &a, &b, nullptr)) return *std::move(out);
  return binary_op(op, a.eval(), b.eval());
}

Tensor lazy_binary(BinaryOp op, const Lazy& a, const Scalar& s, bool scalar_first) {
  std::optional<Tensor> out =
      scalar_first ? try_unary_binary(op, nullptr, &a, &s) : try_unary_binary(op, &a, nullptr, &s);
  if (out) return *std::move(out);
  return binary_scalar_op(op, a.eval(), s, scalar_first);
}

}  // namespace
}  // namespace detail

Lazy Lazy::then(std::uint8_t op) const { return Lazy(eval(), op); }
Tensor Lazy::eval() const { return op_ == kNoOp ? x_ : detail::unary_op(static_cast<UnaryOp>(op_), x_); }

#define ANVIL_UNARY_OP(Op, name, ...) \
  Lazy Lazy::name() const { return then(static_cast<std::uint8_t>(UnaryOp::Op)); }
#define ANVIL_UNARY_OP_WITH_PARAMS(...)
#include "anvil/ops.def"

Tensor operator+(const Lazy& a, const Lazy& b) { return detail::lazy_binary(BinaryOp::Add, a, b); }
Tensor operator-(const Lazy& a, const Lazy& b) { return detail::lazy_binary(BinaryOp::Sub, a, b); }
Tensor operator*(const Lazy& a, const Lazy& b) { return detail::lazy_binary(BinaryOp::Mul, a, b); }
Tensor operator/(const Lazy& a, const Lazy& b) { return detail::lazy_binary(BinaryOp::Div, a, b); }
Tensor operator+(const Lazy& a, const Scalar& b) { return detail::lazy_binary(BinaryOp::Add, a, b, false); }
Tensor operator-(const Lazy& a, const Scalar& b) { return detail::lazy_binary(BinaryOp::Sub, a, b, false); }
Tensor operator*(const Lazy& a, const Scalar& b) { return detail::lazy_binary(BinaryOp::Mul, a, b, false); }
Tensor operator/(const Lazy& a, const Scalar& b) { return detail::lazy_binary(BinaryOp::Div, a, b, false); }
Tensor operator+(const Scalar& a, const Lazy& b) { return detail::lazy_binary(BinaryOp::Add, b, a, false); }
Tensor operator-(const Scalar& a, const Lazy& b) { return detail::lazy_binary(BinaryOp::Sub, b, a, true); }
Tensor operator*(const Scalar& a, const Lazy& b) { return detail::lazy_binary(BinaryOp::Mul, b, a, false); }
Tensor operator/(const Scalar& a, const Lazy& b) { return detail::lazy_binary(BinaryOp::Div, b, a, true); }

}  // namespace anvil
