// The book's two Fashion-MNIST classifiers in anvil, defined once for the
// programs that train them (examples/train_fashion_mnist.cpp and
// train_distributed.cpp, benchmarks/train/train_anvil.cpp and ddp_anvil.cpp,
// benchmarks/data_parallel_scaling.cpp), as d2l_resnet.h is for ResNet-18.
//
//   manual_seed(0);
//   anvil::nn::Sequential net = d2l::mlp();     // [N, 1, 28, 28] -> [N, 10]
//   anvil::nn::Sequential net = d2l::lenet();
//
// The layers are made first to last (a braced list is evaluated in order),
// so their weights are drawn from the generator in that order.
#pragma once

#include "anvil/nn.h"

namespace d2l {

// "Concise Implementation of Multilayer Perceptrons": 784-256-10 with ReLU,
// the weights drawn from N(0, 0.01) as the book's init_weights does.
inline anvil::nn::Sequential mlp() {
  namespace nn = anvil::nn;
  nn::Sequential net{nn::Flatten(), nn::Linear(784, 256), nn::ReLU(), nn::Linear(256, 10)};
  for (anvil::Tensor w : {net[1].weight(), net[3].weight()}) nn::init::normal_(w, 0.0, 0.01);
  return net;
}

// LeNet, the modern variant (ReLU and max-pooling), with PyTorch's default
// init: with the book's sigmoid/avg-pool original, lr 0.1 barely moves in a
// few epochs (the book itself uses lr 0.9 for it).
inline anvil::nn::Sequential lenet() {
  namespace nn = anvil::nn;
  return nn::Sequential{nn::Conv2d(1, 6, 5, 1, 2),
                        nn::ReLU(),
                        nn::MaxPool2d(2),
                        nn::Conv2d(6, 16, 5),
                        nn::ReLU(),
                        nn::MaxPool2d(2),
                        nn::Flatten(),
                        nn::Linear(400, 120),
                        nn::ReLU(),
                        nn::Linear(120, 84),
                        nn::ReLU(),
                        nn::Linear(84, 10)};
}

}  // namespace d2l
