// The fused optimiser steps as the optimisers call them (src/optim): one pass
// per parameter where the device's backend has the kernel (core/backend.h,
// OptimizerStepArgs), and nothing otherwise, so the optimiser runs its
// composite update from ordinary ops. ANVIL_NO_FUSED=1 turns the fused steps
// off like every fused kernel (ops/nn_ops.cpp), which keeps the composite
// tested.
#pragma once

#include <vector>

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

// One parameter of a multi-tensor step (Note [Multi-tensor optimiser steps]
// in core/backend.h); state0/state1 undefined where the kind keeps none.
struct ForeachTensor {
  Tensor param, grad, state0, state1;
  bool first = false;  // SGD: the momentum buffer starts as d
};
// The per-tensor table of a list on its device, kept by the optimiser
// across steps and uploaded again only when the offsets or sizes change.
struct ForeachTable {
  std::vector<std::int64_t> host;
  Tensor device;
};

// Runs `args` over every tensor of `list` in a few launches and returns
// true, when the list shares one device and dtype, every param, grad and
// state is contiguous and of its param's shape, each state kind lives in
// one storage (state1 at state0's offsets), and the backend has the
// multi-tensor step for that dtype. Returns false, having touched nothing,
// otherwise (the caller steps tensor by tensor).
// Whether `param`'s device runs the multi-tensor step in its dtype (and
// ANVIL_NO_FUSED is off): what makes the optimiser lay its state flat.
bool has_optimizer_step_list(OptimizerKind kind, const Tensor& param);

bool fused_optimizer_step_list(OptimizerStepArgs args, const std::vector<ForeachTensor>& list, ForeachTable& table);

}  // namespace anvil::detail
