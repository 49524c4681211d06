// SGD and Adam, written on the public op API.
#include <cmath>

#include "anvil/autograd.h"
#include "anvil/ops.h"
#include "anvil/optim.h"

namespace anvil::optim {

Optimizer::Optimizer(std::vector<Tensor> params) : params_(std::move(params)) {
  for (std::size_t i = 0; i < params_.size(); ++i)
    ANVIL_CHECK(params_[i].defined() && params_[i].requires_grad(), ValueError, "optimizer: parameter ", i,
                " does not require grad; expected tensors with requires_grad_(), got ",
                params_[i].defined() ? "one without" : "an undefined tensor");
}

void Optimizer::zero_grad() {
  for (const Tensor& p : params_) p.set_grad({});
}

namespace {
// State made for a parameter follows it when the parameter moved.
void follow(Tensor& state, const Tensor& p) {
  if (state.defined() && state.device() != p.device()) state = state.to(p.device());
}
}  // namespace

SGD::SGD(std::vector<Tensor> params, SGDOptions options)
    : Optimizer(std::move(params)), options_(options), momentum_(params_.size()) {
  ANVIL_CHECK(options.lr >= 0 && options.momentum >= 0 && options.weight_decay >= 0, ValueError,
              "SGD: lr, momentum and weight_decay must be >= 0; got lr ", options.lr, ", momentum ", options.momentum,
              ", weight_decay ", options.weight_decay);
  ANVIL_CHECK(!options.nesterov || (options.momentum > 0 && options.dampening == 0), ValueError,
              "SGD: nesterov needs momentum > 0 and dampening 0; got momentum ", options.momentum, ", dampening ",
              options.dampening);
}

void SGD::step() {
  NoGradGuard no_grad;
  const SGDOptions& o = options_;
  for (std::size_t i = 0; i < params_.size(); ++i) {
    Tensor& p = params_[i];
    Tensor d = p.grad();
    if (!d.defined()) continue;
    if (o.weight_decay != 0) d = d + p * o.weight_decay;
    if (o.momentum != 0) {
      Tensor& buf = momentum_[i];
      follow(buf, p);
      if (!buf.defined()) {
        buf = d.clone();
      } else {
        buf.mul_(o.momentum);
        buf.add_(o.dampening == 0 ? d : d * (1 - o.dampening));
      }
      d = o.nesterov ? d + buf * o.momentum : buf;
    }
    p.sub_(d * o.lr);
  }
}

Adam::Adam(std::vector<Tensor> params, AdamOptions options)
    : Optimizer(std::move(params)), options_(options), m_(params_.size()), v_(params_.size()) {
  ANVIL_CHECK(options.lr >= 0 && options.eps >= 0 && options.beta1 >= 0 && options.beta1 < 1 && options.beta2 >= 0 &&
                  options.beta2 < 1,
              ValueError, "Adam: expected lr >= 0, eps >= 0 and betas in [0, 1); got lr ", options.lr, ", betas (",
              options.beta1, ", ", options.beta2, "), eps ", options.eps);
}

void Adam::step() {
  NoGradGuard no_grad;
  const AdamOptions& o = options_;
  ++t_;
  const double c1 = 1.0 - std::pow(o.beta1, static_cast<double>(t_));
  const double c2 = 1.0 - std::pow(o.beta2, static_cast<double>(t_));
  for (std::size_t i = 0; i < params_.size(); ++i) {
    Tensor& p = params_[i];
    Tensor g = p.grad();
    if (!g.defined()) continue;
    if (o.weight_decay != 0) g = g + p * o.weight_decay;
    follow(m_[i], p);
    follow(v_[i], p);
    if (!m_[i].defined()) {
      m_[i] = zeros_like(p);
      v_[i] = zeros_like(p);
    }
    m_[i].mul_(o.beta1).add_(g * (1 - o.beta1));
    v_[i].mul_(o.beta2).add_(square(g) * (1 - o.beta2));
    const Tensor denom = sqrt(v_[i] / c2) + o.eps;
    p.sub_(m_[i] / denom * (o.lr / c1));
  }
}

}  // namespace anvil::optim
