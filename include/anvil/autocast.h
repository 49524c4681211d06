// anvil/autocast.h — autocast (PyTorch's torch.autocast; docs/mixed-precision.md):
// ops run in a lower precision inside a guard. GradScaler, which f16
// training needs too, is in anvil/grad_scaler.h; anvil/amp.h has both.
//
//   { anvil::amp::AutocastGuard ac(device, anvil::f16);  // forward only
//     loss = anvil::nn::cross_entropy(net(x), y); }
//
// While a guard is active for a tensor's device type, ops cast their
// floating inputs (f32, f16, bf16; never f64) by two lists, PyTorch's:
//
//   lower precision (run in the guard's dtype):
//     matmul (and mm, bmm, dot, which are matmul), addmm, linear (Linear),
//     conv2d (Conv2d).
//   f32 (16-bit inputs are widened to f32, outputs are f32):
//     sum, prod, mean, norm, logsumexp, softmax, log_softmax, cross_entropy,
//     mse_loss, layer_norm (LayerNorm), and the elementwise ops whose row in
//     anvil/ops.def says Fp32 (exp, log, log1p, expm1, rsqrt, reciprocal,
//     softplus, sinh, cosh, pow).
//
// Every other op runs in its inputs' dtype (promoted as usual): relu,
// pooling, add, views, … and batch_norm (BatchNorm), whose 16-bit input
// keeps its dtype while its statistics and arithmetic are f32 and weight,
// bias and running statistics stay f32 (PyTorch's mixed batch norm). The casts are the ordinary differentiable
// to(dtype), so gradients reach f32 parameters as f32. Backward passes run with autocast off: each gradient rule
// computes in its forward op's dtype.
#pragma once

#include "anvil/device.h"
#include "anvil/dtype.h"

namespace anvil::amp {

// Autocast for one device type on this thread, from construction to
// destruction; guards nest and each restores what it found. `dtype` must be
// floating (f16 or bf16 in practice; f32 keeps the f32 list's widening
// only): ValueError otherwise. enabled = false turns autocast off inside an
// enclosing guard (torch.autocast(..., enabled=False)).
class AutocastGuard {
 public:
  AutocastGuard(DeviceType type, DType dtype, bool enabled = true);
  AutocastGuard(Device device, DType dtype, bool enabled = true) : AutocastGuard(device.type(), dtype, enabled) {}
  ~AutocastGuard();
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  DeviceType type_;
  bool prev_enabled_;
  DType prev_dtype_;
};

// This thread's autocast state for a device type (torch.is_autocast_enabled,
// torch.get_autocast_gpu_dtype). The dtype is the last guard's, or bf16 on
// the CPU and f16 elsewhere when none was ever set (PyTorch's defaults).
bool is_autocast_enabled(DeviceType type) noexcept;
DType autocast_dtype(DeviceType type) noexcept;

}  // namespace anvil::amp
