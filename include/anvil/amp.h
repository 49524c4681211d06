// anvil/amp.h — automatic mixed precision: autocast and gradient scaling
// (PyTorch's torch.autocast and torch.cuda.amp.GradScaler; docs/mixed-precision.md).
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
//     BatchNorm is built from mean and rsqrt, so it normalises in f32 too.
//
// Every other op runs in its inputs' dtype (promoted as usual): relu,
// pooling, add, views, … The casts are the ordinary differentiable to(dtype),
// so gradients reach f32 parameters as f32. Backward passes run with
// autocast off: each gradient rule computes in its forward op's dtype.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "anvil/device.h"
#include "anvil/dtype.h"
#include "anvil/optim.h"
#include "anvil/tensor.h"

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

struct GradScalerOptions {
  double init_scale = 65536.0;
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  std::int64_t growth_interval = 2000;
  bool enabled = true;
};

// Loss scaling for f16 training (torch.cuda.amp.GradScaler), on every
// device. scale(loss) multiplies the loss so small gradients survive f16;
// unscale_(opt) divides the optimiser's gradients back in place and notes
// whether any is inf or NaN (one device-side reduction per device); step(opt)
// unscales if that was not done yet and runs opt.step() unless a gradient
// was non-finite, reading that answer from the devices once; update() backs
// the scale off after a skipped step and grows it after growth_interval
// clean ones. Disabled, every call passes through (scale returns the loss).
class GradScaler {
 public:
  explicit GradScaler(GradScalerOptions options = {});

  Tensor scale(const Tensor& loss) const;
  void unscale_(optim::Optimizer& opt);
  // True when the step ran, false when it was skipped.
  bool step(optim::Optimizer& opt);
  void update();
  // Sets the scale outright (PyTorch's update(new_scale)); ValueError unless positive and finite.
  void update(double new_scale);

  double get_scale() const noexcept { return options_.enabled ? scale_ : 1.0; }
  std::int64_t growth_tracker() const noexcept { return growth_tracker_; }
  bool is_enabled() const noexcept { return options_.enabled; }
  const GradScalerOptions& options() const noexcept { return options_; }

  // "scale" (f64) and "growth_tracker" (i64), scalars on the CPU: saved with
  // the optimiser's state in a checkpoint. load_state_dict: ValueError for a
  // missing key or a scale that is not positive and finite.
  std::map<std::string, Tensor> state_dict() const;
  void load_state_dict(const std::map<std::string, Tensor>& state);

 private:
  struct PerOptimizer {
    bool unscaled = false;
    bool stepped = false;
    std::vector<Tensor> found_inf;  // one scalar per device: 0 when every gradient there is finite
    std::optional<bool> inf;        // their verdict, once read
  };
  PerOptimizer& state_of(const optim::Optimizer& opt);
  bool found_inf(PerOptimizer& st);

  GradScalerOptions options_;
  double scale_;
  std::int64_t growth_tracker_ = 0;
  std::map<const optim::Optimizer*, PerOptimizer> per_opt_;
};

}  // namespace anvil::amp
