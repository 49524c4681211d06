#include "ops/optimizer_step.h"

#include "core/env_flag.h"
#include "ops/op_common.h"
#include "ops/tensor_make.h"
#include "profiler/hooks.h"

namespace anvil::detail {

bool fused_optimizer_step(OptimizerStepArgs args, const Tensor& param, const Tensor& grad, const Tensor* state0,
                          const Tensor* state1) {
  if (env_flag("ANVIL_NO_FUSED")) return false;
  const auto fits = [&](const Tensor* t) {
    return t == nullptr || (t->defined() && t->device() == param.device() && t->dtype() == param.dtype() &&
                            t->shape() == param.shape() && t->is_contiguous());
  };
  if (!fits(&param) || !fits(&grad) || !fits(state0) || !fits(state1)) return false;
  Backend& b = backend_of(param);
  if (!b.supports_optimizer_step(args.kind, param.dtype(), param.device().index())) return false;
  ANVIL_PROFILE_OP("optimizer_step", &param, &grad);
  args.dtype = param.dtype();
  args.numel = param.numel();
  args.param = operand(param);
  args.grad = operand(grad);
  if (state0) args.state0 = operand(*state0);
  if (state1) args.state1 = operand(*state1);
  if (args.numel > 0) b.optimizer_step(param.device().index(), args);
  return true;
}

}  // namespace anvil::detail
