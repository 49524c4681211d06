// anvil/grad_scaler.h — loss scaling for f16 training (PyTorch's
// torch.cuda.amp.GradScaler; docs/mixed-precision.md), beside the optimisers
// it steps. Autocast is in anvil/autocast.h; anvil/amp.h has both.
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

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "anvil/optim.h"
#include "anvil/tensor.h"

namespace anvil::amp {

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
