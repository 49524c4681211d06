// benchmarks/train/train_anvil.cpp — trains with anvil for bench_train
// (protocol in train_worker.h), in anvil's defaults: no set_num_threads, no
// environment variables; `--threads N` calls anvil::set_num_threads(N) first
// (the equal-thread rows). The models are the examples': the MLP and LeNet
// (d2l_models.h), ResNet-18 (d2l_resnet.h), the ViT (d2l_vit.h) and the GRU
// language model (d2l_rnn.h).
#include <cstdint>
#include <memory>
#include <string>

#include "../../examples/d2l_models.h"
#include "../../examples/d2l_resnet.h"
#include "../../examples/d2l_rnn.h"
#include "../../examples/d2l_vit.h"
#include "anvil/anvil.h"
#include "anvil/data.h"
#include "anvil/nn.h"
#include "anvil/optim.h"
#include "train_worker.h"

namespace {

using namespace anvil;
namespace tb = anvil_train_bench;

Tensor load(const std::string& dir, const std::string& name, DType t) {
  const std::vector<std::int64_t> dims = tb::read_shape(dir, name);
  const Shape shape(dims);
  const std::vector<char> bytes = tb::read_bytes(dir, name, static_cast<std::size_t>(shape.numel()) * element_size(t));
  return from_host(bytes.data(), shape, t, cpu());
}

class AnvilTrainer final : public tb::Trainer {
 public:
  AnvilTrainer(const std::string& model, std::uint64_t seed, const std::string& dir)
      : net_((manual_seed(seed), model == "mlp" ? d2l::mlp() : d2l::lenet())),
        opt_(net_.parameters(), {.lr = tb::kLearningRate}),
        train_(load(dir, "train-images", f32), load(dir, "train-labels", i64),
               {.batch_size = tb::kBatchSize, .shuffle = true, .seed = seed}),
        test_(load(dir, "test-images", f32), load(dir, "test-labels", i64), {.batch_size = tb::kEvalBatchSize}) {
    if (model != "mlp" && model != "lenet")
      throw ValueError("train_anvil: unknown model; expected mlp, lenet, resnet18, gru, lstm or vit, got '" + model +
                       "'");
  }

  double train_epoch() override {
    Tensor loss_sum = zeros({});
    for (const Batch& b : train_) {
      opt_.zero_grad();
      const Tensor l = nn::cross_entropy(net_(b.inputs), b.targets);
      l.backward();
      opt_.step();
      NoGradGuard no_grad;
      loss_sum += l.detach();
    }
    return loss_sum.item<double>() / static_cast<double>(train_.size());
  }

  double test_accuracy() override {
    NoGradGuard no_grad;
    net_.eval();
    Tensor correct = zeros({}, cpu(), i64);
    for (const Batch& b : test_) correct += sum(argmax(net_(b.inputs), 1) == b.targets);
    net_.train();
    return static_cast<double>(correct.item<std::int64_t>()) / static_cast<double>(test_.num_samples());
  }

 private:
  nn::Sequential net_;
  optim::SGD opt_;
  DataLoader train_, test_;
};

// The example's ViT sizes are the ones LibTorch's worker builds from train_worker.h.
constexpr d2l::ViTConfig kVitConfig{};
static_assert(kVitConfig.img_size == tb::kVitImageSize && kVitConfig.patch_size == tb::kVitPatchSize &&
                  kVitConfig.num_hiddens == tb::kVitHiddens && kVitConfig.mlp_hiddens == tb::kVitMlpHiddens &&
                  kVitConfig.num_heads == tb::kVitHeads && kVitConfig.num_blks == tb::kVitBlocks &&
                  kVitConfig.dropout == tb::kVitDropout,
              "train_worker.h's ViT sizes must be examples/d2l_vit.h's");

// resnet18 and vit: one step per "epoch" on a fixed batch of the first
// `batch` images (train_worker.h).
class AnvilImageStepTrainer final : public tb::Trainer {
 public:
  AnvilImageStepTrainer(std::shared_ptr<nn::Module> net, std::int64_t batch, double lr, const std::string& dir)
      : net_(std::move(net)),
        batch_(batch),
        opt_(net_->parameters(), {.lr = lr}),
        x_(load(dir, "train-images", f32).narrow(0, 0, batch).contiguous()),
        y_(load(dir, "train-labels", i64).narrow(0, 0, batch).contiguous()),
        test_x_(load(dir, "test-images", f32).narrow(0, 0, batch).contiguous()),
        test_y_(load(dir, "test-labels", i64).narrow(0, 0, batch).contiguous()) {}

  double train_epoch() override {
    double loss = 0;
    for (int step = 0; step < tb::kStepsPerRound; ++step) {
      opt_.zero_grad();
      const Tensor l = nn::cross_entropy((*net_)(x_), y_);
      l.backward();
      opt_.step();
      loss = l.item<double>();
    }
    return loss;
  }
  int steps_per_epoch() const override { return tb::kStepsPerRound; }

  double test_accuracy() override {
    NoGradGuard no_grad;
    net_->eval();
    const double correct = static_cast<double>(sum(argmax((*net_)(test_x_), 1) == test_y_).item<std::int64_t>());
    net_->train();
    return correct / static_cast<double>(batch_);
  }

 private:
  std::shared_ptr<nn::Module> net_;
  std::int64_t batch_;
  optim::SGD opt_;
  Tensor x_, y_, test_x_, test_y_;
};

// gru, lstm: one step per "epoch" on the fixed batch of sequences (train_worker.h).
class AnvilRnnTrainer final : public tb::Trainer {
 public:
  AnvilRnnTrainer(const std::string& cell, std::uint64_t seed, const std::string& dir)
      : x_(load(dir, "text-x", i64)),
        y_(load(dir, "text-y", i64).t().reshape({-1})),  // step-major, as the logits
        net_((manual_seed(seed), load(dir, "text-vocab-size", i64).item<std::int64_t>()), tb::kRnnHiddens, cell),
        opt_(net_.parameters(), {.lr = tb::kRnnLearningRate}) {}

  double train_epoch() override {
    double loss = 0;
    for (int step = 0; step < tb::kStepsPerRound; ++step) {
      opt_.zero_grad();
      const Tensor l = nn::cross_entropy(net_.forward(x_, {}).logits, y_);
      l.backward();
      d2l::grad_clipping(net_.parameters(), tb::kRnnClipNorm);
      opt_.step();
      loss = l.item<double>();
    }
    return loss;
  }
  int steps_per_epoch() const override { return tb::kStepsPerRound; }

  double test_accuracy() override {
    NoGradGuard no_grad;
    net_.eval();
    const double correct = static_cast<double>(sum(argmax(net_.forward(x_, {}).logits, 1) == y_).item<std::int64_t>());
    net_.train();
    return correct / static_cast<double>(y_.numel());
  }

 private:
  Tensor x_, y_;
  d2l::RNNModel net_;
  optim::SGD opt_;
};

}  // namespace

int main(int argc, char** argv) {
  const bool threads_given = argc == 3 && std::string(argv[1]) == "--threads";
  if (threads_given) anvil::set_num_threads(std::stoi(argv[2]));
  const std::string info = std::string("anvil, ") +
                           (threads_given ? "set_num_threads(" + std::string(argv[2]) + "): " : "defaults: ") +
                           std::to_string(anvil::num_threads()) + " threads, OpenMP OpenBLAS";
  return tb::serve(info, [](const std::string& model, std::uint64_t seed, const std::string& dir) {
    std::unique_ptr<tb::Trainer> trainer;
    if (model == "resnet18") {
      manual_seed(seed);
      trainer =
          std::make_unique<AnvilImageStepTrainer>(d2l::resnet18(10), tb::kResnetBatch, tb::kResnetLearningRate, dir);
    } else if (model == "vit") {
      manual_seed(seed);
      trainer = std::make_unique<AnvilImageStepTrainer>(std::make_shared<d2l::ViT>(kVitConfig), tb::kVitBatch,
                                                        tb::kVitLearningRate, dir);
    } else if (model == "gru" || model == "lstm") {
      trainer = std::make_unique<AnvilRnnTrainer>(model, seed, dir);
    } else {
      trainer = std::make_unique<AnvilTrainer>(model, seed, dir);
    }
    return trainer;
  });
}
