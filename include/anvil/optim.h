// anvil/optim.h — optimisers (DESIGN §5).
//
//   anvil::optim::SGD opt(net.parameters(), {.lr = 0.1, .momentum = 0.9});
//   anvil::optim::Adam adam(net.parameters(), 1e-3);   // the learning rate alone
//   for (...) { opt.zero_grad(); auto loss = ...; loss.backward(); opt.step(); }
//
// Updates run in place on each parameter's own device, without recording.
// Parameters hold their identity across Module::to, so an optimiser made
// before a move keeps working; its state follows the parameters.
#pragma once

#include <concepts>
#include <cstdint>
#include <map>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "anvil/tensor.h"

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
  std::vector<Tensor> params_;
};

struct SGDOptions {
  double lr = 0.01;
  double momentum = 0.0;
  double dampening = 0.0;
  double weight_decay = 0.0;
  bool nesterov = false;
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

  SGDOptions options_;
  std::vector<Tensor> momentum_;
};

struct AdamOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;
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

 private:
  AdamOptions options_;
  std::vector<Tensor> m_, v_;
  std::int64_t t_ = 0;
};

}  // namespace anvil::optim
