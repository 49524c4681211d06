// anvil/nn.h — modules, layers, initialisers and losses (DESIGN §5).
//
//   anvil::nn::Sequential net{anvil::nn::Linear(784, 256), anvil::nn::ReLU(), anvil::nn::Linear(256, 10)};
//   net.to(anvil::try_gpu());                 // in place: parameters keep their identity
//   auto y = net(x);                          // grad_fn=<AddmmBackward>
//   net[0].weight().device();                 // where the first layer lives
//   net.save("net.safetensors");              // and net.load(path, device)
//
// A Module owns named parameters (tensors that require grad), buffers
// (state without grad, e.g. BatchNorm's running statistics) and named
// children. Everything here is written on the public op API only, so it
// runs on every backend. A module is used from one thread at a time.
#pragma once

#include <array>
#include <concepts>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "anvil/device.h"
#include "anvil/ops.h"
#include "anvil/tensor.h"

namespace anvil::nn {

using StateDict = std::map<std::string, Tensor>;

class Module {
 public:
  Module() = default;
  virtual ~Module() = default;
  Module(Module&&) = default;
  Module& operator=(Module&&) = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  virtual Tensor forward(const Tensor& x) = 0;
  Tensor operator()(const Tensor& x) { return forward(x); }
  // "Linear(in_features=784, out_features=256, bias=true)".
  virtual std::string name() const = 0;

  // Own and (with recurse) the children's, in registration order, named
  // with dotted paths ("0.weight", "features.conv1.bias").
  std::vector<Tensor> parameters(bool recurse = true) const;
  std::vector<std::pair<std::string, Tensor>> named_parameters(bool recurse = true) const;
  std::vector<Tensor> buffers(bool recurse = true) const;
  std::vector<std::pair<std::string, Tensor>> named_buffers(bool recurse = true) const;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> named_children() const { return children_; }

  // The parameter called `name` of this module (not its children):
  // ValueError naming the module when there is none.
  Tensor param(const std::string& name) const;
  Tensor weight() const { return param("weight"); }
  Tensor bias() const { return param("bias"); }

  // Moves every parameter and buffer (and gradient) to `d` in place: the
  // tensors keep their identity, so optimisers built earlier keep working.
  Module& to(Device d);
  // Lays every 4-d parameter and buffer (and gradient) out in `format` in
  // place (torch's module.to(memory_format=...)): with ChannelsLast, a
  // convolution's weight as its channels-last input wants it.
  Module& to(MemoryFormat format);
  // The devices its tensors live on, in first-seen order.
  std::vector<Device> devices() const;

  // Parameters and buffers by dotted name (detached; sharing storage).
  StateDict state_dict() const;
  // Copies `state` into the parameters and buffers, on their devices.
  // ShapeError / DTypeError naming the key on a mismatch; with `strict`,
  // ValueError for a missing or an unexpected key.
  void load_state_dict(const StateDict& state, bool strict = true);
  // safetensors (anvil/io.h). load() puts every tensor on `device`.
  void save(const std::string& path) const;
  void load(const std::string& path, Device device);

  void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const noexcept { return training_; }
  // Clears every parameter's gradient.
  void zero_grad();

  // Calls fn on every child (recursively, each one's children first) and
  // then on this module, as PyTorch's Module.apply; the way to initialise a
  // whole network:
  //   net.apply([](nn::Module& m) {
  //     if (auto* c = dynamic_cast<nn::Conv2d*>(&m)) { Tensor w = c->weight(); nn::init::normal_(w, 0, 0.01); }
  //   });
  Module& apply(const std::function<void(Module&)>& fn);

  // A deep copy (PyTorch's copy.deepcopy, LibTorch's Cloneable::clone): its
  // own parameters and buffers holding this module's values (on `device`
  // when given, else each on its tensor's device), its own children, the
  // same settings and training flags; gradients are not copied.
  //   auto twin = net.clone(opencl(1));   // net is unchanged; twin shares nothing with it
  // Every layer here clones; a module of your own clones once it overrides
  // clone_impl (a module written in Python clones without it):
  //   std::shared_ptr<nn::Module> clone_impl(std::optional<Device> device) const override {
  //     return clone_into(std::make_shared<Residual>(in_, out_, use_1x1_, strides_), device);
  //   }
  // NotSupported naming the module otherwise. The twin is built by its
  // constructor, so its initialisers draw from the random stream before its
  // values are overwritten.
  std::shared_ptr<Module> clone(std::optional<Device> device = std::nullopt) const;

 protected:
  // Builds the twin (see clone()); NotSupported here.
  virtual std::shared_ptr<Module> clone_impl(std::optional<Device> device) const;
  // The end of a clone_impl: `fresh` was built with this module's settings;
  // it receives copies of this module's parameters and buffers by name
  // (ValueError naming the first name or shape that differs) and is returned.
  template <typename M>
  requires std::is_base_of_v<Module, M> std::shared_ptr<M> clone_into(std::shared_ptr<M> fresh,
                                                                      std::optional<Device> device)
  const {
    copy_state_into(*fresh, device);
    return fresh;
  }
  // Registers and returns `t` (marked requires_grad) / a buffer / a child.
  Tensor register_parameter(const std::string& name, Tensor t);
  Tensor register_buffer(const std::string& name, Tensor t);
  // A child is registered once under a name that is unique among the
  // module's children, not empty and without '.' (ValueError otherwise);
  // it is returned with its own type, so a module keeps it as a member:
  //   conv1_ = register_module("conv1", nn::Conv2d(1, 6, 5));   // std::shared_ptr<nn::Conv2d>
  // (docs/modules.md: a residual block written this way).
  template <typename M>
  requires std::is_base_of_v<Module, M> std::shared_ptr<M> register_module(const std::string& name,
                                                                           std::shared_ptr<M> m) {
    add_child(name, m);
    return m;
  }
  template <typename M>
  requires std::is_base_of_v<Module, std::decay_t<M>> std::shared_ptr<std::decay_t<M>> register_module(
      const std::string& name, M&& m) {
    return register_module(name, std::make_shared<std::decay_t<M>>(std::forward<M>(m)));
  }
  Tensor& buffer_ref(const std::string& name);

 private:
  void add_child(const std::string& name, std::shared_ptr<Module> m);
  void copy_state_into(Module& fresh, std::optional<Device> device) const;
  std::vector<std::pair<std::string, Tensor>> params_, buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
  bool training_ = true;
};

// y = x W^T + b; W [out, in], b [out]; initialised as PyTorch does
// (uniform in ±1/sqrt(in)).
class Linear : public Module {
 public:
  Linear(std::int64_t in_features, std::int64_t out_features, bool bias = true);
  Tensor forward(const Tensor& x) override;
  std::string name() const override;
  std::shared_ptr<Module> clone_impl(std::optional<Device> device) const override;

 private:
  std::int64_t in_, out_;
  Tensor w_, b_;
};

class Sequential : public Module {
 public:
  Sequential() = default;
  template <typename... Ms>
  requires(sizeof...(Ms) > 0 &&
           (std::is_base_of_v<Module, std::decay_t<Ms>> && ...)) explicit Sequential(Ms&&... modules) {
    (push_back(std::make_shared<std::decay_t<Ms>>(std::forward<Ms>(modules))), ...);
  }
  void push_back(std::shared_ptr<Module> m);
  template <typename M>
  requires std::is_base_of_v<Module, std::decay_t<M>>
  void push_back(M&& m) { push_back(std::make_shared<std::decay_t<M>>(std::forward<M>(m))); }
  // Appends a layer under its own name (PyTorch's add_module): state_dict
  // keys then read "conv1.weight" instead of "0.weight". push_back names a
  // layer by its index; ValueError when `name` is already taken.
  //   net.add("conv1", nn::Conv2d(1, 64, 3, 1, 1)).add("bn1", nn::BatchNorm2d(64));
  Sequential& add(const std::string& name, std::shared_ptr<Module> m);
  template <typename M>
  requires std::is_base_of_v<Module, std::decay_t<M>> Sequential& add(const std::string& name, M&& m) {
    return add(name, std::make_shared<std::decay_t<M>>(std::forward<M>(m)));
  }
  Tensor forward(const Tensor& x) override;
  std::string name() const override;
  std::shared_ptr<Module> clone_impl(std::optional<Device> device) const override;
  std::size_t size() const noexcept { return layers_.size(); }
  // IndexError when out of range.
  Module& operator[](std::size_t i) const;
  template <typename M>
  M& at(std::size_t i) const {
    auto* p = dynamic_cast<M*>(&(*this)[i]);
    ANVIL_CHECK(p != nullptr, ValueError, "Sequential: layer ", i, " is ", (*this)[i].name(),
                ", not the requested type");
    return *p;
  }

 private:
  std::vector<std::shared_ptr<Module>> layers_;
};

class ReLU : public Module {
 public:
  Tensor forward(const Tensor& x) override { return relu(x); }
  std::string name() const override { return "ReLU()"; }
  std::shared_ptr<Module> clone_impl(std::optional<Device> device) const override {
    return clone_into(std::make_shared<ReLU>(), device);
  }
};
class Sigmoid : public Module {
 public:
  Tensor forward(const Tensor& x) override { return sigmoid(x); }
  std::string name() const override { return "Sigmoid()"; }
  std::shared_ptr<Module> clone_impl(std::optional<Device> device) const override {
    return clone_into(std::make_shared<Sigmoid>(), device);
  }
};
class Tanh : public Module {
 public:
  Tensor forward(const Tensor& x) override { return tanh(x); }
  std::string name() const override { return "Tanh()"; }
  std::shared_ptr<Module> clone_impl(std::optional<Device> device) const override {
    return clone_into(std::make_shared<Tanh>(), device);
  }
};
class Softmax : public Module {
 public:
  explicit Softmax(int dim) : dim_(dim) {}
  Tensor forward(const Tensor& x) override { return softmax(x, dim_); }
  std::string name() const override;
  std::shared_ptr<Module> clone_impl(std::optional<Device> device) const override;

 private:
  int dim_;
};
class Flatten : public Module {
 public:
  explicit Flatten(int start_dim = 1, int end_dim = -1) : start_(start_dim), end_(end_dim) {}
  Tensor forward(const Tensor& x) override { return flatten(x, start_, end_); }
  std::string name() const override;
  std::shared_ptr<Module> clone_impl(std::optional<Device> device) const override;

 private:
  int start_, end_;
};
// Zeroes each element with probability p while training and scales the rest
// by 1/(1-p); the identity in eval().
class Dropout : public Module {
 public:
  explicit Dropout(double p = 0.5);
  Tensor forward(const Tensor& x) override;
  double p() const noexcept { return p_; }
  std::string name() const override;
  std::shared_ptr<Module> clone_impl(std::optional<Device> device) const override;

 private:
  double p_;
};

// torch.nn.Conv2d's arguments in its order: weight [out, in / groups, k, k],
// initialised as PyTorch does (uniform, bound 1 / sqrt(in / groups * k * k)).
//   nn::Conv2d(16, 32, 3, 1, 2, /*dilation=*/2, /*groups=*/4);
// Conv2d(in, out, k, stride, padding, false) (no bias) keeps working: a bool
// sixth argument is `bias`, an integer one `dilation`.
class Conv2d : public Module {
 public:
  Conv2d(std::int64_t in_channels, std::int64_t out_channels, std::int64_t kernel_size, std::int64_t stride = 1,
         std::int64_t padding = 0, std::int64_t dilation = 1, std::int64_t groups = 1, bool bias = true);
  template <std::same_as<bool> B>
  Conv2d(std::int64_t in_channels, std::int64_t out_channels, std::int64_t kernel_size, std::int64_t stride,
         std::int64_t padding, B bias)
      : Conv2d(in_channels, out_channels, kernel_size, stride, padding, 1, 1, bias) {}
  Tensor forward(const Tensor& x) override;
  std::string name() const override;
  std::shared_ptr<Module> clone_impl(std::optional<Device> device) const override;

 private:
  std::int64_t in_, out_, k_, stride_, padding_, dilation_, groups_;
  Tensor w_, b_;
};
// torch.nn.Conv1d over [N, C, L]: weight [out, in / groups, k].
class Conv1d : public Module {
 public:
  Conv1d(std::int64_t in_channels, std::int64_t out_channels, std::int64_t kernel_size, std::int64_t stride = 1,
         std::int64_t padding = 0, std::int64_t dilation = 1, std::int64_t groups = 1, bool bias = true);
  Tensor forward(const Tensor& x) override;
  std::string name() const override;
  std::shared_ptr<Module> clone_impl(std::optional<Device> device) const override;

 private:
  std::int64_t in_, out_, k_, stride_, padding_, dilation_, groups_;
  Tensor w_, b_;
};

// stride 0 means stride = kernel_size (PyTorch's default).
class MaxPool2d : public Module {
 public:
  explicit MaxPool2d(std::int64_t kernel_size, std::int64_t stride = 0, std::int64_t padding = 0);
  Tensor forward(const Tensor& x) override;
  std::string name() const override;
  std::shared_ptr<Module> clone_impl(std::optional<Device> device) const override;

 private:
  std::int64_t k_, stride_, padding_;
};
class AvgPool2d : public Module {
 public:
  explicit AvgPool2d(std::int64_t kernel_size, std::int64_t stride = 0, std::int64_t padding = 0);
  Tensor forward(const Tensor& x) override;
  std::string name() const override;
  std::shared_ptr<Module> clone_impl(std::optional<Device> device) const override;

 private:
  std::int64_t k_, stride_, padding_;
};

// Average pooling to a fixed output size, whatever the input's H and W
// (adaptive_avg_pool2d in anvil/ops.h: PyTorch's bins). {1, 1} is global
// average pooling, ResNet's head:
//   nn::AdaptiveAvgPool2d pool({1, 1});   // [N, C, H, W] -> [N, C, 1, 1]
class AdaptiveAvgPool2d : public Module {
 public:
  explicit AdaptiveAvgPool2d(std::array<std::int64_t, 2> output_size);
  explicit AdaptiveAvgPool2d(std::int64_t output_size) : AdaptiveAvgPool2d({output_size, output_size}) {}
  Tensor forward(const Tensor& x) override;
  std::string name() const override;
  std::shared_ptr<Module> clone_impl(std::optional<Device> device) const override;

 private:
  std::array<std::int64_t, 2> size_;
};

// Max pooling to a fixed output size (adaptive_max_pool2d in anvil/ops.h).
class AdaptiveMaxPool2d : public Module {
 public:
  explicit AdaptiveMaxPool2d(std::array<std::int64_t, 2> output_size);
  explicit AdaptiveMaxPool2d(std::int64_t output_size) : AdaptiveMaxPool2d({output_size, output_size}) {}
  Tensor forward(const Tensor& x) override;
  std::string name() const override;
  std::shared_ptr<Module> clone_impl(std::optional<Device> device) const override;

 private:
  std::array<std::int64_t, 2> size_;
};

// torch.nn.Upsample: interpolate (anvil/ops.h) as a layer without parameters.
//   nn::Upsample up({.scale_factor = {2, 2}});                  // nearest, [N, C, H, W] -> [N, C, 2H, 2W]
//   nn::Upsample resize({.size = {96, 96}, .mode = "bilinear"});
class Upsample : public Module {
 public:
  explicit Upsample(InterpolateOptions options);
  Tensor forward(const Tensor& x) override;
  std::string name() const override;
  std::shared_ptr<Module> clone_impl(std::optional<Device> device) const override;

 private:
  InterpolateOptions options_;
};

// Batch normalisation over the channel dim 1 (BatchNorm1d: [N, C] or
// [N, C, L]; BatchNorm2d: [N, C, H, W]). Training uses the batch statistics
// and updates running_mean / running_var (momentum 0.1, unbiased variance);
// eval() uses the running statistics. BatchNorm2d's `activation` (anvil's,
// not torch's) fuses a ReLU after it, and forward(x, residual) adds a
// residual before that activation: a ResNet block's relu(bn(x) + shortcut)
// in one kernel each way (anvil::batch_norm's fused epilogue).
//   nn::BatchNorm2d bn(64, 1e-5, 0.1, Activation::ReLU);
//   Tensor y = bn.forward(x, shortcut);   // relu(bn(x) + shortcut)
class BatchNorm : public Module {
 public:
  Activation activation() const noexcept { return activation_; }  // the constructor's
  // Batch norm of x, plus residual (x's shape, dtype and device; undefined
  // for none), then the module's activation, in one fused kernel.
  Tensor forward(const Tensor& x) override;
  Tensor forward(const Tensor& x, const Tensor& residual);

 protected:
  BatchNorm(std::int64_t num_features, double eps, double momentum, std::vector<int> allowed_dims,
            Activation activation = Activation::None);
  std::int64_t features_;
  double eps_, momentum_;
  std::vector<int> allowed_dims_;
  Activation activation_;
  Tensor w_, b_;
};
class BatchNorm1d : public BatchNorm {
 public:
  explicit BatchNorm1d(std::int64_t num_features, double eps = 1e-5, double momentum = 0.1)
      : BatchNorm(num_features, eps, momentum, {2, 3}) {}
  std::string name() const override;
  std::shared_ptr<Module> clone_impl(std::optional<Device> device) const override;
};
class BatchNorm2d : public BatchNorm {
 public:
  explicit BatchNorm2d(std::int64_t num_features, double eps = 1e-5, double momentum = 0.1,
                       Activation activation = Activation::None)
      : BatchNorm(num_features, eps, momentum, {4}, activation) {}
  std::string name() const override;
  std::shared_ptr<Module> clone_impl(std::optional<Device> device) const override;
};

// Module trees print as PyTorch's repr.
std::ostream& operator<<(std::ostream& os, const Module& m);

// --- initialisers: in place, without recording, on the tensor's device ------------------
namespace init {
Tensor& normal_(Tensor& t, double mean = 0.0, double std = 1.0);
Tensor& uniform_(Tensor& t, double a = 0.0, double b = 1.0);
Tensor& constant_(Tensor& t, double value);
Tensor& zeros_(Tensor& t);
Tensor& ones_(Tensor& t);
// fan_in / fan_out of a [out, in] or [out, in, k...] weight.
std::pair<std::int64_t, std::int64_t> fans(const Tensor& t);
Tensor& xavier_uniform_(Tensor& t, double gain = 1.0);
Tensor& xavier_normal_(Tensor& t, double gain = 1.0);
// gain sqrt(2 / (1 + a^2)) over fan_in (PyTorch's leaky_relu default).
Tensor& kaiming_uniform_(Tensor& t, double a = 0.0);
Tensor& kaiming_normal_(Tensor& t, double a = 0.0);
}  // namespace init

// --- losses ------------------------------------------------------------------------------
inline Tensor mse_loss(const Tensor& input, const Tensor& target) { return anvil::mse_loss(input, target); }
inline Tensor cross_entropy(const Tensor& logits, const Tensor& target) { return anvil::cross_entropy(logits, target); }

}  // namespace anvil::nn
