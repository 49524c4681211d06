#include "ops/optimizer_step.h"

#include "anvil/ops.h"
#include "core/env_flag.h"
#include "core/observer.h"
#include "ops/op_common.h"
#include "ops/tensor_make.h"

namespace anvil::detail {

namespace {
// The kernels walk every operand as one flat block from its offset, so each
// must be dense, and in the parameter's order of dims (channels-last
// parameters too, with their gradients and state laid out alike).
bool same_dense_layout(const Tensor& t, const Tensor& param) {
  return t.shape() == param.shape() && t.strides() == param.strides() &&
         (param.is_contiguous() || is_dense_non_overlapping(param));
}
}  // namespace

bool fused_optimizer_step(OptimizerStepArgs args, const Tensor& param, const Tensor& grad, const Tensor* state0,
                          const Tensor* state1) {
  if (env_flag("ANVIL_NO_FUSED")) return false;
  const auto fits = [&](const Tensor* t) {
    return t == nullptr || (t->defined() && t->device() == param.device() && t->dtype() == param.dtype() &&
                            same_dense_layout(*t, param));
  };
  if (!fits(&param) || !fits(&grad) || !fits(state0) || !fits(state1)) return false;
  if (!dispatch::supports_optimizer_step(param.device(), args.kind, param.dtype())) return false;
  ANVIL_PROFILE_OP("optimizer_step", &param, &grad);
  args.dtype = param.dtype();
  args.numel = param.numel();
  args.param = operand(param);
  args.grad = operand(grad);
  if (state0) args.state0 = operand(*state0);
  if (state1) args.state1 = operand(*state1);
  if (args.numel > 0) dispatch::optimizer_step(param.device(), args);
  return true;
}

bool has_optimizer_step_list(OptimizerKind kind, const Tensor& param) {
  return !env_flag("ANVIL_NO_FUSED") && dispatch::supports_optimizer_step_list(param.device(), kind, param.dtype());
}

bool fused_optimizer_step_list(OptimizerStepArgs args, const std::vector<ForeachTensor>& list, ForeachTable& table) {
  if (list.empty() || env_flag("ANVIL_NO_FUSED")) return false;
  const Tensor& head = list.front().param;
  const auto fits = [&](const Tensor& t, const Tensor& p) {
    return t.defined() && t.device() == head.device() && t.dtype() == head.dtype() && same_dense_layout(t, p);
  };
  const bool has0 = list.front().state0.defined(), has1 = list.front().state1.defined();
  for (const ForeachTensor& x : list) {
    if (!fits(x.param, x.param) || !fits(x.grad, x.param)) return false;
    if (x.state0.defined() != has0 || x.state1.defined() != has1) return false;
    if (has0 && (!fits(x.state0, x.param) || !x.state0.shares_storage(list.front().state0))) return false;
    if (has1 && (!fits(x.state1, x.param) || !x.state1.shares_storage(list.front().state1) ||
                 x.state1.offset() != x.state0.offset()))
      return false;
  }
  if (!dispatch::supports_optimizer_step_list(head.device(), args.kind, head.dtype())) return false;
  ANVIL_PROFILE_OP("optimizer_step", &head);
  const auto n = static_cast<std::int64_t>(list.size());
  std::vector<std::int64_t> host(static_cast<std::size_t>(4 * n + 1), 0);
  for (std::int64_t i = 0; i < n; ++i) {
    const ForeachTensor& x = list[static_cast<std::size_t>(i)];
    host[i + 1] = host[i] + x.param.numel();
    host[n + 1 + i] = x.param.offset();
    host[2 * n + 1 + i] = x.grad.offset();
    host[3 * n + 1 + i] = has0 ? x.state0.offset() : 0;
  }
  if (host != table.host || !table.device.defined() || table.device.device() != head.device()) {
    table.device = from_host(host.data(), Shape{4 * n + 1}, i64, head.device());
    table.host = std::move(host);
  }
  OptimizerStepListArgs a;
  args.dtype = head.dtype();
  a.step = args;
  a.table = operand(table.device);
  a.tensors.reserve(list.size());
  for (const ForeachTensor& x : list) {
    OptimizerTensor t;
    t.numel = x.param.numel();
    t.param = operand(x.param);
    t.grad = operand(x.grad);
    if (has0) t.state0 = operand(x.state0);
    if (has1) t.state1 = operand(x.state1);
    t.first = x.first;
    a.tensors.push_back(t);
  }
  dispatch::optimizer_step_list(head.device(), a);
  return true;
}

}  // namespace anvil::detail
