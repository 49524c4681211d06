// The book's ResNet-18 in anvil (Dive into Deep Learning, "Residual Networks"
// and "Concise Implementation for Multiple GPUs"): its Residual block as a
// Module with children, and resnet18(num_classes, in_channels).
//
//   auto net = d2l::resnet18(10, 1);        // Fashion-MNIST: [N, 1, 28, 28] -> [N, 10]
//   std::cout << *net << "\n";              // PyTorch-style tree; state_dict keys "resnet_block1.0.conv1.weight", ...
//
// examples/multi_gpu_concise.cpp trains it; tests/test_nn_resnet.cpp checks
// it; docs/modules.md shows the Residual class below (a test keeps the two
// identical).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "anvil/nn.h"

namespace d2l {

// begin Residual (docs/modules.md)
class Residual : public anvil::nn::Module {
 public:
  Residual(std::int64_t in_channels, std::int64_t num_channels, bool use_1x1conv = false, std::int64_t strides = 1)
      : in_(in_channels),
        out_(num_channels),
        use_1x1conv_(use_1x1conv),
        strides_(strides),
        conv1_(register_module("conv1", anvil::nn::Conv2d(in_channels, num_channels, 3, strides, 1))),
        conv2_(register_module("conv2", anvil::nn::Conv2d(num_channels, num_channels, 3, 1, 1))),
        conv3_(use_1x1conv ? register_module("conv3", anvil::nn::Conv2d(in_channels, num_channels, 1, strides))
                           : nullptr),
        bn1_(register_module("bn1", anvil::nn::BatchNorm2d(num_channels, 1e-5, 0.1, anvil::Activation::ReLU))),
        bn2_(register_module("bn2", anvil::nn::BatchNorm2d(num_channels, 1e-5, 0.1, anvil::Activation::ReLU))) {}

  // The book's relu(bn1(conv1(x))) and relu(bn2(conv2(y)) + shortcut), each
  // batch norm with its ReLU (and the shortcut's add) fused into one kernel.
  anvil::Tensor forward(const anvil::Tensor& x) override {
    const anvil::Tensor y = (*bn1_)((*conv1_)(x));
    return bn2_->forward((*conv2_)(y), conv3_ ? (*conv3_)(x) : x);
  }
  std::string name() const override { return "Residual"; }
  // What nn::DataParallel(net, devices) clones each replica with.
  std::shared_ptr<anvil::nn::Module> clone_impl(std::optional<anvil::Device> device) const override {
    return clone_into(std::make_shared<Residual>(in_, out_, use_1x1conv_, strides_), device);
  }

 private:
  // Declared in registration order: members are initialised in this order.
  std::int64_t in_, out_;
  bool use_1x1conv_;
  std::int64_t strides_;
  std::shared_ptr<anvil::nn::Conv2d> conv1_, conv2_, conv3_;
  std::shared_ptr<anvil::nn::BatchNorm2d> bn1_, bn2_;
};
// end Residual

// A stage of `num_residuals` blocks; every stage but the first halves H and
// W and changes the channel count in its first block (1x1 convolution on
// the shortcut).
inline std::shared_ptr<anvil::nn::Sequential> resnet_block(std::int64_t in_channels, std::int64_t out_channels,
                                                           int num_residuals, bool first_block = false) {
  auto blk = std::make_shared<anvil::nn::Sequential>();
  for (int i = 0; i < num_residuals; ++i) {
    if (i == 0 && !first_block)
      blk->push_back(Residual(in_channels, out_channels, true, 2));
    else
      blk->push_back(Residual(out_channels, out_channels));
  }
  return blk;
}

// The chapter's resnet18: a 64-channel 3x3 stem (stride 1, no max-pooling,
// for 28x28 inputs), four stages of two residual blocks (64, 128, 256, 512
// channels), global average pooling and a linear classifier.
inline std::shared_ptr<anvil::nn::Sequential> resnet18(std::int64_t num_classes, std::int64_t in_channels = 1) {
  namespace nn = anvil::nn;
  auto net = std::make_shared<nn::Sequential>(nn::Conv2d(in_channels, 64, 3, 1, 1), nn::BatchNorm2d(64), nn::ReLU());
  net->add("resnet_block1", resnet_block(64, 64, 2, true));
  net->add("resnet_block2", resnet_block(64, 128, 2));
  net->add("resnet_block3", resnet_block(128, 256, 2));
  net->add("resnet_block4", resnet_block(256, 512, 2));
  net->add("global_avg_pool", nn::AdaptiveAvgPool2d({1, 1}));
  net->add("fc", nn::Sequential(nn::Flatten(), nn::Linear(512, num_classes)));
  return net;
}

}  // namespace d2l
