// Autograd: every differentiable op against float64 central differences
// (gradcheck), on every device; engine behaviour (accumulation, no-grad,
// detach, names, errors).
#include <functional>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "anvil/autograd.h"
#include "anvil/profiler.h"
#include "device_test.h"
#include "ops/op_common.h"

using namespace anvil;
using Fn = std::function<Tensor(const std::vector<Tensor>&)>;
using detail::activation_backward;
using detail::BinaryOp;

namespace {
struct Case {
  std::string name;
  std::vector<Shape> shapes;
  Fn fn;
  bool positive = false;  // inputs in (0.5, 1.5) (log, sqrt, pow)
  // Through an f32 round trip central differences need a larger step.
  autograd::GradcheckOptions options = {};
};

std::vector<Case> cases() {
  using V = const std::vector<Tensor>&;
  return {
      {"add_broadcast", {{3, 4}, {4}}, [](V x) { return x[0] + x[1]; }},
      {"sub_broadcast", {{3, 1}, {1, 4}}, [](V x) { return x[0] - x[1]; }},
      {"mul", {{3, 4}, {3, 4}}, [](V x) { return x[0] * x[1]; }},
      {"div", {{2, 3}, {2, 3}}, [](V x) { return x[0] / x[1]; }, true},
      {"pow_tensor", {{2, 3}, {2, 3}}, [](V x) { return pow(x[0], x[1]); }, true},
      {"scalar_ops", {{5}}, [](V x) { return (2.0 - x[0]) * 3.0 / 2.0 + 1.0 - 4.0 / (x[0] + 3.0); }, true},
      {"pow_scalar", {{5}}, [](V x) { return pow(x[0], 3.0) + pow(2.0, x[0]); }, true},
      {"maximum_minimum", {{6}, {6}}, [](V x) { return maximum(x[0], x[1]) + minimum(x[0], x[1] * 2.0); }},
      {"unary", {{7}}, [](V x) { return exp(x[0]) + log(x[0]) + sqrt(x[0]) + rsqrt(x[0]) + reciprocal(x[0]); }, true},
      {"trig_act",
       {{7}},
       [](V x) {
         return sin(x[0]) * cos(x[0]) + tanh(x[0]) + sigmoid(x[0]) + relu(x[0]) + abs(x[0]) + square(x[0]) - x[0];
       }},
      {"clamp", {{8}}, [](V x) { return clamp(x[0], -0.3, 0.4); }},
      {"log1p_expm1", {{7}}, [](V x) { return log1p(x[0]) * expm1(x[0]) + x[0].log1p() + x[0].expm1(); }, true},
      {"erf_gelu", {{9}}, [](V x) { return erf(x[0]) + x[0].erf() * gelu(x[0]) + gelu(x[0] * 3.0); }},
      {"atan2_broadcast", {{3, 4}, {4}}, [](V x) { return atan2(x[0], x[1]) + x[1].atan2(x[0] * 2.0) * x[0]; }},
      // d/da is +-1 away from a = 0 (gradcheck's inputs), d/db 0.
      {"copysign_broadcast", {{3, 4}, {4}}, [](V x) { return copysign(x[0], x[1]) * x[1] + x[1].copysign(x[0]); }},
      {"atan", {{9}}, [](V x) { return atan(x[0] * 2.0) + x[0].atan() * x[0]; }},
      {"hypot_logaddexp_broadcast",
       {{3, 4}, {4}},
       [](V x) { return hypot(x[0], x[1] - 1.0) * x[1] + logaddexp(x[0] * 3.0, x[1]) + x[1].logaddexp(x[0]); }},
      {"logaddexp2_broadcast",
       {{3, 4}, {4}},
       [](V x) { return logaddexp2(x[0] * 3.0, x[1]) * x[1] + x[1].logaddexp2(x[0]); }},
      // Between the jumps of a // b: d/da = 1, d/db = -(a // b), with a scalar on either side.
      {"remainder",
       {{3, 4}, {4}},
       [](V x) { return remainder(x[0] * 5.0, x[1]) * x[1] + remainder(x[0] * 4.0, 1.5) + remainder(7.0, x[1]); }},
      // Inside (-1, 1), where the derivatives are finite: x * 0.6 in (0.3, 0.9).
      {"asin_acos",
       {{9}},
       [](V x) { return asin(x[0] * 0.6) + acos(0.5 - x[0]) * x[0] + (x[0] * -0.6).asin() + (x[0] * 0.6).acos(); },
       true},
      {"sinh_cosh_asinh",
       {{9}},
       [](V x) { return sinh(x[0] * 2.0) + x[0].cosh() * x[0] + asinh(x[0] * 3.0) + x[0].asinh(); }},
      // acosh on x + 1 in (1.5, 2.5), atanh on ±0.6 x in (-0.9, 0.9).
      {"acosh_atanh",
       {{9}},
       [](V x) { return acosh(x[0] + 1.0) + (x[0] + 1.0).acosh() * x[0] + atanh(x[0] * 0.6) + (x[0] * -0.6).atanh(); },
       true},
      // Both sides of the threshold: x + 25 > 20 is the identity.
      {"softplus", {{9}}, [](V x) { return softplus(x[0]) + softplus(x[0] + 25.0) * x[0]; }},
      // Zero almost everywhere; the + x keeps the gradient nonzero.
      {"floor_ceil_round",
       {{9}},
       [](V x) { return floor(x[0]) + ceil(x[0] * 2.0) + round(x[0] * 3.0) * x[0] + x[0].floor() + x[0].round(); }},
      {"where", {{6}, {6}}, [](V x) { return where(x[0] > 0, x[0] * x[1], x[1]); }},
      {"masked_fill", {{2, 3}}, [](V x) { return masked_fill(x[0], x[0].sum(0) > 0, 0.5) * x[0]; }},
      {"masked_fill_broadcast_mask",
       {{3}},
       [](V x) {
         return x[0].masked_fill(ones({2, 3}, x[0].device()) > x[0], -2.0) * 3.0;
       }},
      {"tril_triu", {{2, 3, 4}}, [](V x) { return tril(x[0], 1) * 2.0 + x[0].triu(-1) * x[0]; }},
      {"sum_dims",
       {{2, 3, 4}},
       [](V x) {
         return sum(x[0], {0, 2}) + sum(x[0]).reshape({1});
       }},
      {"mean", {{3, 4}}, [](V x) { return mean(x[0], {1}, true) * mean(x[0]); }},
      {"amax_amin", {{3, 4}}, [](V x) { return amax(x[0], {1}) + amin(x[0], {0}).sum() + max(x[0]); }},
      {"max_min_dim", {{3, 4}}, [](V x) { return max(x[0], 1).values + min(x[0], 0, true).values.sum(); }},
      {"var_std", {{3, 5}}, [](V x) { return var(x[0], {1}) + anvil::std(x[0]); }},
      {"norm_logsumexp", {{3, 4}}, [](V x) { return norm(x[0], {1}) + logsumexp(x[0], {1}); }},
      {"prod", {{2, 3}}, [](V x) { return prod(x[0], {1}); }, true},
      {"matmul_2d", {{3, 4}, {4, 2}}, [](V x) { return matmul(x[0], x[1]); }},
      {"matmul_1d_2d", {{4}, {4, 3}}, [](V x) { return matmul(x[0], x[1]); }},
      {"matmul_2d_1d", {{3, 4}, {4}}, [](V x) { return matmul(x[0], x[1]); }},
      {"matmul_dot", {{4}, {4}}, [](V x) { return matmul(x[0], x[1]); }},
      {"matmul_batched_broadcast", {{2, 3, 4}, {4, 2}}, [](V x) { return matmul(x[0], x[1]); }},
      // The broadcast matrix's gradient folds the batch into rows: 4-D, 1-D
      // and a transposed weight (a Linear on [B, T, K]).
      {"matmul_4d_2d", {{2, 2, 3, 4}, {4, 2}}, [](V x) { return matmul(x[0], x[1]); }},
      {"matmul_3d_1d", {{2, 3, 4}, {4}}, [](V x) { return matmul(x[0], x[1]); }},
      {"matmul_3d_transposed", {{2, 3, 4}, {2, 4}}, [](V x) { return matmul(x[0], x[1].t()); }},
      {"bmm_transposed", {{2, 4, 3}, {2, 4, 2}}, [](V x) { return bmm(x[0].transpose(1, 2), x[1]); }},
      {"addmm", {{3}, {2, 4}, {4, 3}}, [](V x) { return addmm(x[0], x[1], x[2], 0.5, 2.0); }},
      {"views",
       {{2, 3, 4}},
       [](V x) {
         return x[0].permute({2, 0, 1}).reshape({4, 6}).t().unsqueeze(0).squeeze(0) * 1.0;
       }},
      {"slice_narrow_select",
       {{4, 5}},
       [](V x) { return x[0].slice(1, 1, 5, 2).narrow(0, 1, 2) + x[0].select(1, -1).narrow(0, 0, 2).unsqueeze(1); }},
      {"expand",
       {{3, 1}},
       [](V x) {
         return x[0].expand({2, 3, 4});
       }},
      {"flatten_view",
       {{2, 3, 2}},
       [](V x) {
         return x[0].flatten().view({3, 4});
       }},
      {"cat_stack",
       {{2, 3}, {1, 3}},
       [](V x) {
         return cat({x[0], x[1] * 2.0}, 0) + stack({x[1][0], x[1][0]}, 0).sum();
       }},
      {"split_chunk",
       {{6, 2}},
       [](V x) {
         auto p = split(x[0], 4);
         return p[0].sum() * p[1].sum() + chunk(x[0], 3)[2];
       }},
      {"index_select",
       {{4, 3}},
       [](V x) {
         return index_select(x[0], 0, tensor({2, 0, 2}, x[0].device()));
       }},
      {"gather",
       {{3, 4}},
       [](V x) {
         return gather(x[0], 1, tensor({{0, 3}, {1, 1}, {2, 0}}, x[0].device()));
       }},
      // index_select and gather on a view, their gradients through
      // index_add/scatter_add, and those differentiated again.
      {"index_select_dim1_view",
       {{3, 4}},
       [](V x) {
         return index_select(x[0].t(), 1, tensor({2, 0, 2, 2}, x[0].device())) * x[0].sum();
       }},
      {"index_add",
       {{4, 3}, {5, 3}},
       [](V x) {
         return index_add(x[0], 0, tensor({2, 0, 2, 3, 2}, x[0].device()), x[1], 1.5) * x[1].sum();
       }},
      {"index_add_dim1",
       {{3, 4}, {3, 2}},
       [](V x) {
         return x[0].index_add(1, tensor({3, 3}, x[0].device()), x[1] * x[1]);
       }},
      // index_copy: source rows written last get the gradient (row 2 is
      // written three times), x's overwritten rows get none; flip.
      {"index_copy",
       {{4, 3}, {5, 3}},
       [](V x) {
         return index_copy(x[0], 0, tensor({2, 0, 2, 3, 2}, x[0].device()), x[1]) * x[1].sum();
       }},
      {"index_copy_dim1",
       {{3, 4}, {3, 2}},
       [](V x) {
         return x[0].index_copy(1, tensor({3, 3}, x[0].device()), x[1] * x[1]);
       }},
      {"flip",
       {{3, 4}},
       [](V x) {
         return flip(x[0].t(), Dims({0, 1})) * x[0].sum();
       }},
      {"scatter_add",
       {{3, 4}, {2, 3}},
       [](V x) {
         return scatter_add(x[0], 1, tensor({{0, 3, 3}, {1, 1, 2}}, x[0].device()), x[1]) * x[0];
       }},
      {"scatter_add_src_larger",
       {{3, 2}, {4, 3}},
       [](V x) {
         return scatter_add(x[0], 0, tensor({{2, 2}, {0, 2}, {1, 1}}, x[0].device()), x[1]);
       }},
      {"embedding",
       {{5, 3}},
       [](V x) {
         return embedding(tensor({{4, 0}, {4, 4}, {1, 2}}, x[0].device()), x[0]) * 2.0;
       }},
      {"layer_norm",
       {{2, 3, 4}, {3, 4}, {3, 4}},
       [](V x) {
         return layer_norm(x[0], {3, 4}, x[1], x[2], 1e-5);
       }},
      {"layer_norm_no_affine", {{3, 5}}, [](V x) { return layer_norm(x[0] * 3.0, {5}); }},
      {"layer_norm_no_leading_dims",
       {{3, 4}, {3, 4}, {3, 4}},
       [](V x) {
         return layer_norm(x[0], {3, 4}, x[1], x[2]);
       }},
      {"layer_norm_weight_only", {{2, 5}, {5}}, [](V x) { return layer_norm(x[0], {5}, x[1]); }},
      {"layer_norm_bias_only", {{2, 1, 5}, {5}}, [](V x) { return layer_norm(x[0], {5}, {}, x[1]); }},
      {"sdpa", {{2, 3, 4}, {2, 5, 4}, {2, 5, 2}}, [](V x) { return scaled_dot_product_attention(x[0], x[1], x[2]); }},
      {"sdpa_causal",
       {{2, 4, 3}, {2, 4, 3}, {2, 4, 3}},
       [](V x) { return scaled_dot_product_attention(x[0], x[1], x[2], {}, true); }},
      {"sdpa_masks",
       {{3, 4}, {5, 4}, {5, 2}, {3, 5}},
       [](V x) {
         const Tensor keep = tensor({{1, 0, 1, 1, 0}, {1, 1, 1, 1, 1}, {0, 0, 0, 0, 1}}, x[0].device()) > 0;
         return scaled_dot_product_attention(x[0], x[1], x[2], keep) +
                scaled_dot_product_attention(x[0], x[1], x[2], x[3]);
       }},
      {"cast",
       {{4}},
       [](V x) { return (x[0].to(f32).to(f64) * x[0]); },
       false,
       {.eps = 1e-2, .atol = 1e-4, .rtol = 1e-3}},
      {"contiguous_clone", {{3, 4}}, [](V x) { return x[0].t().contiguous() * x[0].t().clone(); }},
      {"softmax_logsoftmax", {{3, 5}}, [](V x) { return softmax(x[0], 1) + log_softmax(x[0], 0); }},
      {"cross_entropy",
       {{4, 5}},
       [](V x) {
         return cross_entropy(x[0], tensor({1, 0, 4, 4}, x[0].device()));
       }},
      {"mse_loss", {{3, 2}, {3, 2}}, [](V x) { return mse_loss(x[0], x[1]); }},
      {"conv2d",
       {{2, 2, 5, 6}, {3, 2, 3, 2}, {3}},
       [](V x) {
         return conv2d(x[0], x[1], x[2], {2, 1}, {1, 2});
       }},
      {"conv2d_nobias", {{1, 1, 4, 4}, {2, 1, 2, 2}}, [](V x) { return conv2d(x[0], x[1]); }},
      {"max_pool2d",
       {{2, 2, 5, 5}},
       [](V x) {
         return max_pool2d(x[0], {2, 2}, {2, 1}, {1, 0});
       }},
      {"avg_pool2d",
       {{2, 2, 5, 4}},
       [](V x) {
         return avg_pool2d(x[0], {3, 2}, {2, 2}, {1, 1});
       }},
      // Backends with fused window kernels (im2col/col2im, max-pool with
      // argmax) take them for these: strided input, padding, stride > 1,
      // overlapping windows (an input pixel that wins several windows).
      {"conv2d_strided_input",
       {{2, 3, 7, 6}, {4, 3, 3, 2}, {4}},
       [](V x) {
         return conv2d(x[0].transpose(2, 3), x[1], x[2], {2, 3}, {2, 1});
       }},
      {"conv2d_1x1_channels", {{3, 5, 3, 4}, {2, 5, 1, 1}}, [](V x) { return conv2d(x[0], x[1]); }},
      {"conv2d_kernel_wider_than_input",
       {{1, 2, 3, 1}, {2, 2, 3, 5}, {2}},
       [](V x) {
         return conv2d(x[0], x[1], x[2], {1, 1}, {1, 2});
       }},
      {"max_pool2d_strided_input",
       {{2, 3, 6, 7}},
       [](V x) {
         return max_pool2d(x[0].transpose(2, 3), {3, 2}, {2, 2}, {1, 1});
       }},
      {"max_pool2d_overlapping",
       {{1, 2, 5, 5}},
       [](V x) {
         return max_pool2d(x[0], {3, 3}, {1, 1}, {1, 1});
       }},
      // The activations' backward ops (what their rules run) differentiated
      // in both operands: the gradient and the saved output or input.
      {"activation_backward_ops",
       {{7}, {7}},
       [](V x) {
         const Tensor y = sigmoid(x[1]);
         return activation_backward(BinaryOp::ReluBackward, x[0], x[1]) +
                activation_backward(BinaryOp::SigmoidBackward, x[0], y) * x[1] +
                activation_backward(BinaryOp::TanhBackward, x[0] * x[1], tanh(x[1]));
       }},
      {"activation_backward_ops_of_the_input",
       {{9}, {9}},
       [](V x) {
         return activation_backward(BinaryOp::GeluBackward, x[0], x[1] * 3.0) * x[0] +
                activation_backward(BinaryOp::SoftplusBackward, x[0] * x[1], x[1]) +
                activation_backward(BinaryOp::SoftplusBackward, x[0], x[1] + 25.0);
       }},
      {"lenet_block",
       {{2, 1, 8, 8}, {3, 1, 5, 5}, {3}},
       [](V x) {
         return max_pool2d(relu(conv2d(x[0], x[1], x[2], {1, 1}, {2, 2})), {2, 2}, {2, 2}, {0, 0});
       }},
  };
}
}  // namespace

class Gradcheck : public anvil::testing::DeviceTest {};

TEST_P(Gradcheck, EveryDifferentiableOp) {
  const Device d = device();
  if (!properties(d).fp64) GTEST_SKIP() << d << " has no f64; gradcheck needs float64";
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name);
    manual_seed(7);
    std::vector<Tensor> inputs;
    for (const Shape& s : c.shapes) {
      Tensor x = c.positive ? rand(s, d, f64) + 0.5 : randn(s, d, f64);
      inputs.push_back(x.requires_grad_());
    }
    const auto r = autograd::gradcheck(c.fn, inputs, c.options);
    EXPECT_TRUE(r.ok) << r.message;
  }
}

class Autograd : public anvil::testing::DeviceTest {};

TEST_P(Autograd, AccumulatesAndClears) {
  const Device d = device();
  Tensor w = ones({3}, d).requires_grad_();
  (w * 2.0).sum().backward();
  (w * 3.0).sum().backward();
  EXPECT_TRUE(allclose(w.grad(), full({3}, 5.0, d)));
  EXPECT_EQ(w.grad().device(), d);
  w.zero_grad();
  EXPECT_TRUE(allclose(w.grad(), zeros({3}, d)));
  w.set_grad({});
  EXPECT_FALSE(w.grad().defined());
}

TEST_P(Autograd, NoGradDetachAndNames) {
  const Device d = device();
  Tensor w = randn({2, 3}, d).requires_grad_();
  Tensor b = zeros({3}, d).requires_grad_();
  Tensor x = randn({4, 2}, d);
  const Tensor y = addmm(b, x, w);
  EXPECT_EQ(y.grad_fn_name(), "AddmmBackward");
  EXPECT_NE(to_string(y).find("grad_fn=<AddmmBackward>"), std::string::npos) << to_string(y);
  EXPECT_TRUE(w.is_leaf());
  EXPECT_FALSE(y.is_leaf());
  EXPECT_FALSE(y.detach().requires_grad());
  {
    NoGradGuard no_grad;
    EXPECT_FALSE((w * 2.0).requires_grad());
  }
  EXPECT_TRUE((w * 2.0).requires_grad());
  EXPECT_THROW(y.backward(), ShapeError);  // non-scalar without a gradient
  y.backward(ones_like(y));
  EXPECT_TRUE(allclose(b.grad(), full({3}, 4.0, d)));
  EXPECT_THROW(w.add_(1.0), ValueError);  // in-place on a leaf that requires grad
  EXPECT_THROW(ones({2}, d).backward(), ValueError);
  EXPECT_THROW(ones({2}, d, i64).requires_grad_(), DTypeError);
}

// Each elementwise op records the rule its row in anvil/ops.def names (a
// unary row without its rule does not compile; a binary op's rule is a case
// of record_binary, and of record_binary_scalar for the forms with a number,
// checked here), and one that names none records nothing.
TEST_P(Autograd, EveryElementwiseOpRecordsTheRuleItsRowNames) {
  const Device d = device();
  const Tensor a = (rand({5}, d, f64) + 0.5).requires_grad_(), b = (rand({5}, d, f64) + 0.5).requires_grad_();
  for (int i = 0; i < static_cast<int>(detail::UnaryOp::Count); ++i) {
    const auto op = static_cast<detail::UnaryOp>(i);
    const Tensor y = detail::unary_op(op, a, {0.7, 1.2});
    const std::string want = detail::row(op).grad;
    EXPECT_EQ(y.requires_grad() ? y.grad_fn_name() : "NotDifferentiable", want) << detail::name(op);
  }
  for (int i = 0; i < static_cast<int>(detail::BinaryOp::Count); ++i) {
    const auto op = static_cast<detail::BinaryOp>(i);
    if (detail::is_bitwise(op)) continue;  // integers only: nothing to differentiate
    const Tensor y = detail::binary_op(op, a, b);
    const std::string want = detail::row(op).grad;
    EXPECT_EQ(y.requires_grad() ? y.grad_fn_name() : "NotDifferentiable", want) << detail::name(op);
    // The forms with a number (a case of record_binary_scalar), where the row has them.
    const detail::BinaryForms forms = detail::row(op).forms;
    if (forms >= detail::BinaryForms::Scalar) {
      const Tensor ys = detail::binary_scalar_op(op, a, 0.7, false);
      EXPECT_EQ(ys.requires_grad() ? ys.grad_fn_name() : "NotDifferentiable", want) << detail::name(op) << "(x, 0.7)";
    }
    if (forms >= detail::BinaryForms::ScalarFirst) {
      const Tensor ys = detail::binary_scalar_op(op, a, 0.7, true);
      EXPECT_EQ(ys.requires_grad() ? ys.grad_fn_name() : "NotDifferentiable", want) << detail::name(op) << "(0.7, x)";
    }
  }
}

TEST_P(Autograd, TransposedWeightGradientIsKeptNotCopied) {
  // See Note [Gradient in the operand's layout]: linear's weight enters the
  // product as w.t(); its gradient must come back contiguous so that
  // AccumulateGrad keeps it instead of cloning it, i.e. the backward
  // allocates no more than the same product with an untransposed weight.
  const Device d = device();
  manual_seed(0);
  const Tensor x = randn({5, 7}, d);
  auto allocations_in_backward = [&](const Tensor& y) {
    const Tensor loss = y.sum();
    synchronize(d);
    const std::uint64_t before = memory_stats(d).num_allocs;
    loss.backward();
    synchronize(d);
    return memory_stats(d).num_allocs - before;
  };
  Tensor w = randn({3, 7}, d).requires_grad_();  // linear's [out, in]
  Tensor w_in_out = randn({7, 3}, d).requires_grad_();
  Tensor b = zeros({3}, d).requires_grad_();
  Tensor b2 = zeros({3}, d).requires_grad_();
  EXPECT_EQ(allocations_in_backward(linear(x, w, b)), allocations_in_backward(addmm(b2, x, w_in_out)));
  EXPECT_TRUE(w.grad().is_contiguous());
  EXPECT_TRUE(allclose(w.grad(), matmul(ones({3, 5}, d), x), 1e-4, 1e-5));
  EXPECT_TRUE(allclose(w_in_out.grad(), matmul(x.t(), ones({5, 3}, d)), 1e-4, 1e-5));
  // The same through matmul (MmBackward), for either operand transposed.
  Tensor v = randn({3, 7}, d).requires_grad_();
  Tensor v_in_out = randn({7, 3}, d).requires_grad_();
  EXPECT_EQ(allocations_in_backward(matmul(x, v.t())), allocations_in_backward(matmul(x, v_in_out)));
  EXPECT_TRUE(allclose(v.grad(), matmul(ones({3, 5}, d), x), 1e-4, 1e-5));
  Tensor u = randn({7, 5}, d).requires_grad_();  // enters as u.t(), [5, 7]
  Tensor u_plain = randn({5, 7}, d).requires_grad_();
  const Tensor r = randn({7, 3}, d);
  EXPECT_EQ(allocations_in_backward(matmul(u.t(), r)), allocations_in_backward(matmul(u_plain, r)));
  EXPECT_TRUE(allclose(u.grad(), matmul(r, ones({3, 5}, d)), 1e-4, 1e-5));
}

TEST_P(Autograd, FreedGraphNeedsRetainGraph) {
  const Device d = device();
  Tensor w = ones({2}, d).requires_grad_();
  Tensor y = (w * w).sum();
  y.backward({}, true);
  y.backward();
  EXPECT_TRUE(allclose(w.grad(), full({2}, 4.0, d)));
  EXPECT_THROW(y.backward(), ValueError);
}

// PyTorch: the gradient of norm at an all-zero input is 0 (the subgradient),
// not the NaN of the chain rule through sqrt(0).
// Note [Gradients of views] (engine.cpp): the gradients of many views of one
// tensor are added into their places in one buffer. Overlapping views add up,
// a view's gradient meets the whole tensor's, and a gradient that someone else
// holds (here the caller's, through cat's backward) is copied, never written.
TEST_P(Autograd, GradientsOfViewsAddIntoTheirPlaces) {
  const Device d = device();
  const Tensor x = arange(0, 12, 1, d, f32).reshape({4, 3}).requires_grad_();
  const Tensor h = x * 2.0;
  // rows 1 and 3 once more, each as select; rows 0..2 and 1..3 as slices
  const Tensor out = cat({h, h[1].unsqueeze(0), h[3].unsqueeze(0), h.slice(0, 0, 3), h.slice(0, 1, 4)}, 0);
  const Tensor g = arange(0, 36, 1, d, f32).reshape({12, 3});
  const std::vector<float> g_before = g.to_vector<float>();
  out.backward(g);
  EXPECT_EQ(g.to_vector<float>(), g_before) << "the caller's gradient was written";
  // dL/dh by hand, on the host.
  std::vector<float> dh(12, 0.0f);
  auto add_row = [&](int dst, int src) {
    for (int c = 0; c < 3; ++c) dh[dst * 3 + c] += g_before[src * 3 + c];
  };
  for (int r = 0; r < 4; ++r) add_row(r, r);
  add_row(1, 4);
  add_row(3, 5);
  for (int r = 0; r < 3; ++r) add_row(r, 6 + r);
  for (int r = 0; r < 3; ++r) add_row(r + 1, 9 + r);
  std::vector<float> expected;
  for (float v : dh) expected.push_back(2 * v);
  EXPECT_EQ(x.grad().to_vector<float>(), expected);

  // The recurrent pattern: every step reads its own row.
  const Tensor seq = randn({35, 8}, d).requires_grad_();
  Tensor total = zeros({8}, d);
  for (std::int64_t t = 0; t < 35; ++t) total = total + seq[t] * static_cast<double>(t);
  total.sum().backward();
  const Tensor steps = arange(0, 35, 1, d, f32).reshape({35, 1}).expand({35, 8});
  EXPECT_TRUE(allclose(seq.grad(), steps, 0, 0));

  // A freed view node still says so.
  const Tensor y = randn({3, 2}, d).requires_grad_();
  const Tensor v = y[1];
  v.backward(ones({2}, d));
  EXPECT_THROW(v.backward(ones({2}, d)), ValueError);
}

// prod's gradient is the product of the others, zeros included (PyTorch's
// values): out / x divided by zero gave NaN.
TEST_P(Autograd, ProdGradientWithZeros) {
  const Device d = device();
  Tensor x = tensor({0.0f, 2.0f, 3.0f}, d).requires_grad_();
  x.prod().backward();
  EXPECT_TRUE(allclose(x.grad(), tensor({6.0f, 0.0f, 0.0f}, d))) << x.grad();
  Tensor two = tensor({0.0f, 0.0f, 3.0f}, d).requires_grad_();
  two.prod().backward();
  EXPECT_TRUE(allclose(two.grad(), zeros({3}, d))) << two.grad();
  Tensor rows = tensor({{0.0f, 2.0f}, {1.0f, 3.0f}}, d).requires_grad_();
  prod(rows, {1}).sum().backward();
  EXPECT_TRUE(allclose(rows.grad(), tensor({{2.0f, 0.0f}, {3.0f, 1.0f}}, d))) << rows.grad();
  Tensor none = tensor({1.0f, 2.0f, 3.0f}, d).requires_grad_();
  none.prod().backward();
  EXPECT_TRUE(allclose(none.grad(), tensor({6.0f, 3.0f, 2.0f}, d))) << none.grad();
}

TEST_P(Autograd, NormGradientAtZeroIsZero) {
  const Device d = device();
  Tensor z = zeros({2, 3}, d).requires_grad_();
  (norm(z) + norm(z, {1}).sum()).backward();
  EXPECT_TRUE(allclose(z.grad(), zeros({2, 3}, d))) << z.grad();
  // Rows with a nonzero norm keep x / |x|; the zero row gets 0.
  Tensor x = tensor({{0.0f, 0.0f}, {3.0f, 4.0f}}, d).requires_grad_();
  norm(x, {1}, true).sum().backward();
  EXPECT_TRUE(allclose(x.grad(), tensor({{0.0f, 0.0f}, {0.6f, 0.8f}}, d))) << x.grad();
}

// Note [Activation backward as one op]: each rule is one elementwise op,
// not a chain of them (ReLU's was gt, then where).
TEST_P(Autograd, ActivationBackwardIsOneOp) {
  const Device d = device();
  using Act = std::function<Tensor(const Tensor&)>;
  const std::vector<std::pair<Act, std::string>> acts = {
      {[](const Tensor& x) { return anvil::relu(x); }, "relu_backward"},
      {[](const Tensor& x) { return anvil::sigmoid(x); }, "sigmoid_backward"},
      {[](const Tensor& x) { return anvil::tanh(x); }, "tanh_backward"},
      {[](const Tensor& x) { return anvil::gelu(x); }, "gelu_backward"},
      {[](const Tensor& x) { return anvil::softplus(x); }, "softplus_backward"}};
  for (const auto& [act, op] : acts) {
    SCOPED_TRACE(op);
    Tensor x = randn({4, 5}, d).requires_grad_();
    const Tensor y = act(x);
    const Tensor g = randn({4, 5}, d);
    profiler::Profile p;
    y.backward(g);
    p.stop();
    std::map<std::string, std::uint64_t> calls;
    for (const profiler::OpStats& r : p.key_averages())
      if (r.category == "op") calls[r.name] += r.calls;
    EXPECT_EQ(calls[op], 1u);
    for (const char* other : {"where", "gt", "mul", "sub", "add", "exp", "erf", "sigmoid"})
      EXPECT_EQ(calls.count(other), 0u) << other;
  }
}

// PyTorch's threshold_backward passes the gradient unless y <= 0: where
// relu's output is NaN the gradient flows; at ±0 it does not.
TEST_P(Autograd, ReluGradientAtNaNAndZeroIsPyTorchs) {
  const Device d = device();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (DType t : {f32, f16, bf16}) {
    SCOPED_TRACE(to_string(t));
    Tensor x = tensor({nan, 0.0f, -0.0f, 2.0f, -3.0f}, d).to(t).detach().requires_grad_();
    relu(x).backward(tensor({5.0f, 6.0f, 7.0f, 8.0f, 9.0f}, d).to(t));
    EXPECT_EQ(x.grad().dtype(), t);
    EXPECT_EQ(x.grad().to(f32).to_vector<float>(), (std::vector<float>{5.0f, 0.0f, 0.0f, 8.0f, 0.0f}));
  }
}

TEST_P(Autograd, GradientCrossesDevices) {
  const Device d = device();
  Tensor w = ones({3}, cpu()).requires_grad_();
  (w.to(d) * 2.0).sum().backward();
  EXPECT_EQ(w.grad().device(), cpu());
  EXPECT_TRUE(allclose(w.grad(), full({3}, 2.0)));
}

TEST(GradcheckTool, CatchesAWrongGradient) {
  // A custom op with a deliberately wrong rule must be caught.
  auto fn = [](const std::vector<Tensor>& x) {
    Tensor out;
    {
      NoGradGuard no_grad;
      out = x[0] * x[0];
    }
    const Tensor saved = x[0].detach();
    return autograd::make_differentiable("BadSquare", out, {x[0]}, [saved](const Tensor& g, const std::vector<bool>&) {
      return std::vector<Tensor>{g * saved};  // should be 2 * x
    });
  };
  const auto r = autograd::gradcheck(fn, {randn({3}, cpu(), f64).requires_grad_()});
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.message.find("analytic"), std::string::npos);
}

ANVIL_INSTANTIATE_DEVICE_TEST(Gradcheck);
ANVIL_INSTANTIATE_DEVICE_TEST(Autograd);
