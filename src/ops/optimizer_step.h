// The fused optimiser steps as the optimisers call them (src/optim): one pass
// per parameter where the device's backend has the kernel (core/backend.h,
// OptimizerStepArgs), and nothing otherwise, so the optimiser runs its
// composite update from ordinary ops. ANVIL_NO_FUSED=1 turns the fused steps
// off like every fused kernel (ops/nn_ops.cpp), which keeps the composite
// tested.
#pragma once

#include "anvil/tensor.h"
#include "core/backend.h"

namespace anvil::detail {

// Runs `args` (its kind, dtype and scalars; the operands are filled in here)
// over `param` and returns true, when param, grad and the state tensors
// (state1 may be null, as may state0 for SGD without momentum) share
// param's device, dtype and shape, are contiguous, and the backend has the
// fused step for that dtype. Returns false, having touched nothing, otherwise.
bool fused_optimizer_step(OptimizerStepArgs args, const Tensor& param, const Tensor& grad, const Tensor* state0,
                          const Tensor* state1);

}  // namespace anvil::detail
