// matmul and friends, on the GEMM primitive. The frontend resolves
// broadcasting of batch dims and strides into (batch, m, n, k, ld, trans) so
// a backend only ever sees a strided batched GEMM.
#include "anvil/autograd.h"
#include "autograd/graph.h"
#include "core/observer.h"
#include "ops/autocast.h"
#include "ops/op_common.h"

namespace anvil {

namespace detail {

namespace {

// A matrix operand (the last two dims of `t`) in GEMM form, or nothing when
// neither of its dims has unit stride (the caller then makes it contiguous).
bool gemm_matrix(const Tensor& t, GemmMatrix& g) {
  const int nd = t.dim();
  const std::int64_t rows = t.shape()[nd - 2], cols = t.shape()[nd - 1];
  const std::int64_t rs = t.strides()[nd - 2], cs = t.strides()[nd - 1];
  g.data = t.impl_ref().storage()->data();
  g.offset = t.offset();
  if (cs == 1 || cols == 1) {
    g.trans = false;
    g.ld = std::max<std::int64_t>({rs, cols, 1});
    return rows == 1 || rs >= cols;
  }
  if (rs == 1 || rows == 1) {
    g.trans = true;
    g.ld = std::max<std::int64_t>({cs, rows, 1});
    return cols == 1 || cs >= rows;
  }
  return false;
}

// The single stride that steps through batch dims [begin, end) of `t` in
// order, if there is one (always when at most one of them is longer than 1).
bool batch_stride(const Tensor& t, int begin, int end, std::int64_t& stride) {
  stride = 0;
  std::int64_t expected = -1;
  for (int i = end - 1; i >= begin; --i) {
    const std::int64_t size = t.shape()[i], st = t.strides()[i];
    if (size == 1) continue;
    if (expected == -1) {
      stride = st;
      expected = st * size;
    } else if (st == expected) {
      expected = st * size;
    } else {
      return false;
    }
  }
  return true;
}

// The first split of the batch dims at which both operands step through
// [0, split) and [split, nbatch) by one stride each, or 0 where there is
// none (Note [Two-level batches] in core/backend.h).
int two_level_split(const Tensor& a, const Tensor& b, int nbatch) {
  for (int split = 1; split < nbatch; ++split) {
    std::int64_t unused = 0;
    if (batch_stride(a, 0, split, unused) && batch_stride(a, split, nbatch, unused) &&
        batch_stride(b, 0, split, unused) && batch_stride(b, split, nbatch, unused))
      return split;
  }
  return 0;
}

}  // namespace

// out[..., m, n] (= or +=) a[..., m, k] @ b[..., k, n], plus `bias` (a
// contiguous row of n, where the backend takes FusedOp::GemmBias) in every
// row; batch dims already broadcast to out's. `out` is contiguous.
void gemm_into(const Tensor& out, Tensor a, Tensor b, double beta, const Tensor* bias = nullptr) {
  const int nd = out.dim(), nbatch = nd - 2;
  const std::int64_t m = out.shape()[nd - 2], n = out.shape()[nd - 1], k = a.shape()[nd - 1];
  GemmArgs g;
  g.dtype = out.dtype();
  g.m = m;
  g.n = n;
  g.k = k;
  g.beta = beta;
  g.batch = 1;
  for (int i = 0; i < nbatch; ++i) g.batch *= out.shape()[i];
  const bool matrices = gemm_matrix(a, g.a) && gemm_matrix(b, g.b);
  const bool one_level =
      matrices && batch_stride(a, 0, nbatch, g.a.batch_stride) && batch_stride(b, 0, nbatch, g.b.batch_stride);
  const int split = matrices && !one_level && g.batch > 0 && has_fused(out, {FusedOp::GemmTwoLevelBatch})
                        ? two_level_split(a, b, nbatch)
                        : 0;
  const std::pair<Tensor*, GemmMatrix*> operands[] = {{&a, &g.a}, {&b, &g.b}};
  if (split > 0) {
    g.inner_batch = 1;
    for (int i = split; i < nbatch; ++i) g.inner_batch *= out.shape()[i];
    for (auto [t, x] : operands) {
      batch_stride(*t, 0, split, x->outer_stride);
      batch_stride(*t, split, nbatch, x->batch_stride);
    }
  } else if (!one_level) {
    // An operand that is no GEMM matrix over one batch stride is copied into
    // one: row-major, since a copy in its own layout (clone() keeps a
    // channels-last one) may be no GEMM matrix either.
    for (auto [t, x] : operands)
      if (!gemm_matrix(*t, *x) || !batch_stride(*t, 0, nbatch, x->batch_stride)) {
        *t = t->contiguous();
        const bool copied = gemm_matrix(*t, *x) && batch_stride(*t, 0, nbatch, x->batch_stride);
        ANVIL_ASSERT(copied, "matmul: a contiguous copy of ", t->shape(), " is no GEMM matrix");
      }
  }
  g.c.data = out.impl_ref().storage()->data();
  g.c.offset = out.offset();
  g.c.ld = std::max<std::int64_t>(n, 1);
  g.c.batch_stride = m * n;
  g.c.outer_stride = g.inner_batch * m * n;
  if (bias != nullptr) {
    g.bias = bias->impl_ref().storage()->data();
    g.bias_offset = bias->offset();
  }
  // A batch against one shared B (a Linear or conv weight broadcast over
  // the batch) whose A rows are evenly spaced is a single taller GEMM: stack
  // the batch into M. Backends then see one large product, not many small.
  if (g.batch > 1 && !is_two_level(g) && g.b.batch_stride == 0 && !g.a.trans && g.a.batch_stride == g.m * g.a.ld) {
    g.m *= g.batch;
    g.batch = 1;
  }
  dispatch::gemm("matmul", out.impl_ref().device(), g);
}

}  // namespace detail

Tensor matmul(const Tensor& a, const Tensor& b) {
  ANVIL_PROFILE_OP("matmul", &a, &b);
  if (auto c = detail::autocast_inputs(detail::AutocastList::LowerPrecision, {&a, &b})) return matmul((*c)[0], (*c)[1]);
  const Device d = detail::check_same_device("matmul", {&a, &b});
  ANVIL_CHECK(a.dim() >= 1 && b.dim() >= 1, ShapeError,
              "matmul: both arguments need at least 1 dim; expected tensors with >= 1 dim, got ", a.shape(), " and ",
              b.shape());
  ANVIL_CHECK(a.dtype() == b.dtype(), DTypeError, "matmul: both arguments must have one dtype; expected ", a.dtype(),
              " and ", a.dtype(), ", got ", a.dtype(), " and ", b.dtype(), "; convert one with .to(", a.dtype(), ")");
  const DType t = a.dtype();
  ANVIL_CHECK(t != DType::Bool, DTypeError, "matmul: not defined for bool tensors; expected a numeric dtype, got bool");
  // 1-D operands become matrices and their dim is dropped from the result.
  const Tensor a2 = a.dim() == 1 ? a.unsqueeze(0) : a;
  const Tensor b2 = b.dim() == 1 ? b.unsqueeze(1) : b;
  const std::int64_t k = a2.shape().back(), kb = b2.shape()[b2.dim() - 2];
  ANVIL_CHECK(k == kb, ShapeError, "matmul: inner dimensions do not match; expected a.size(-1) == b.size(-2), got a ",
              a.shape(), " and b ", b.shape());
  const Shape batch_a(std::span<const std::int64_t>(a2.shape().begin(), a2.dim() - 2));
  const Shape batch_b(std::span<const std::int64_t>(b2.shape().begin(), b2.dim() - 2));
  Shape out_shape;
  try {
    out_shape = broadcast_shapes(batch_a, batch_b, "matmul");
  } catch (const ShapeError&) {
    throw ShapeError(
        detail::cat("matmul: batch dimensions do not broadcast; expected batch shapes equal or 1 per dim, "
                    "got a ",
                    a.shape(), " and b ", b.shape()));
  }
  const std::int64_t m = a2.shape()[a2.dim() - 2], n = b2.shape().back();
  Shape a_full = out_shape, b_full = out_shape;
  a_full.push_back(m);
  a_full.push_back(k);
  b_full.push_back(k);
  b_full.push_back(n);
  out_shape.push_back(m);
  out_shape.push_back(n);
  Tensor out = detail::make_empty(out_shape, t, d);
  detail::record_matmul(out, a2, b2);
  if (out.numel() > 0) {
    if (k == 0) {
      out.zero_();
    } else {
      detail::gemm_into(out, detail::cast(a2, t).expand(a_full), detail::cast(b2, t).expand(b_full), 0.0);
    }
  }
  if (a.dim() == 1 && b.dim() == 1) return out.reshape({});
  if (a.dim() == 1) return out.squeeze(-2);
  if (b.dim() == 1) return out.squeeze(-1);
  return out;
}

Tensor mm(const Tensor& a, const Tensor& b) {
  ANVIL_PROFILE_OP("mm", &a, &b);
  detail::check_same_device("mm", {&a, &b});
  ANVIL_CHECK(a.dim() == 2 && b.dim() == 2, ShapeError, "mm: both arguments must be 2-D; expected matrices, got ",
              a.shape(), " and ", b.shape());
  ANVIL_CHECK(a.shape()[1] == b.shape()[0], ShapeError,
              "mm: inner dimensions do not match; expected a.size(1) == b.size(0), got a ", a.shape(), " and b ",
              b.shape());
  return matmul(a, b);
}

Tensor bmm(const Tensor& a, const Tensor& b) {
  ANVIL_PROFILE_OP("bmm", &a, &b);
  detail::check_same_device("bmm", {&a, &b});
  ANVIL_CHECK(a.dim() == 3 && b.dim() == 3, ShapeError,
              "bmm: both arguments must be 3-D; expected [batch, n, m] tensors, got ", a.shape(), " and ", b.shape());
  ANVIL_CHECK(a.shape()[0] == b.shape()[0], ShapeError, "bmm: batch sizes differ; expected equal batch sizes, got ",
              a.shape(), " and ", b.shape());
  return matmul(a, b);
}

Tensor dot(const Tensor& a, const Tensor& b) {
  ANVIL_PROFILE_OP("dot", &a, &b);
  detail::check_same_device("dot", {&a, &b});
  ANVIL_CHECK(a.dim() == 1 && b.dim() == 1, ShapeError, "dot: both arguments must be 1-D; expected vectors, got ",
              a.shape(), " and ", b.shape());
  ANVIL_CHECK(a.numel() == b.numel(), ShapeError, "dot: lengths differ; expected equal lengths, got ", a.shape(),
              " and ", b.shape());
  return matmul(a, b);
}

Tensor outer(const Tensor& a, const Tensor& b) {
  detail::check_same_device("outer", {&a, &b});
  ANVIL_CHECK(a.dim() == 1 && b.dim() == 1, ShapeError, "outer: both arguments must be 1-D; expected vectors, got ",
              a.shape(), " and ", b.shape());
  return mul(a.unsqueeze(1), b.unsqueeze(0));
}

void mm_out(Tensor& out, const Tensor& a, const Tensor& b) {
  detail::check_same_device("mm_out", {&out, &a, &b});
  detail::check_inplace("mm_out", out, &a);
  detail::check_inplace("mm_out", out, &b);
  ANVIL_CHECK(a.dim() == 2 && b.dim() == 2, ShapeError, "mm_out: both arguments must be 2-D; expected matrices, got ",
              a.shape(), " and ", b.shape());
  ANVIL_CHECK(a.shape()[1] == b.shape()[0], ShapeError,
              "mm_out: inner dimensions do not match; expected a.size(-1) == b.size(-2), got a ", a.shape(), " and b ",
              b.shape());
  const Shape expect{a.shape()[0], b.shape()[1]};
  ANVIL_CHECK(out.shape() == expect && out.is_contiguous(), ShapeError, "mm_out: out must be a contiguous ", expect,
              " tensor; expected ", expect, ", got ", out.shape());
  ANVIL_CHECK(a.dtype() == out.dtype() && b.dtype() == out.dtype(), DTypeError,
              "mm_out: dtypes must match out; expected ", out.dtype(), ", got ", a.dtype(), " and ", b.dtype());
  if (out.numel() == 0) return;
  if (a.shape()[1] == 0) {
    out.zero_();
    return;
  }
  detail::gemm_into(out, detail::unaliased(a, out, false), detail::unaliased(b, out, false), 0.0);
}

Tensor addmm(const Tensor& bias, const Tensor& a, const Tensor& b, const Scalar& beta, const Scalar& alpha) {
  ANVIL_PROFILE_OP("addmm", &bias, &a, &b);
  if (auto c = detail::autocast_inputs(detail::AutocastList::LowerPrecision, {&bias, &a, &b}))
    return addmm((*c)[0], (*c)[1], (*c)[2], beta, alpha);
  const Device d = detail::check_same_device("addmm", {&bias, &a, &b});
  ANVIL_CHECK(a.dim() == 2 && b.dim() == 2, ShapeError, "addmm: both matrices must be 2-D; expected matrices, got ",
              a.shape(), " and ", b.shape());
  ANVIL_CHECK(a.shape()[1] == b.shape()[0], ShapeError,
              "addmm: inner dimensions do not match; expected a.size(1) == b.size(0), got a ", a.shape(), " and b ",
              b.shape());
  const Shape out_shape{a.shape()[0], b.shape()[1]};
  ANVIL_CHECK(broadcast_shapes(bias.shape(), out_shape, "addmm") == out_shape, ShapeError,
              "addmm: bias does not broadcast to the product; expected a shape broadcastable to ", out_shape, ", got ",
              bias.shape());
  const DType t = promote(promote(a.dtype(), b.dtype()), bias.dtype());
  ANVIL_CHECK(is_floating(t), DTypeError, "addmm: needs floating-point tensors; expected f16, bf16, f32 or f64, got ",
              t);
  Tensor out = detail::make_empty(out_shape, t, d);
  const double be = beta.to_double(), al = alpha.to_double();
  // Linear's case, a row of bias, is added by the GEMM where the backend
  // can (oneDNN's bias on the CPU): no pass writing it into out first.
  const bool bias_row = bias.dim() >= 1 && bias.numel() == out_shape[1] && bias.strides()[bias.dim() - 1] == 1;
  if (out.numel() > 0 && a.shape()[1] > 0 && be == 1.0 && al == 1.0 && bias_row && bias.dtype() == t &&
      detail::has_fused(out, {detail::FusedOp::GemmBias})) {
    detail::gemm_into(out, detail::cast(a, t), detail::cast(b, t), 0.0, &bias);
  } else if (out.numel() > 0) {
    // beta = 0 ignores the input, NaN included, as PyTorch (and baddbmm).
    if (be == 0.0) {
      out.zero_();
    } else {
      detail::copy_into(out, bias);
    }
    if (be != 1.0 && be != 0.0) {
      NoGradGuard no_grad;
      out.mul_(be);
    }
    if (a.shape()[1] > 0) {
      const Tensor ca = al == 1.0 ? detail::cast(a, t) : detail::cast(a, t) * al;
      detail::gemm_into(out, ca, detail::cast(b, t), 1.0);
    }
  }
  detail::record_addmm(out, bias, a, b, beta.to_double(), alpha.to_double());
  return out;
}

// torch.baddbmm: beta * input + alpha * (b1 @ b2) for [B, N, M] @ [B, M, P],
// input broadcast to [B, N, P]; beta = 0 ignores input (NaN included), as
// PyTorch does.
Tensor baddbmm(const Tensor& input, const Tensor& b1, const Tensor& b2, const Scalar& beta, const Scalar& alpha) {
  ANVIL_PROFILE_OP("baddbmm", &input, &b1, &b2);
  detail::check_same_device("baddbmm", {&input, &b1, &b2});
  if (auto c = detail::autocast_inputs(detail::AutocastList::LowerPrecision, {&input, &b1, &b2}))
    return baddbmm((*c)[0], (*c)[1], (*c)[2], beta, alpha);
  ANVIL_CHECK(b1.dim() == 3 && b2.dim() == 3, ShapeError,
              "baddbmm: batch1 and batch2 must be 3-D; expected [B, N, M] and [B, M, P], got ", b1.shape(), " and ",
              b2.shape());
  ANVIL_CHECK(b1.size(0) == b2.size(0) && b1.size(2) == b2.size(1), ShapeError,
              "baddbmm: batch sizes or inner dimensions do not match; expected [B, N, M] and [B, M, P], got ",
              b1.shape(), " and ", b2.shape());
  const Shape out_shape{b1.size(0), b1.size(1), b2.size(2)};
  ANVIL_CHECK(broadcast_shapes(input.shape(), out_shape, "baddbmm") == out_shape, ShapeError,
              "baddbmm: input does not broadcast to the product; expected a shape broadcastable to ", out_shape,
              ", got ", input.shape());
  ANVIL_CHECK(input.dtype() == b1.dtype() && b1.dtype() == b2.dtype(), DTypeError,
              "baddbmm: all tensors must have one dtype; expected ", b1.dtype(), ", got input ", input.dtype(),
              ", batch1 ", b1.dtype(), " and batch2 ", b2.dtype());
  const double be = beta.to_double(), al = alpha.to_double();
  Tensor product = bmm(b1, b2);
  if (al != 1.0) product = product * al;
  if (be == 0.0) return product;
  return be == 1.0 ? product + input : product + input * be;
}

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  ANVIL_PROFILE_OP("linear", &x, &weight, &bias);
  // One op for autocast, as in PyTorch: the bias is cast with the product.
  if (auto c = detail::autocast_inputs(detail::AutocastList::LowerPrecision, {&x, &weight, &bias}))
    return linear((*c)[0], (*c)[1], (*c)[2]);
  if (x.dim() == 2 && bias.defined()) return addmm(bias, x, weight.t());
  // [..., K] inputs as PyTorch's linear takes them: the rows folded into one
  // addmm, so the bias is added by the GEMM where the backend can (a
  // transformer's every Linear) and the weight gradient is one product.
  if (x.dim() > 2 && bias.defined() && x.is_contiguous() && x.numel() > 0) {
    Shape out_shape = x.shape();
    out_shape[out_shape.size() - 1] = weight.size(0);
    return addmm(bias, x.reshape({-1, x.size(-1)}), weight.t()).reshape(out_shape);
  }
  const Tensor y = matmul(x, weight.t());
  return bias.defined() ? y + bias : y;
}

Tensor Tensor::matmul(const Tensor& o) const { return anvil::matmul(*this, o); }
Tensor Tensor::mm(const Tensor& o) const { return anvil::mm(*this, o); }
Tensor Tensor::bmm(const Tensor& o) const { return anvil::bmm(*this, o); }
Tensor Tensor::dot(const Tensor& o) const { return anvil::dot(*this, o); }
Tensor Tensor::outer(const Tensor& o) const { return anvil::outer(*this, o); }
Tensor Tensor::addmm(const Tensor& a, const Tensor& b, const Scalar& beta, const Scalar& alpha) const {
  return anvil::addmm(*this, a, b, beta, alpha);
}
Tensor Tensor::baddbmm(const Tensor& b1, const Tensor& b2, const Scalar& beta, const Scalar& alpha) const {
  return anvil::baddbmm(*this, b1, b2, beta, alpha);
}

}  // namespace anvil
