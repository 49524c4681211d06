// benchmarks/train/train_torch.cpp — trains with LibTorch for bench_train
// (protocol in train_worker.h), in LibTorch's defaults (its fastest
// configuration here: see benchmarks/README.md). Same models, init and
// hyperparameters as train_anvil.cpp; the data are the same tensors, read from
// the raw dumps train_compare writes with anvil's reader.
#include <torch/torch.h>

#include <cstdint>
#include <string>

#include "train_worker.h"

namespace {

namespace tb = anvil_train_bench;
namespace tnn = torch::nn;

tnn::Sequential make_mlp() {
  tnn::Sequential net(tnn::Flatten(), tnn::Linear(784, 256), tnn::ReLU(), tnn::Linear(256, 10));
  torch::NoGradGuard no_grad;
  for (int i : {1, 3}) tnn::init::normal_(net[i]->as<tnn::Linear>()->weight, 0.0, 0.01);  // D2L's init
  return net;
}

tnn::Sequential make_lenet() {
  return tnn::Sequential(tnn::Conv2d(tnn::Conv2dOptions(1, 6, 5).padding(2)), tnn::ReLU(), tnn::MaxPool2d(2),
                         tnn::Conv2d(6, 16, 5), tnn::ReLU(), tnn::MaxPool2d(2), tnn::Flatten(), tnn::Linear(400, 120),
                         tnn::ReLU(), tnn::Linear(120, 84), tnn::ReLU(), tnn::Linear(84, 10));
}

// The book's ResNet-18 (examples/d2l_resnet.h), in LibTorch.
struct ResidualImpl : tnn::Module {
  ResidualImpl(std::int64_t in, std::int64_t out, bool use_1x1conv, std::int64_t strides)
      : conv1(register_module("conv1", tnn::Conv2d(tnn::Conv2dOptions(in, out, 3).stride(strides).padding(1)))),
        conv2(register_module("conv2", tnn::Conv2d(tnn::Conv2dOptions(out, out, 3).padding(1)))),
        bn1(register_module("bn1", tnn::BatchNorm2d(out))),
        bn2(register_module("bn2", tnn::BatchNorm2d(out))) {
    if (use_1x1conv) conv3 = register_module("conv3", tnn::Conv2d(tnn::Conv2dOptions(in, out, 1).stride(strides)));
  }
  torch::Tensor forward(const torch::Tensor& x) {
    torch::Tensor y = torch::relu(bn1->forward(conv1->forward(x)));
    y = bn2->forward(conv2->forward(y));
    return torch::relu(y + (conv3 ? conv3->forward(x) : x));
  }
  tnn::Conv2d conv1, conv2, conv3{nullptr};
  tnn::BatchNorm2d bn1, bn2;
};
TORCH_MODULE(Residual);

// A stage of two residual blocks. A module of its own: LibTorch cannot nest
// a Sequential in a Sequential.
struct StageImpl : tnn::Module {
  StageImpl(std::int64_t in, std::int64_t out, bool first_block)
      : first(register_module("0", first_block ? Residual(out, out, false, 1) : Residual(in, out, true, 2))),
        second(register_module("1", Residual(out, out, false, 1))) {}
  torch::Tensor forward(const torch::Tensor& x) { return second->forward(first->forward(x)); }
  Residual first, second;
};
TORCH_MODULE(Stage);

tnn::Sequential make_resnet18() {
  return tnn::Sequential(tnn::Conv2d(tnn::Conv2dOptions(1, 64, 3).padding(1)), tnn::BatchNorm2d(64), tnn::ReLU(),
                         Stage(64, 64, true), Stage(64, 128, false), Stage(128, 256, false), Stage(256, 512, false),
                         tnn::AdaptiveAvgPool2d(tnn::AdaptiveAvgPool2dOptions({1, 1})), tnn::Flatten(),
                         tnn::Linear(512, 10));
}

torch::Tensor load(const std::string& dir, const std::string& name, torch::ScalarType t) {
  const std::vector<std::int64_t> shape = tb::read_shape(dir, name);
  std::int64_t numel = 1;
  for (auto d : shape) numel *= d;
  const std::vector<char> bytes = tb::read_bytes(dir, name, static_cast<std::size_t>(numel) * torch::elementSize(t));
  return torch::from_blob(const_cast<char*>(bytes.data()), shape, t).clone();
}

class TorchTrainer final : public tb::Trainer {
 public:
  TorchTrainer(const std::string& model, std::uint64_t seed, const std::string& dir) {
    if (model != "mlp" && model != "lenet" && model != "resnet18")
      throw std::runtime_error("train_torch: unknown model '" + model + "'");
    torch::manual_seed(seed);
    resnet_ = model == "resnet18";
    net_ = model == "mlp" ? make_mlp() : resnet_ ? make_resnet18() : make_lenet();
    opt_ = std::make_unique<torch::optim::SGD>(
        net_->parameters(), torch::optim::SGDOptions(resnet_ ? tb::kResnetLearningRate : tb::kLearningRate));
    train_x_ = load(dir, "train-images", torch::kFloat32);
    train_y_ = load(dir, "train-labels", torch::kInt64);
    test_x_ = load(dir, "test-images", torch::kFloat32);
    test_y_ = load(dir, "test-labels", torch::kInt64);
    if (resnet_) {  // one step per "epoch" on a fixed batch (train_worker.h)
      train_x_ = train_x_.slice(0, 0, tb::kResnetBatch).contiguous();
      train_y_ = train_y_.slice(0, 0, tb::kResnetBatch).contiguous();
      test_x_ = test_x_.slice(0, 0, tb::kResnetBatch).contiguous();
      test_y_ = test_y_.slice(0, 0, tb::kResnetBatch).contiguous();
    }
  }

  double train_epoch() override {
    if (resnet_) {
      opt_->zero_grad();
      const torch::Tensor l = torch::nn::functional::cross_entropy(net_->forward(train_x_), train_y_);
      l.backward();
      opt_->step();
      return l.item<double>();
    }
    const std::int64_t n = train_x_.size(0);
    const torch::Tensor order = torch::randperm(n, torch::kInt64);  // reshuffled every epoch
    torch::Tensor loss_sum = torch::zeros({});
    std::int64_t batches = 0;
    for (std::int64_t b = 0; b < n; b += tb::kBatchSize, ++batches) {
      const torch::Tensor idx = order.slice(0, b, std::min(n, b + tb::kBatchSize));
      const torch::Tensor x = train_x_.index_select(0, idx), y = train_y_.index_select(0, idx);
      opt_->zero_grad();
      const torch::Tensor l = torch::nn::functional::cross_entropy(net_->forward(x), y);
      l.backward();
      opt_->step();
      torch::NoGradGuard no_grad;
      loss_sum += l.detach();
    }
    return loss_sum.item<double>() / static_cast<double>(batches);
  }

  double test_accuracy() override {
    torch::NoGradGuard no_grad;
    net_->eval();
    std::int64_t correct = 0;
    const std::int64_t n = test_x_.size(0);
    for (std::int64_t b = 0; b < n; b += tb::kEvalBatchSize) {
      const std::int64_t e = std::min(n, b + tb::kEvalBatchSize);
      correct += (net_->forward(test_x_.slice(0, b, e)).argmax(1) == test_y_.slice(0, b, e)).sum().item<std::int64_t>();
    }
    net_->train();
    return static_cast<double>(correct) / static_cast<double>(n);
  }

 private:
  bool resnet_ = false;
  tnn::Sequential net_{nullptr};
  std::unique_ptr<torch::optim::SGD> opt_;
  torch::Tensor train_x_, train_y_, test_x_, test_y_;
};

}  // namespace

// `--threads N`: N intra-op threads instead of LibTorch's default (the
// driver's equal-threads row).
int main(int argc, char** argv) {
  const bool threads_given = argc == 3 && std::string(argv[1]) == "--threads";
  if (threads_given) at::set_num_threads(std::stoi(argv[2]));
  const std::string info = "LibTorch " + std::to_string(TORCH_VERSION_MAJOR) + "." +
                           std::to_string(TORCH_VERSION_MINOR) +
                           (threads_given ? ", set_num_threads(" : ", defaults (") +
                           std::to_string(at::get_num_threads()) + " intra-op threads, pthread OpenBLAS)";
  return tb::serve(info, [](const std::string& model, std::uint64_t seed, const std::string& dir) {
    return std::make_unique<TorchTrainer>(model, seed, dir);
  });
}
