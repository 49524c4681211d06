// anvil/amp.h — automatic mixed precision (docs/mixed-precision.md): autocast
// (anvil/autocast.h, what the ops read) and gradient scaling
// (anvil/grad_scaler.h, with the optimisers).
//
//   anvil::amp::GradScaler scaler;                       // f16 needs it; bf16 does not
//   for (...) {
//     opt.zero_grad();
//     Tensor loss;
//     { anvil::amp::AutocastGuard ac(device, anvil::f16);  // forward only
//       loss = anvil::nn::cross_entropy(net(x), y); }
//     scaler.scale(loss).backward();
//     scaler.step(opt);                                  // skipped on inf/NaN gradients
//     scaler.update();
//   }
#pragma once

#include "anvil/autocast.h"
#include "anvil/grad_scaler.h"
