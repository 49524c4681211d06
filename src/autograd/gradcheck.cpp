// gradcheck: analytic gradients against float64 central differences.
#include <cmath>
#include <sstream>

#include "anvil/autograd.h"
#include "anvil/ops.h"

namespace anvil::autograd {

namespace {
// A fixed, non-symmetric weighting of the output so that every output
// element contributes differently (sum(out) alone would hide transposes).
Tensor weights_like(const Tensor& out) {
  std::vector<double> w(static_cast<std::size_t>(out.numel()));
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = 0.5 + std::sin(1.7 * static_cast<double>(i) + 0.3);
  return from_host(w.data(), out.shape(), f64, out.device()).to(out.dtype());
}

double weighted_sum(const Tensor& out, const Tensor& w) { return sum(out.to(f64) * w.to(f64)).item<double>(); }
}  // namespace

GradcheckResult gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& fn,
                          const std::vector<Tensor>& inputs, const GradcheckOptions& options) {
  GradcheckResult result;
  std::vector<Tensor> leaves;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& t = inputs[i];
    if (t.defined() && t.requires_grad())
      ANVIL_CHECK(t.dtype() == f64, DTypeError, "gradcheck: input ", i,
                  " must be f64 for finite differences; expected f64, got ", t.dtype(), "; convert with .to(f64)");
    leaves.push_back(t.defined() && t.requires_grad() ? t.detach().clone().requires_grad_() : t);
  }
  const Tensor out = fn(leaves);
  ANVIL_CHECK(out.requires_grad(), ValueError,
              "gradcheck: the function's output does not require grad; expected a result of recorded ops, got a tensor "
              "outside any graph");
  const Tensor w = weights_like(out);
  sum(out.to(f64) * w.to(f64)).backward();

  NoGradGuard no_grad;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].defined() || !inputs[i].requires_grad()) continue;
    const Tensor grad = leaves[i].grad();
    const std::vector<double> analytic = grad.defined()
                                             ? grad.to_vector<double>()
                                             : std::vector<double>(static_cast<std::size_t>(inputs[i].numel()), 0.0);
    std::vector<double> x = inputs[i].to_vector<double>();
    for (std::size_t j = 0; j < x.size(); ++j) {
      const double orig = x[j];
      std::vector<Tensor> args = leaves;
      x[j] = orig + options.eps;
      args[i] = from_host(x.data(), inputs[i].shape(), f64, inputs[i].device());
      const double fp = weighted_sum(fn(args), w);
      x[j] = orig - options.eps;
      args[i] = from_host(x.data(), inputs[i].shape(), f64, inputs[i].device());
      const double fm = weighted_sum(fn(args), w);
      x[j] = orig;
      const double numeric = (fp - fm) / (2 * options.eps);
      if (!(std::abs(numeric - analytic[j]) <= options.atol + options.rtol * std::abs(numeric))) {
        std::ostringstream os;
        os << "gradcheck: input " << i << " (shape " << inputs[i].shape() << "), element " << j
           << ": analytic gradient " << analytic[j] << " differs from numeric " << numeric;
        result.ok = false;
        result.message = os.str();
        return result;
      }
    }
  }
  return result;
}

}  // namespace anvil::autograd
