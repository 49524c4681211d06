// anvil/optim.h — optimisers (DESIGN §5).
//
//   anvil::optim::SGD opt(net.parameters(), {.lr = 0.1, .momentum = 0.9});
//   anvil::optim::Adam adam(net.parameters(), 1e-3);   // the learning rate alone
//   anvil::optim::AdamW adamw(net.parameters(), {.lr = 1e-3, .weight_decay = 1e-2});
//   for (...) { opt.zero_grad(); auto loss = ...; loss.backward(); opt.step(); }
//
// Updates run in place on each parameter's own device, without recording.
// Parameters hold their identity across Module::to, so an optimiser made
// before a move keeps working; its state follows the parameters.
//
// `foreach` (PyTorch's option, on by default as there): all parameters of
// one device and dtype are updated together, in a few launches on a device
// and one parallel region on the CPU, where the device has the multi-tensor
// step (f32 and f64); the state (momentum, exp_avg, exp_avg_sq) then lives
// in one flat storage per device and dtype, and state_dict() gives views of
// it. foreach = false updates parameter by parameter; both give the same
// bits.
#pragma once

#include <concepts>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "anvil/tensor.h"

namespace anvil::detail {
struct ForeachTable;
struct OptimizerStepArgs;
}  // namespace anvil::detail

namespace anvil::optim {

class Optimizer {
 public:
  explicit Optimizer(std::vector<Tensor> params);
  virtual ~Optimizer() = default;
  virtual void step() = 0;
  // Clears every gradient (set_to_none, PyTorch's default).
  void zero_grad();
  // The per-parameter state by key ("momentum.3", "exp_avg.0", "step"),
  // detached and sharing storage; what a checkpoint saves. load_state_dict
  // copies it onto the parameters' devices: ValueError for an unknown key or
  // parameter index, ShapeError for a state whose shape is not its parameter's.
  virtual std::map<std::string, Tensor> state_dict() const { return {}; }
  virtual void load_state_dict(const std::map<std::string, Tensor>& state);
  const std::vector<Tensor>& params() const noexcept { return params_; }

 protected:
  // The parameters with a gradient, one list of indices per device and
  // dtype, in order of first appearance (the foreach path's groups).
  std::vector<std::vector<std::size_t>> foreach_groups() const;

  std::vector<Tensor> params_;
  // Per group, the table of the multi-tensor step (ops/optimizer_step.h).
  std::map<std::string, std::shared_ptr<detail::ForeachTable>> tables_;  // by "device/dtype"
};

struct SGDOptions {
  double lr = 0.01;
  double momentum = 0.0;
  double dampening = 0.0;
  double weight_decay = 0.0;
  bool nesterov = false;
  bool foreach = true;
};

// A learning rate given alone, as torch.optim.SGD(params, 0.1). A template
// so that `{}` still means the options (an empty list would convert to a
// double 0 ahead of an aggregate).
template <typename T>
concept LearningRate = std::is_arithmetic_v<T> && !std::same_as<T, bool>;

class SGD : public Optimizer {
 public:
  SGD(std::vector<Tensor> params, SGDOptions options);
  template <LearningRate T>
  SGD(std::vector<Tensor> params, T lr) : SGD(std::move(params), SGDOptions{.lr = static_cast<double>(lr)}) {}
  void step() override;
  SGDOptions& options() noexcept { return options_; }
  std::map<std::string, Tensor> state_dict() const override;
  void load_state_dict(const std::map<std::string, Tensor>& state) override;

 private:
  bool fused_step(Tensor& p, const Tensor& grad, std::size_t i);  // one pass where the device can
  void step_one(std::size_t i);

  SGDOptions options_;
  std::vector<Tensor> momentum_;
};

struct AdamOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;  // AdamW: decoupled (PyTorch's AdamW default is 1e-2)
  bool foreach = true;
};

class Adam : public Optimizer {
 public:
  Adam(std::vector<Tensor> params, AdamOptions options = {});
  template <LearningRate T>
  Adam(std::vector<Tensor> params, T lr) : Adam(std::move(params), AdamOptions{.lr = static_cast<double>(lr)}) {}
  void step() override;
  AdamOptions& options() noexcept { return options_; }
  std::map<std::string, Tensor> state_dict() const override;
  void load_state_dict(const std::map<std::string, Tensor>& state) override;

 protected:
  // AdamW: weight decay scales the parameter (param *= 1 - lr * weight_decay)
  // instead of joining the gradient.
  Adam(std::vector<Tensor> params, AdamOptions options, bool decoupled);

 private:
  detail::OptimizerStepArgs step_args(double c1, double c2) const;
  void step_one(std::size_t i, const detail::OptimizerStepArgs& args);

  AdamOptions options_;
  bool decoupled_ = false;
  std::vector<Tensor> m_, v_;
  std::int64_t t_ = 0;
};

// Adam with decoupled weight decay (torch.optim.AdamW); the options are
// Adam's, weight_decay defaulting to PyTorch's 1e-2 here.
class AdamW : public Adam {
 public:
  AdamW(std::vector<Tensor> params, AdamOptions options = {.weight_decay = 1e-2});
  template <LearningRate T>
  AdamW(std::vector<Tensor> params, T lr)
      : AdamW(std::move(params), AdamOptions{.lr = static_cast<double>(lr), .weight_decay = 1e-2}) {}
};

}  // namespace anvil::optim
