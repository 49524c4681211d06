// GradScaler (anvil/grad_scaler.h): PyTorch's dynamic loss scaling.
#include <cmath>
#include <utility>

#include "anvil/autograd.h"
#include "anvil/error.h"
#include "anvil/grad_scaler.h"
#include "anvil/ops.h"

namespace anvil::amp {

namespace {
void check_scale(const char* op, double s) {
  ANVIL_CHECK(std::isfinite(s) && s > 0, ValueError, op, ": the scale must be positive and finite; expected > 0, got ",
              s);
}
}  // namespace

GradScaler::GradScaler(GradScalerOptions options) : options_(options), scale_(options.init_scale) {
  check_scale("GradScaler", options_.init_scale);
  ANVIL_CHECK(options_.growth_factor > 1.0, ValueError, "GradScaler: growth_factor must exceed 1; expected > 1, got ",
              options_.growth_factor);
  ANVIL_CHECK(options_.backoff_factor > 0.0 && options_.backoff_factor < 1.0, ValueError,
              "GradScaler: backoff_factor must lie in (0, 1); expected 0 < backoff_factor < 1, got ",
              options_.backoff_factor);
  ANVIL_CHECK(options_.growth_interval > 0, ValueError,
              "GradScaler: growth_interval must be positive; expected > 0, got ", options_.growth_interval);
}

Tensor GradScaler::scale(const Tensor& loss) const {
  if (!options_.enabled) return loss;
  ANVIL_CHECK(loss.defined(), ValueError, "GradScaler::scale: expected a defined loss tensor, got an undefined one");
  return loss * scale_;
}

GradScaler::PerOptimizer& GradScaler::state_of(const optim::Optimizer& opt) { return per_opt_[&opt]; }

void GradScaler::unscale_(optim::Optimizer& opt) {
  if (!options_.enabled) return;
  PerOptimizer& st = state_of(opt);
  ANVIL_CHECK(!st.unscaled, ValueError,
              "GradScaler::unscale_: already called for this optimiser since the last update(); expected one call "
              "per step");
  ANVIL_CHECK(!st.stepped, ValueError,
              "GradScaler::unscale_: called after step() for this optimiser; expected it before step()");
  NoGradGuard no_grad;
  const double inv = 1.0 / scale_;  // exact: the scale is a power of two unless set otherwise
  // Gradients by device, so the finiteness check is one reduction per device.
  std::vector<std::pair<Device, std::vector<Tensor>>> by_device;
  for (const Tensor& p : opt.params()) {
    Tensor g = p.grad();
    if (!g.defined()) continue;
    g.mul_(inv);
    auto it = by_device.begin();
    while (it != by_device.end() && !(it->first == g.device())) ++it;
    if (it == by_device.end()) it = by_device.insert(it, {g.device(), {}});
    it->second.push_back(g.reshape({-1}));
  }
  // g * 0 is 0 for a finite g and NaN for inf or NaN, so the sum is 0
  // exactly when every gradient is finite (a plain sum could overflow).
  for (auto& [device, grads] : by_device) st.found_inf.push_back(sum(cat(grads) * 0.0));
  st.unscaled = true;
}

bool GradScaler::found_inf(PerOptimizer& st) {
  if (!st.inf.has_value()) {
    // The single host read of the step: each device's flag comes to the CPU.
    Tensor total = zeros({}, cpu(), f32);
    for (const Tensor& f : st.found_inf) total = total + f.to(cpu()).to(f32);
    const double v = st.found_inf.empty() ? 0.0 : total.item<double>();
    st.inf = v != 0.0;  // NaN != 0 too
    st.found_inf.clear();
  }
  return *st.inf;
}

bool GradScaler::step(optim::Optimizer& opt) {
  if (!options_.enabled) {
    opt.step();
    return true;
  }
  PerOptimizer& st = state_of(opt);
  ANVIL_CHECK(!st.stepped, ValueError,
              "GradScaler::step: already called for this optimiser since the last update(); expected one step per "
              "update()");
  if (!st.unscaled) unscale_(opt);
  const bool skip = found_inf(st);
  if (!skip) opt.step();
  st.stepped = true;
  return !skip;
}

void GradScaler::update() {
  if (!options_.enabled) return;
  ANVIL_CHECK(!per_opt_.empty(), ValueError,
              "GradScaler::update: no gradients were checked since the last update; expected unscale_() or step() "
              "first");
  bool any_inf = false;
  for (auto& [opt, st] : per_opt_) any_inf = found_inf(st) || any_inf;
  per_opt_.clear();
  if (any_inf) {
    scale_ *= options_.backoff_factor;
    growth_tracker_ = 0;
  } else if (++growth_tracker_ == options_.growth_interval) {
    scale_ *= options_.growth_factor;
    growth_tracker_ = 0;
  }
}

void GradScaler::update(double new_scale) {
  if (!options_.enabled) return;
  check_scale("GradScaler::update", new_scale);
  per_opt_.clear();
  scale_ = new_scale;
}

std::map<std::string, Tensor> GradScaler::state_dict() const {
  if (!options_.enabled) return {};
  return {{"scale", full({}, scale_, cpu(), f64)}, {"growth_tracker", full({}, growth_tracker_, cpu(), i64)}};
}

void GradScaler::load_state_dict(const std::map<std::string, Tensor>& state) {
  for (const char* key : {"scale", "growth_tracker"})
    ANVIL_CHECK(state.count(key) == 1, ValueError, "GradScaler::load_state_dict: missing key '", key,
                "'; expected 'scale' and 'growth_tracker'");
  const double s = state.at("scale").item<double>();
  check_scale("GradScaler::load_state_dict", s);
  scale_ = s;
  growth_tracker_ = state.at("growth_tracker").item<std::int64_t>();
  per_opt_.clear();
}

}  // namespace anvil::amp
