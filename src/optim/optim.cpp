// SGD and Adam, written on the public op API.
#include "anvil/optim.h"

#include <algorithm>
#include <cmath>

#include "anvil/autograd.h"
#include "anvil/ops.h"
#include "anvil/profiler.h"
#include "ops/optimizer_step.h"

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

std::vector<std::vector<std::size_t>> Optimizer::foreach_groups() const {
  std::vector<std::vector<std::size_t>> groups;
  std::vector<std::pair<Device, DType>> keys;
  for (std::size_t i = 0; i < params_.size(); ++i) {
    if (!params_[i].grad().defined()) continue;
    const std::pair<Device, DType> key{params_[i].device(), params_[i].dtype()};
    const auto it = std::find(keys.begin(), keys.end(), key);
    if (it == keys.end()) {
      keys.push_back(key);
      groups.push_back({i});
    } else {
      groups[static_cast<std::size_t>(it - keys.begin())].push_back(i);
    }
  }
  return groups;
}

namespace {
// "exp_avg.12" → ("exp_avg", 12); ValueError naming the key otherwise.
std::pair<std::string, std::size_t> split_key(const char* op, const std::string& key, std::size_t params) {
  const auto dot = key.rfind('.');
  std::size_t index = 0;
  bool ok = dot != std::string::npos && dot + 1 < key.size();
  if (ok)
    for (std::size_t i = dot + 1; i < key.size(); ++i) {
      ok = ok && key[i] >= '0' && key[i] <= '9' && i - dot < 10;
      if (ok) index = index * 10 + static_cast<std::size_t>(key[i] - '0');
    }
  ANVIL_CHECK(ok && index < params, ValueError, op, ": unexpected state key '", key,
              "'; expected <name>.<parameter index> with an index below ", params);
  return {key.substr(0, dot), index};
}

// A copy of `state` on `p`'s device, after a shape check.
Tensor adopt(const char* op, const std::string& key, const Tensor& state, const Tensor& p) {
  ANVIL_CHECK(state.defined() && state.shape() == p.shape(), ShapeError, op, ": state '", key,
              "' does not fit its parameter; expected shape ", p.shape(), ", got ",
              state.defined() ? state.shape() : Shape{});
  return state.to(p.dtype()).copy_to(p.device());
}
}  // namespace

void Optimizer::load_state_dict(const std::map<std::string, Tensor>& state) {
  ANVIL_CHECK(state.empty(), ValueError,
              "load_state_dict: this optimiser keeps no state; expected an empty state, "
              "got ",
              state.size(), " entries (first '", state.empty() ? "" : state.begin()->first, "')");
}

namespace {
// State made for a parameter follows it when the parameter moved.
void follow(Tensor& state, const Tensor& p) {
  if (state.defined() && state.device() != p.device()) state = state.to(p.device());
}

// Makes the states of parameters `group` views of one flat storage (the
// multi-tensor step's layout), keeping the values of those that exist and
// zeroing (or, with `zero` false, leaving unset) the others. Nothing
// happens when they already share one storage.
void flatten_state(std::vector<Tensor>& state, const std::vector<Tensor>& params, const std::vector<std::size_t>& group,
                   bool zero) {
  const Tensor& head = state[group.front()];
  const bool flat = std::all_of(group.begin(), group.end(), [&](std::size_t i) {
    return state[i].defined() && head.defined() && state[i].shares_storage(head) &&
           state[i].strides() == params[i].strides();
  });
  if (flat) return;
  std::int64_t total = 0;
  for (std::size_t i : group) total += params[i].numel();
  const Tensor& p0 = params[group.front()];
  const Tensor all = zero ? zeros({total}, p0.device(), p0.dtype()) : empty({total}, p0.device(), p0.dtype());
  std::int64_t at = 0;
  for (std::size_t i : group) {
    // In the parameter's own layout (a channels-last weight's state is too),
    // which the flat kernels need (ops/optimizer_step.cpp).
    const Tensor& p = params[i];
    Tensor view = p.suggest_memory_format() == MemoryFormat::ChannelsLast
                      ? all.as_strided(p.shape(), p.strides(), at)
                      : all.narrow(0, at, p.numel()).view(p.shape());
    if (state[i].defined()) view.copy_(state[i]);
    state[i] = view;
    at += params[i].numel();
  }
}

std::string group_key(const Tensor& p) { return p.device().str() + "/" + std::string(to_string(p.dtype())); }

detail::ForeachTable& table_for(std::map<std::string, std::shared_ptr<detail::ForeachTable>>& tables, const Tensor& p) {
  auto& t = tables[group_key(p)];
  if (!t) t = std::make_shared<detail::ForeachTable>();
  return *t;
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
  const profiler::Range range("SGD.step", "optimizer");
  NoGradGuard no_grad;
  const SGDOptions& o = options_;
  const detail::OptimizerStepArgs args{.kind = detail::OptimizerKind::Sgd,
                                       .lr = o.lr,
                                       .weight_decay = o.weight_decay,
                                       .momentum = o.momentum,
                                       .dampening = o.dampening,
                                       .nesterov = o.nesterov};
  for (const std::vector<std::size_t>& group : o.foreach ? foreach_groups() : std::vector<std::vector<std::size_t>>{}) {
    const Tensor& p0 = params_[group.front()];
    std::vector<detail::ForeachTensor> list(group.size());
    std::vector<Tensor> before;  // to restore when the group is not taken
    if (o.momentum != 0) {
      for (std::size_t i : group) follow(momentum_[i], params_[i]);
      for (std::size_t i : group) before.push_back(momentum_[i]);
      for (std::size_t k = 0; k < group.size(); ++k) list[k].first = !momentum_[group[k]].defined();
      if (detail::has_optimizer_step_list(args.kind, p0)) flatten_state(momentum_, params_, group, false);
    }
    for (std::size_t k = 0; k < group.size(); ++k) {
      list[k].param = params_[group[k]];
      list[k].grad = params_[group[k]].grad();
      if (o.momentum != 0) list[k].state0 = momentum_[group[k]];
    }
    if (detail::fused_optimizer_step_list(args, list, table_for(tables_, p0))) continue;
    if (o.momentum != 0)
      for (std::size_t k = 0; k < group.size(); ++k) momentum_[group[k]] = before[k];
    for (std::size_t i : group) step_one(i);
  }
  if (!o.foreach)
    for (std::size_t i = 0; i < params_.size(); ++i) step_one(i);
}

void SGD::step_one(std::size_t i) {
  const SGDOptions& o = options_;
  Tensor& p = params_[i];
  Tensor d = p.grad();
  if (!d.defined()) return;
  if (o.momentum != 0) follow(momentum_[i], p);
  if (fused_step(p, d, i)) return;
  if (o.weight_decay != 0) d = d + p * o.weight_decay;
  if (o.momentum != 0) {
    Tensor& buf = momentum_[i];
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

// The whole update in one pass where the device has the fused kernel
// (ops/optimizer_step.h); false when the composite below must run.
bool SGD::fused_step(Tensor& p, const Tensor& grad, std::size_t i) {
  const SGDOptions& o = options_;
  detail::OptimizerStepArgs args{.kind = detail::OptimizerKind::Sgd,
                                 .lr = o.lr,
                                 .weight_decay = o.weight_decay,
                                 .momentum = o.momentum,
                                 .dampening = o.dampening,
                                 .nesterov = o.nesterov};
  if (o.momentum == 0) return detail::fused_optimizer_step(args, p, grad, nullptr, nullptr);
  Tensor& buf = momentum_[i];
  args.first = !buf.defined();
  Tensor state = args.first ? empty_like(p) : buf;
  if (!detail::fused_optimizer_step(args, p, grad, &state, nullptr)) return false;
  buf = std::move(state);
  return true;
}

Adam::Adam(std::vector<Tensor> params, AdamOptions options) : Adam(std::move(params), options, false) {}

AdamW::AdamW(std::vector<Tensor> params, AdamOptions options) : Adam(std::move(params), options, true) {}

Adam::Adam(std::vector<Tensor> params, AdamOptions options, bool decoupled)
    : Optimizer(std::move(params)), options_(options), decoupled_(decoupled), m_(params_.size()), v_(params_.size()) {
  ANVIL_CHECK(options.lr >= 0 && options.eps >= 0 && options.beta1 >= 0 && options.beta1 < 1 && options.beta2 >= 0 &&
                  options.beta2 < 1,
              ValueError, "Adam: expected lr >= 0, eps >= 0 and betas in [0, 1); got lr ", options.lr, ", betas (",
              options.beta1, ", ", options.beta2, "), eps ", options.eps);
}

void Adam::step() {
  const profiler::Range range("Adam.step", "optimizer");
  NoGradGuard no_grad;
  const AdamOptions& o = options_;
  ++t_;
  const double c1 = 1.0 - std::pow(o.beta1, static_cast<double>(t_));
  const double c2 = 1.0 - std::pow(o.beta2, static_cast<double>(t_));
  const detail::OptimizerStepArgs args = step_args(c1, c2);
  for (const std::vector<std::size_t>& group : o.foreach ? foreach_groups() : std::vector<std::vector<std::size_t>>{}) {
    const Tensor& p0 = params_[group.front()];
    for (std::size_t i : group) {
      follow(m_[i], params_[i]);
      follow(v_[i], params_[i]);
    }
    if (detail::has_optimizer_step_list(args.kind, p0)) {
      flatten_state(m_, params_, group, true);
      flatten_state(v_, params_, group, true);
    }
    std::vector<detail::ForeachTensor> list(group.size());
    for (std::size_t k = 0; k < group.size(); ++k)
      list[k] = {params_[group[k]], params_[group[k]].grad(), m_[group[k]], v_[group[k]]};
    if (detail::fused_optimizer_step_list(args, list, table_for(tables_, p0))) continue;
    for (std::size_t i : group) step_one(i, args);
  }
  if (!o.foreach)
    for (std::size_t i = 0; i < params_.size(); ++i) step_one(i, args);
}

detail::OptimizerStepArgs Adam::step_args(double c1, double c2) const {
  const AdamOptions& o = options_;
  return {.kind = detail::OptimizerKind::Adam,
          .lr = o.lr,
          .weight_decay = o.weight_decay,
          .beta1 = o.beta1,
          .beta2 = o.beta2,
          .eps = o.eps,
          .bias_correction1 = c1,
          .bias_correction2 = c2,
          .decoupled = decoupled_};
}

void Adam::step_one(std::size_t i, const detail::OptimizerStepArgs& args) {
  const AdamOptions& o = options_;
  const double c1 = args.bias_correction1, c2 = args.bias_correction2;
  Tensor& p = params_[i];
  Tensor g = p.grad();
  if (!g.defined()) return;
  follow(m_[i], p);
  follow(v_[i], p);
  if (!m_[i].defined()) {
    m_[i] = zeros_like(p);
    v_[i] = zeros_like(p);
  }
  if (detail::fused_optimizer_step(args, p, g, &m_[i], &v_[i])) return;
  if (o.weight_decay != 0 && decoupled_) p.mul_(1 - o.lr * o.weight_decay);
  if (o.weight_decay != 0 && !decoupled_) g = g + p * o.weight_decay;
  m_[i].mul_(o.beta1).add_(g * (1 - o.beta1));
  v_[i].mul_(o.beta2).add_(square(g) * (1 - o.beta2));
  const Tensor denom = sqrt(v_[i] / c2) + o.eps;
  p.sub_(m_[i] / denom * (o.lr / c1));
}

std::map<std::string, Tensor> SGD::state_dict() const {
  std::map<std::string, Tensor> out;
  for (std::size_t i = 0; i < momentum_.size(); ++i)
    if (momentum_[i].defined()) out["momentum." + std::to_string(i)] = momentum_[i].detach();
  return out;
}

void SGD::load_state_dict(const std::map<std::string, Tensor>& state) {
  std::vector<Tensor> loaded(params_.size());
  for (const auto& [key, t] : state) {
    const auto [name, i] = split_key("SGD: load_state_dict", key, params_.size());
    ANVIL_CHECK(name == "momentum", ValueError, "SGD: load_state_dict: unexpected state key '", key,
                "'; expected momentum.<index>");
    loaded[i] = adopt("SGD: load_state_dict", key, t, params_[i]);
  }
  momentum_ = std::move(loaded);
}

std::map<std::string, Tensor> Adam::state_dict() const {
  std::map<std::string, Tensor> out;
  for (std::size_t i = 0; i < m_.size(); ++i)
    if (m_[i].defined()) {
      out["exp_avg." + std::to_string(i)] = m_[i].detach();
      out["exp_avg_sq." + std::to_string(i)] = v_[i].detach();
    }
  out["step"] = scalar_tensor(t_, cpu(), i64);
  return out;
}

void Adam::load_state_dict(const std::map<std::string, Tensor>& state) {
  std::vector<Tensor> m(params_.size()), v(params_.size());
  std::int64_t t = 0;
  for (const auto& [key, s] : state) {
    if (key == "step") {
      ANVIL_CHECK(s.defined() && s.numel() == 1, ShapeError,
                  "Adam: load_state_dict: 'step' must hold one integer; got ", s.defined() ? s.shape() : Shape{});
      t = s.to(cpu(), i64).reshape({1}).to_vector<std::int64_t>()[0];
      continue;
    }
    const auto [name, i] = split_key("Adam: load_state_dict", key, params_.size());
    ANVIL_CHECK(name == "exp_avg" || name == "exp_avg_sq", ValueError, "Adam: load_state_dict: unexpected state key '",
                key, "'; expected exp_avg.<index>, exp_avg_sq.<index> or step");
    (name == "exp_avg" ? m : v)[i] = adopt("Adam: load_state_dict", key, s, params_[i]);
  }
  for (std::size_t i = 0; i < params_.size(); ++i)
    ANVIL_CHECK(m[i].defined() == v[i].defined(), ValueError, "Adam: load_state_dict: parameter ", i,
                " has only one of exp_avg and exp_avg_sq; expected both or neither");
  m_ = std::move(m);
  v_ = std::move(v);
  t_ = t;
}

}  // namespace anvil::optim
