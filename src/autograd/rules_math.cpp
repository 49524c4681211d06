// Gradient rules of the elementwise, reduction and linear-algebra
// primitives. See Note [Autograd recording] in graph.h. Rules run with grad
// mode off; they may return gradients in the broadcast shape and the
// computation dtype (the engine reduces and converts them).
#include <cmath>
#include <iterator>
#include <limits>

#include "autograd/graph.h"
#include "ops/op_common.h"

namespace anvil::detail {

// Note [Activation backward as one op]
// The gradients of relu, sigmoid, tanh, gelu and softplus are each one
// elementwise op (BinaryOp ReluBackward…, defined in src/kernels/scalar.h
// as ATen's threshold_backward, sigmoid_backward… are), not a composite of
// the public ops: ReLU's where(y > 0, g, 0) was two kernels (gt, where), a
// bool temporary and two passes over memory; sigmoid's and tanh's three
// ops, gelu's nine. As binary ops they run on every device and take the CPU's
// dense and 16-bit rows and per-ISA builds. They are differentiable again
// (record_binary). ReLU's gradient now passes g where y is NaN, as PyTorch's
// does (the where gave 0). Measured: LeNet on one CPU thread, 2 epochs of
// 8,000 images (the 2-core Xeon at load ~10), ReluBackward 289 -> 250 ms.

namespace {

bool floating_out(const Tensor& out) { return is_floating(out.dtype()); }

// g where a wins, half of it on ties (PyTorch splits ties evenly).
Tensor pick(const Tensor& g, const Tensor& wins, const Tensor& ties) {
  return where(wins, g, where(ties, g * 0.5, 0.0));
}

}  // namespace

void record_binary(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b) {
  if (!floating_out(out) || !should_record({&a, &b})) return;
  const Tensor sa = saved(a), sb = saved(b);
  switch (op) {
    case BinaryOp::Add:
      record(row(op).grad, out, {&a, &b}, [](const Tensor& g, const std::vector<bool>&) {
        return std::vector<Tensor>{g, g};
      });
      return;
    case BinaryOp::Sub:
      record(row(op).grad, out, {&a, &b}, [](const Tensor& g, const std::vector<bool>& n) {
        return std::vector<Tensor>{g, n[1] ? -g : Tensor()};
      });
      return;
    case BinaryOp::Mul:
      record(row(op).grad, out, {&a, &b}, [sa, sb](const Tensor& g, const std::vector<bool>& n) {
        return std::vector<Tensor>{n[0] ? g * sb : Tensor(), n[1] ? g * sa : Tensor()};
      });
      return;
    case BinaryOp::Div: {
      const Tensor so = saved(out);
      record(row(op).grad, out, {&a, &b}, [sb, so](const Tensor& g, const std::vector<bool>& n) {
        const Tensor ga = n[0] || n[1] ? g / sb : Tensor();
        return std::vector<Tensor>{ga, n[1] ? -ga * so : Tensor()};
      });
      return;
    }
    case BinaryOp::Atan2:  // d/da = b / (a² + b²), d/db = -a / (a² + b²)
      record(row(op).grad, out, {&a, &b}, [sa, sb](const Tensor& g, const std::vector<bool>& n) {
        const Tensor r = g / (sa * sa + sb * sb);
        return std::vector<Tensor>{n[0] ? r * sb : Tensor(), n[1] ? -r * sa : Tensor()};
      });
      return;
    case BinaryOp::Copysign: {  // d/da = out / a (±1; 0 at a = 0, as PyTorch), d/db = 0
      const Tensor so = saved(out);
      record("CopysignBackward", out, {&a, &b}, [sa, so](const Tensor& g, const std::vector<bool>& n) {
        return std::vector<Tensor>{n[0] ? where(sa == 0.0, 0.0, g * so / sa) : Tensor(), n[1] ? g * 0.0 : Tensor()};
      });
      return;
    }
    case BinaryOp::Hypot: {  // d/da = a / out, d/db = b / out
      const Tensor so = saved(out);
      record(row(op).grad, out, {&a, &b}, [sa, sb, so](const Tensor& g, const std::vector<bool>& n) {
        const Tensor r = g / so;
        return std::vector<Tensor>{n[0] ? r * sa : Tensor(), n[1] ? r * sb : Tensor()};
      });
      return;
    }
    case BinaryOp::Logaddexp:  // d/da = 1 / (1 + exp(b - a)), as PyTorch
      record(row(op).grad, out, {&a, &b}, [sa, sb](const Tensor& g, const std::vector<bool>& n) {
        return std::vector<Tensor>{n[0] ? g / (exp(sb - sa) + 1.0) : Tensor(),
                                   n[1] ? g / (exp(sa - sb) + 1.0) : Tensor()};
      });
      return;
    case BinaryOp::Logaddexp2:  // d/da = 1 / (1 + 2^(b - a)), as PyTorch
      record(row(op).grad, out, {&a, &b}, [sa, sb](const Tensor& g, const std::vector<bool>& n) {
        return std::vector<Tensor>{n[0] ? g / (exp((sb - sa) * 0.69314718055994530942) + 1.0) : Tensor(),
                                   n[1] ? g / (exp((sa - sb) * 0.69314718055994530942) + 1.0) : Tensor()};
      });
      return;
    case BinaryOp::Remainder:  // d/da = 1, d/db = -(a // b)
      record(row(op).grad, out, {&a, &b}, [sa, sb](const Tensor& g, const std::vector<bool>& n) {
        return std::vector<Tensor>{n[0] ? g : Tensor(), n[1] ? -g * floor_divide(sa, sb) : Tensor()};
      });
      return;
    case BinaryOp::Pow: {
      const Tensor so = saved(out);
      record(row(op).grad, out, {&a, &b}, [sa, sb, so](const Tensor& g, const std::vector<bool>& n) {
        Tensor ga, gb;
        if (n[0]) ga = where(sb == 0.0, 0.0, g * sb * pow(sa, sb - 1.0));
        if (n[1]) gb = where(sa == 0.0, 0.0, g * so * log(sa));
        return std::vector<Tensor>{ga, gb};
      });
      return;
    }
    // The activations' backward ops (a = g, b = y or x), differentiated
    // again: linear in g, so d/dg is the op itself applied to the gradient.
    case BinaryOp::ReluBackward:  // no gradient for y (PyTorch's threshold_backward)
      record(row(op).grad, out, {&a, &b}, [sb](const Tensor& g, const std::vector<bool>&) {
        return std::vector<Tensor>{activation_backward(BinaryOp::ReluBackward, g, sb), Tensor()};
      });
      return;
    case BinaryOp::SigmoidBackward:  // d/dy of g (1 - y) y = g (1 - 2y)
      record(row(op).grad, out, {&a, &b}, [sa, sb](const Tensor& g, const std::vector<bool>& n) {
        return std::vector<Tensor>{n[0] ? activation_backward(BinaryOp::SigmoidBackward, g, sb) : Tensor(),
                                   n[1] ? g * sa * (1.0 - sb * 2.0) : Tensor()};
      });
      return;
    case BinaryOp::TanhBackward:  // d/dy of g (1 - y²) = -2 g y
      record(row(op).grad, out, {&a, &b}, [sa, sb](const Tensor& g, const std::vector<bool>& n) {
        return std::vector<Tensor>{n[0] ? activation_backward(BinaryOp::TanhBackward, g, sb) : Tensor(),
                                   n[1] ? g * sa * sb * -2.0 : Tensor()};
      });
      return;
    case BinaryOp::GeluBackward:  // gelu''(x) = φ(x) (2 - x²)
      record(row(op).grad, out, {&a, &b}, [sa, sb](const Tensor& g, const std::vector<bool>& n) {
        Tensor gx;
        if (n[1]) gx = g * sa * exp(sb * sb * -0.5) * 0.39894228040143267794 * (2.0 - sb * sb);
        return std::vector<Tensor>{n[0] ? activation_backward(BinaryOp::GeluBackward, g, sb) : Tensor(), gx};
      });
      return;
    case BinaryOp::SoftplusBackward:  // sigmoid'(x) = s (1 - s), 0 above the threshold
      record(row(op).grad, out, {&a, &b}, [sa, sb](const Tensor& g, const std::vector<bool>& n) {
        Tensor gx;
        if (n[1]) gx = where(sb > 20.0, 0.0, activation_backward(BinaryOp::SigmoidBackward, g * sa, sigmoid(sb)));
        return std::vector<Tensor>{n[0] ? activation_backward(BinaryOp::SoftplusBackward, g, sb) : Tensor(), gx};
      });
      return;
    case BinaryOp::Maximum:
    case BinaryOp::Minimum: {
      const bool is_max = op == BinaryOp::Maximum;
      record(row(op).grad, out, {&a, &b}, [sa, sb, is_max](const Tensor& g, const std::vector<bool>& n) {
        const Tensor ties = sa == sb;
        Tensor ga, gb;
        if (n[0]) ga = pick(g, is_max ? sa > sb : sa < sb, ties);
        if (n[1]) gb = pick(g, is_max ? sb > sa : sb < sa, ties);
        return std::vector<Tensor>{ga, gb};
      });
      return;
    }
    default:
      return;  // comparisons have bool outputs
  }
}

void record_binary_scalar(BinaryOp op, const Tensor& out, const Tensor& a, const Scalar& s, bool scalar_first) {
  if (!floating_out(out) || !should_record({&a})) return;
  const Tensor sa = saved(a);
  const double v = s.to_double();
  switch (op) {
    case BinaryOp::Add:
      record(row(op).grad, out, {&a}, [](const Tensor& g, const std::vector<bool>&) { return std::vector<Tensor>{g}; });
      return;
    case BinaryOp::Sub:
      record(row(op).grad, out, {&a}, [scalar_first](const Tensor& g, const std::vector<bool>&) {
        return std::vector<Tensor>{scalar_first ? -g : g};
      });
      return;
    case BinaryOp::Mul:
      record(row(op).grad, out, {&a},
             [v](const Tensor& g, const std::vector<bool>&) { return std::vector<Tensor>{g * v}; });
      return;
    case BinaryOp::Div: {
      if (!scalar_first) {
        record(row(op).grad, out, {&a},
               [v](const Tensor& g, const std::vector<bool>&) { return std::vector<Tensor>{g / v}; });
        return;
      }
      const Tensor so = saved(out);  // v / a: d/da = -out / a
      record(row(op).grad, out, {&a},
             [sa, so](const Tensor& g, const std::vector<bool>&) { return std::vector<Tensor>{-g * so / sa}; });
      return;
    }
    case BinaryOp::Pow: {
      if (!scalar_first) {
        record(row(op).grad, out, {&a}, [sa, v](const Tensor& g, const std::vector<bool>&) {
          if (v == 0.0) return std::vector<Tensor>{zeros_like(g)};
          return std::vector<Tensor>{g * v * pow(sa, v - 1.0)};
        });
        return;
      }
      const Tensor so = saved(out);  // v ** a: d/da = out * log(v)
      record(row(op).grad, out, {&a},
             [so, v](const Tensor& g, const std::vector<bool>&) { return std::vector<Tensor>{g * so * std::log(v)}; });
      return;
    }
    case BinaryOp::Remainder:  // a % v: d/da = 1; v % a: d/da = -(v // a)
      record(row(op).grad, out, {&a}, [sa, s, scalar_first](const Tensor& g, const std::vector<bool>&) {
        return std::vector<Tensor>{scalar_first ? -g * floor_divide(s, sa) : g};
      });
      return;
    case BinaryOp::Maximum:
    case BinaryOp::Minimum: {
      const bool is_max = op == BinaryOp::Maximum;
      record(row(op).grad, out, {&a}, [sa, v, is_max](const Tensor& g, const std::vector<bool>&) {
        return std::vector<Tensor>{pick(g, is_max ? sa > v : sa < v, sa == v)};
      });
      return;
    }
    default:
      return;
  }
}

// One rule per unary op, named by its row in anvil/ops.def (the grad column):
// rule_<grad>(g, x, y, params) with x the input and y the output, saved. A row
// whose rule is missing here fails to compile (kUnaryRules below).
#define ANVIL_UNARY_RULE(grad)                                                           \
  Tensor rule_##grad([[maybe_unused]] const Tensor& g, [[maybe_unused]] const Tensor& x, \
                     [[maybe_unused]] const Tensor& y, [[maybe_unused]] const UnaryParams& p)
namespace {
ANVIL_UNARY_RULE(NegBackward) { return -g; }
ANVIL_UNARY_RULE(AbsBackward) { return g * sign(x); }
ANVIL_UNARY_RULE(ExpBackward) { return g * y; }
ANVIL_UNARY_RULE(LogBackward) { return g / x; }
ANVIL_UNARY_RULE(SqrtBackward) { return g * 0.5 / y; }
ANVIL_UNARY_RULE(RsqrtBackward) { return g * (y * y * y) * -0.5; }
ANVIL_UNARY_RULE(SinBackward) { return g * cos(x); }
ANVIL_UNARY_RULE(CosBackward) { return -g * sin(x); }
// See Note [Activation backward as one op].
ANVIL_UNARY_RULE(TanhBackward) { return activation_backward(BinaryOp::TanhBackward, g, y); }        // g (1 - y²)
ANVIL_UNARY_RULE(SigmoidBackward) { return activation_backward(BinaryOp::SigmoidBackward, g, y); }  // g (1 - y) y
// g where y > 0 (and where y is NaN, as PyTorch)
ANVIL_UNARY_RULE(ReluBackward) { return activation_backward(BinaryOp::ReluBackward, g, y); }
ANVIL_UNARY_RULE(SignBackward) { return zeros_like(g); }
ANVIL_UNARY_RULE(PowBackward) { return g * x * 2.0; }  // square
ANVIL_UNARY_RULE(ReciprocalBackward) { return -g * y * y; }
ANVIL_UNARY_RULE(ClampBackward) {
  Tensor r = g;
  if (p.lo > -std::numeric_limits<double>::infinity()) r = where(x < p.lo, 0.0, r);
  if (p.hi < std::numeric_limits<double>::infinity()) r = where(x > p.hi, 0.0, r);
  return r;
}
ANVIL_UNARY_RULE(Log1pBackward) { return g / (x + 1.0); }
ANVIL_UNARY_RULE(Expm1Backward) { return g * (y + 1.0); }
ANVIL_UNARY_RULE(ErfBackward) { return g * exp(-(x * x)) * 1.12837916709551257390; }          // 2/√π exp(-x²)
ANVIL_UNARY_RULE(GeluBackward) { return activation_backward(BinaryOp::GeluBackward, g, x); }  // Φ(x) + x φ(x)
// sigmoid(x), and 1 where the forward is x (x > 20)
ANVIL_UNARY_RULE(SoftplusBackward) { return activation_backward(BinaryOp::SoftplusBackward, g, x); }
ANVIL_UNARY_RULE(FloorBackward) { return zeros_like(g); }
ANVIL_UNARY_RULE(CeilBackward) { return zeros_like(g); }
ANVIL_UNARY_RULE(RoundBackward) { return zeros_like(g); }
// PyTorch's formulas (derivatives.yaml): g / (x² + 1), ±g rsqrt(1 - x²).
ANVIL_UNARY_RULE(AtanBackward) { return g / (x * x + 1.0); }
ANVIL_UNARY_RULE(AsinBackward) { return g * rsqrt(1.0 - x * x); }
ANVIL_UNARY_RULE(AcosBackward) { return -g * rsqrt(1.0 - x * x); }
// g cosh(x), g sinh(x), g rsqrt(x² + 1), g rsqrt(x² - 1), g / (1 - x²) (derivatives.yaml).
ANVIL_UNARY_RULE(SinhBackward) { return g * cosh(x); }
ANVIL_UNARY_RULE(CoshBackward) { return g * sinh(x); }
ANVIL_UNARY_RULE(AsinhBackward) { return g * rsqrt(x * x + 1.0); }
ANVIL_UNARY_RULE(AcoshBackward) { return g * rsqrt(x * x - 1.0); }
ANVIL_UNARY_RULE(AtanhBackward) { return g / (1.0 - x * x); }

using UnaryRuleFn = Tensor (*)(const Tensor&, const Tensor&, const Tensor&, const UnaryParams&);
constexpr UnaryRuleFn rule_NotDifferentiable = nullptr;  // logical_not: its bool result is never recorded
constexpr UnaryRuleFn kUnaryRules[] = {
#define ANVIL_UNARY_OP(Op, name, rule, autocast, cost, grad, doc) rule_##grad,
#include "anvil/ops.def"
};
static_assert(std::size(kUnaryRules) == static_cast<std::size_t>(UnaryOp::Count));
}  // namespace
#undef ANVIL_UNARY_RULE

void record_unary(UnaryOp op, const Tensor& out, const Tensor& x, const UnaryParams& params) {
  const UnaryRuleFn f = kUnaryRules[static_cast<int>(op)];
  if (!f || !floating_out(out) || !should_record({&x})) return;
  const Tensor sx = saved(x), so = saved(out);
  record(row(op).grad, out, {&x}, [f, sx, so, params](const Tensor& g, const std::vector<bool>&) {
    return std::vector<Tensor>{f(g, sx, so, params)};
  });
}

void record_where(const Tensor& out, const Tensor& cond, const Tensor* a, const Tensor* b) {
  if (!floating_out(out) || !should_record({a, b})) return;
  const Tensor sc = saved(cond);
  record("WhereBackward", out, {a, b}, [sc](const Tensor& g, const std::vector<bool>& n) {
    return std::vector<Tensor>{n[0] ? where(sc, g, 0.0) : Tensor(), n[1] ? where(sc, 0.0, g) : Tensor()};
  });
}

namespace {
// The shape of a keepdim reduction of `shape` over `dims` (empty = all).
Shape keepdim_shape(const Shape& shape, const Dims& dims) {
  Shape s = shape;
  if (dims.empty()) {
    for (int i = 0; i < s.size(); ++i) s[i] = 1;
    return s;
  }
  for (std::int64_t d : dims)
    if (s.size() > 0) s[wrap_dim(static_cast<int>(d), s.size(), "sum")] = 1;
  return s;
}
}  // namespace

void record_reduce(ReduceOp op, const Tensor& out, const Tensor& x, const Dims& dims, bool, double scale) {
  if (!floating_out(out) || !should_record({&x})) return;
  const Shape keep = keepdim_shape(x.shape(), dims);
  const Shape xs = x.shape();
  switch (op) {
    case ReduceOp::Sum:
      record(scale == 1.0 ? "SumBackward" : "MeanBackward", out, {&x},
             [keep, xs, scale](const Tensor& g, const std::vector<bool>&) {
               Tensor r = g.reshape(keep).expand(xs);
               return std::vector<Tensor>{scale == 1.0 ? r : r * scale};
             });
      return;
    case ReduceOp::SumSquares: {
      const Tensor sx = saved(x);
      record("SumSquaresBackward", out, {&x}, [keep, xs, sx, scale](const Tensor& g, const std::vector<bool>&) {
        return std::vector<Tensor>{g.reshape(keep).expand(xs) * sx * (2.0 * scale)};
      });
      return;
    }
    case ReduceOp::Prod: {
      // The product of the others without dividing by a zero, as PyTorch:
      // out / x in a slice with no zero; with one zero, that element's is the
      // product of the rest and the others' 0; with two or more, all 0.
      const Tensor sx = saved(x);
      record("ProdBackward", out, {&x}, [sx, keep, dims](const Tensor& g, const std::vector<bool>&) {
        const Tensor is_zero = sx == 0.0;
        const Tensor zeros = sum(is_zero, dims, true);
        const Tensor nonzero = where(is_zero, 1.0, sx);
        const Tensor rest = prod(nonzero, dims, true);  // the product of the slice's nonzero elements
        const Tensor others = where(is_zero, where(zeros == 1, rest, 0.0), where(zeros == 0, rest / nonzero, 0.0));
        return std::vector<Tensor>{g.reshape(keep) * others};
      });
      return;
    }
    case ReduceOp::Max:
    case ReduceOp::Min: {
      const Tensor sx = saved(x), so = saved(out);
      record(op == ReduceOp::Max ? "MaxBackward" : "MinBackward", out, {&x},
             [sx, so, keep, dims](const Tensor& g, const std::vector<bool>&) {
               const Tensor mask = (sx == so.reshape(keep)).to(g.dtype());
               const Tensor count = sum(mask, dims, true);
               return std::vector<Tensor>{mask * (g.reshape(keep) / count)};
             });
      return;
    }
    default:
      return;
  }
}

// d|x|/dx = x / |x|, and 0 where |x| = 0 (PyTorch's norm_backward), where
// the chain sqrt'(0) * 2x would give inf * 0 = NaN.
void record_norm(const Tensor& out, const Tensor& x, const Dims& dims) {
  if (!floating_out(out) || !should_record({&x})) return;
  const Tensor sx = saved(x), so = saved(out);
  const Shape keep = keepdim_shape(x.shape(), dims);
  record("NormBackward", out, {&x}, [sx, so, keep](const Tensor& g, const std::vector<bool>&) {
    const Tensor n = so.reshape(keep);
    return std::vector<Tensor>{sx * where(n == 0.0, 0.0, g.reshape(keep) / n)};
  });
}

namespace {
Tensor mT(const Tensor& t) { return t.transpose(-1, -2); }

// Note [Gradient in the operand's layout]
// linear(x, w) multiplies by w.t(), a transposed view of a contiguous
// weight. Computed as matmul(x.t(), g) the gradient for that view is
// contiguous in the view's shape, so TransposeBackward hands the weight a
// transposed tensor, which AccumulateGrad cannot steal and clones with a
// strided copy: in a 784-256-10 MLP at batch 128 that copy was 9% of a
// training step, the same at any batch size (what makes a per-rank half
// batch scale poorly). Computed as matmul(g.t(), x).t() it has the view's
// own layout and the weight's gradient arrives contiguous. PyTorch does the
// same (mm_mat2_backward).
bool is_transposed_matrix(const Tensor& t) {
  return t.dim() == 2 && t.size(0) > 1 && t.size(1) > 1 && t.stride(0) == 1 && t.stride(1) == t.size(0);
}

// matmul(x, y) for the gradient of the 2-D operand `like`, in like's layout.
Tensor matmul_in_layout_of(const Tensor& like, const Tensor& x, const Tensor& y) {
  return is_transposed_matrix(like) ? mT(matmul(mT(y), mT(x))) : matmul(x, y);
}
}  // namespace

void record_matmul(const Tensor& out, const Tensor& a, const Tensor& b) {
  if (!floating_out(out) || !should_record({&a, &b})) return;
  const Tensor sa = saved(a), sb = saved(b);
  record("MmBackward", out, {&a, &b}, [sa, sb](const Tensor& g, const std::vector<bool>& n) {
    Tensor ga, gb;
    if (sa.dim() == 1 && sb.dim() == 1) {
      if (n[0]) ga = g * sb;
      if (n[1]) gb = g * sa;
      return std::vector<Tensor>{ga, gb};
    }
    const Tensor a2 = sa.dim() == 1 ? sa.unsqueeze(0) : sa;
    const Tensor b2 = sb.dim() == 1 ? sb.unsqueeze(1) : sb;
    Tensor g2 = g;
    if (sa.dim() == 1) g2 = g2.unsqueeze(-2);
    if (sb.dim() == 1) g2 = g2.unsqueeze(-1);
    // See Note [Gradient in the operand's layout].
    if (n[0]) {
      ga = sa.dim() == 2 && g2.dim() == 2 ? matmul_in_layout_of(sa, g2, mT(b2)) : matmul(g2, mT(b2));
      if (sa.dim() == 1) ga = ga.squeeze(-2);
    }
    if (n[1]) {
      if (b2.dim() == 2 && a2.dim() > 2) {
        // A matrix broadcast over a's batch (a Linear on [B, T, K]): its
        // gradient is one GEMM over the batch folded into rows, not B
        // products summed afterwards (a [B, K, N] temporary and a reduction:
        // 13% of a ViT step on one thread). PyTorch folds in the forward.
        const Tensor rows = a2.reshape({-1, a2.size(-1)}), grows = g2.reshape({-1, g2.size(-1)});
        gb = matmul_in_layout_of(sb, mT(rows), grows);
      } else {
        gb = sb.dim() == 2 && g2.dim() == 2 ? matmul_in_layout_of(sb, mT(a2), g2) : matmul(mT(a2), g2);
      }
      if (sb.dim() == 1) gb = gb.squeeze(-1);
    }
    return std::vector<Tensor>{ga, gb};
  });
}

void record_addmm(const Tensor& out, const Tensor& bias, const Tensor& a, const Tensor& b, double beta, double alpha) {
  if (!should_record({&bias, &a, &b})) return;
  const Tensor sa = saved(a), sb = saved(b);
  record("AddmmBackward", out, {&bias, &a, &b}, [sa, sb, beta, alpha](const Tensor& g, const std::vector<bool>& n) {
    Tensor gbias, ga, gb;
    if (n[0]) gbias = beta == 1.0 ? g : g * beta;
    // See Note [Gradient in the operand's layout].
    if (n[1]) ga = alpha == 1.0 ? matmul_in_layout_of(sa, g, sb.t()) : matmul_in_layout_of(sa, g, sb.t()) * alpha;
    if (n[2]) gb = alpha == 1.0 ? matmul_in_layout_of(sb, sa.t(), g) : matmul_in_layout_of(sb, sa.t(), g) * alpha;
    return std::vector<Tensor>{gbias, ga, gb};
  });
}

}  // namespace anvil::detail
