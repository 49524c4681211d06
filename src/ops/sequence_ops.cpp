// The sequence-model ops (embedding, layer_norm, attention), composites of
// the primitives: written once here, they run and differentiate on every
// backend. embedding's gradient is index_select's, one index_add pass.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "anvil/autograd.h"
#include "autograd/graph.h"
#include "core/observer.h"
#include "ops/autocast.h"
#include "ops/dispatch.h"
#include "ops/op_common.h"
#include "ops/tensor_make.h"

namespace anvil {

namespace {
// check_same_device over the defined tensors among `ts` (optional arguments).
void check_devices(const char* op, std::initializer_list<const Tensor*> ts) {
  std::vector<Tensor> defined;
  for (const Tensor* t : ts)
    if (t->defined()) defined.push_back(*t);
  detail::check_same_device(op, defined);
}
}  // namespace

Tensor embedding(const Tensor& indices, const Tensor& weight) {
  ANVIL_PROFILE_OP("embedding", &indices, &weight);
  detail::check_defined("embedding", indices, 0);
  detail::check_defined("embedding", weight, 1);
  detail::check_same_device("embedding", {&indices, &weight});
  ANVIL_CHECK(is_integral(indices.dtype()) && indices.dtype() != DType::Bool, DTypeError,
              "embedding: indices must be an integer tensor; expected i64 or i32, got ", indices.dtype());
  ANVIL_CHECK(weight.dim() == 2, ShapeError,
              "embedding: weight must be [num_embeddings, embedding_dim]; expected 2 dims, got ", weight.shape());
  Shape s = indices.shape();
  s.push_back(weight.size(1));
  return index_select(weight, 0, indices.reshape({-1})).reshape(s);
}

namespace {

// Note [Fused layer norm] (core/backend.h): where the backend has both
// kernels, for f32 and f64 with weight and bias in x's dtype; otherwise the
// composite, whose ops autograd differentiates.
bool layer_norm_fuses(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  return (x.dtype() == f32 || x.dtype() == f64) && x.numel() > 0 &&
         (!weight.defined() || weight.dtype() == x.dtype()) && (!bias.defined() || bias.dtype() == x.dtype()) &&
         detail::has_fused(x, {detail::FusedOp::LayerNorm, detail::FusedOp::LayerNormBackward});
}

detail::KernelOperand operand_or_none(const Tensor& t) {
  return t.defined() ? detail::operand(t) : detail::KernelOperand{};
}

Tensor layer_norm_fused(const Tensor& x, const Shape& normalized, const Tensor& weight, const Tensor& bias,
                        double eps) {
  const std::int64_t len = normalized.numel();
  const Tensor xc = x.contiguous(), wc = weight.defined() ? weight.contiguous() : Tensor{},
               bc = bias.defined() ? bias.contiguous() : Tensor{};
  const std::int64_t rows = x.numel() / len;
  Tensor out = detail::make_empty(x.shape(), x.dtype(), x.device());
  Tensor mean = detail::make_empty({rows}, x.dtype(), x.device()),
         invstd = detail::make_empty({rows}, x.dtype(), x.device());
  detail::LayerNormArgs a{.dtype = x.dtype(), .rows = rows, .len = len, .eps = eps};
  a.x = detail::operand(xc), a.y = detail::operand(out), a.weight = operand_or_none(wc), a.bias = operand_or_none(bc);
  a.mean = detail::operand(mean), a.invstd = detail::operand(invstd);
  detail::dispatch::layer_norm(x.device(), a);
  detail::record_layer_norm_fused(out, xc, weight, bias, mean, invstd, normalized);
  return out;
}

}  // namespace

namespace detail {
LayerNormGrads layer_norm_backward(const Tensor& grad, const Tensor& x, const Tensor& weight, const Tensor& mean,
                                   const Tensor& invstd, const Shape& normalized, bool want_input, bool want_weight,
                                   bool want_bias) {
  ANVIL_PROFILE_OP("layer_norm_backward", &grad, &x);
  // The kernel reads the weight as a row: a strided one (the op's input, as saved) made dense.
  const Tensor g = grad.to(x.dtype()).contiguous(), w = weight.defined() ? weight.contiguous() : Tensor{};
  const std::int64_t len = normalized.numel();
  LayerNormArgs a{.dtype = x.dtype(), .rows = x.numel() / len, .len = len};
  LayerNormGrads out;
  if (want_input) out.input = make_empty(x.shape(), x.dtype(), x.device());
  if (want_weight) out.weight = make_empty(normalized, x.dtype(), x.device());
  if (want_bias) out.bias = make_empty(normalized, x.dtype(), x.device());
  a.grad = operand(g), a.x = operand(x), a.mean = operand(mean), a.invstd = operand(invstd);
  a.weight = operand_or_none(w), a.grad_x = operand_or_none(out.input);
  a.grad_weight = operand_or_none(out.weight), a.grad_bias = operand_or_none(out.bias);
  dispatch::layer_norm_backward(x.device(), a);
  return out;
}
}  // namespace detail

Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight, const Tensor& bias,
                  double eps) {
  ANVIL_PROFILE_OP("layer_norm", &x, &weight, &bias);
  detail::check_defined("layer_norm", x);
  if (auto c = detail::autocast_inputs(detail::AutocastList::Fp32, {&x, &weight, &bias}))
    return layer_norm((*c)[0], normalized_shape, (*c)[1], (*c)[2], eps);
  check_devices("layer_norm", {&x, &weight, &bias});
  ANVIL_CHECK(is_floating(x.dtype()), DTypeError, "layer_norm: input must be floating; expected f32 or f64, got ",
              x.dtype());
  const int k = normalized_shape.size();
  bool trailing = k >= 1 && k <= x.dim();
  for (int i = 0; trailing && i < k; ++i) trailing = x.shape()[x.dim() - k + i] == normalized_shape[i];
  ANVIL_CHECK(trailing, ShapeError,
              "layer_norm: normalized_shape must be the input's trailing dims; expected the end of ", x.shape(),
              ", got ", normalized_shape);
  ANVIL_CHECK(!weight.defined() || weight.shape() == normalized_shape, ShapeError,
              "layer_norm: weight must have normalized_shape; expected ", normalized_shape, ", got ", weight.shape());
  ANVIL_CHECK(!bias.defined() || bias.shape() == normalized_shape, ShapeError,
              "layer_norm: bias must have normalized_shape; expected ", normalized_shape, ", got ", bias.shape());
  if (layer_norm_fuses(x, weight, bias)) return layer_norm_fused(x, normalized_shape, weight, bias, eps);
  std::vector<std::int64_t> dims;
  for (int i = x.dim() - k; i < x.dim(); ++i) dims.push_back(i);
  // 16-bit inputs compute in f32 and round once, as PyTorch does.
  const DType compute = is_half(x.dtype()) ? f32 : x.dtype();
  Tensor out, xhat, invstd;
  {
    NoGradGuard no_grad;
    const Tensor xf = x.to(compute);
    xhat = xf - mean(xf, dims, true);
    // The biased variance, as PyTorch normalises.
    invstd = rsqrt(detail::reduce_op(detail::ReduceOp::SumSquares, "layer_norm", xhat, dims, true, compute,
                                     1.0 / static_cast<double>(std::max<std::int64_t>(normalized_shape.numel(), 1))) +
                   eps);
    xhat.mul_(invstd);
    // Never the saved xhat itself: an in-place op on the output would change the gradient.
    Tensor y;
    if (weight.defined()) {
      y = xhat * weight.to(compute);
      if (bias.defined()) y.add_(bias.to(compute));
    } else {
      y = bias.defined() ? xhat + bias.to(compute) : xhat.clone();
    }
    out = y.to(x.dtype());
  }
  detail::record_layer_norm(out, x, weight, bias, xhat, invstd, k);
  return out;
}

Tensor attention_weights(const Tensor& q, const Tensor& k, const Tensor& attn_mask, bool is_causal) {
  detail::check_defined("scaled_dot_product_attention", q, 0);
  detail::check_defined("scaled_dot_product_attention", k, 1);
  check_devices("scaled_dot_product_attention", {&q, &k, &attn_mask});
  ANVIL_CHECK(q.dim() >= 2 && k.dim() >= 2 && q.size(-1) == k.size(-1), ShapeError,
              "scaled_dot_product_attention: query and key must be [..., L, E] and [..., S, E]; expected equal E, got ",
              q.shape(), " and ", k.shape());
  ANVIL_CHECK(is_floating(q.dtype()), DTypeError,
              "scaled_dot_product_attention: query must be floating; expected f32 or f64, got ", q.dtype());
  ANVIL_CHECK(!(is_causal && attn_mask.defined()), ValueError,
              "scaled_dot_product_attention: give attn_mask or is_causal, not both; expected one, got both");
  const std::int64_t L = q.size(-2), S = k.size(-2);
  Tensor scores = matmul(q, k.transpose(-2, -1)) * (1.0 / std::sqrt(static_cast<double>(q.size(-1))));
  constexpr double kNegInf = -std::numeric_limits<double>::infinity();
  if (is_causal) scores = where(tril(ones({L, S}, q.device(), DType::Bool)), scores, kNegInf);
  if (attn_mask.defined()) {
    const Shape ms = attn_mask.shape();
    const auto fits = [](std::int64_t m, std::int64_t n) { return m == n || m == 1; };
    ANVIL_CHECK(ms.size() >= 2 && fits(ms[ms.size() - 1], S) && fits(ms[ms.size() - 2], L), ShapeError,
                "scaled_dot_product_attention: attn_mask must broadcast to [..., L, S]; expected [..., ", L, ", ", S,
                "], got ", ms);
    if (attn_mask.dtype() == DType::Bool)
      scores = where(attn_mask, scores, kNegInf);
    else
      scores = scores + attn_mask;
  }
  // softmax subtracts the row maximum: stable for any scale of the scores.
  if (!is_causal && !attn_mask.defined()) return softmax(scores, -1);
  // A row with nothing to attend to (every score -inf) gets weights 0, as
  // PyTorch 2.5+ (its _safe_softmax), and no NaN in its gradient either: the
  // row's softmax runs on zeros, then is replaced.
  const Tensor empty_row = amax(scores, {-1}, true) == kNegInf;
  return where(empty_row, 0.0, softmax(where(empty_row, 0.0, scores), -1));
}

Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& attn_mask,
                                    bool is_causal) {
  ANVIL_PROFILE_OP("scaled_dot_product_attention", &q, &k, &v);
  detail::check_defined("scaled_dot_product_attention", v, 2);
  detail::check_same_device("scaled_dot_product_attention", {&q, &v});
  ANVIL_CHECK(
      v.dim() >= 2 && k.dim() >= 2 && v.size(-2) == k.size(-2), ShapeError,
      "scaled_dot_product_attention: key and value must be [..., S, E] and [..., S, Ev]; expected equal S, got ",
      k.shape(), " and ", v.shape());
  return matmul(attention_weights(q, k, attn_mask, is_causal), v);
}

Tensor dropout(const Tensor& x, double p, bool training) {
  ANVIL_PROFILE_OP("dropout", &x);
  detail::check_defined("dropout", x);
  ANVIL_CHECK(p >= 0.0 && p <= 1.0, ValueError, "dropout: p is a probability; expected [0, 1], got ", p);
  if (!training || p == 0.0) return x;
  if (p == 1.0) return x * 0.0;
  // One fill makes the scaled mask and one product applies it (the gradient
  // is one product too), where rand, >=, a cast and two products did.
  if (is_floating(x.dtype())) return x * detail::dropout_mask(x, p);
  return x * (rand_like(x) >= p).to(x.dtype()) * (1.0 / (1.0 - p));
}

}  // namespace anvil
