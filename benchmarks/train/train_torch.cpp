// benchmarks/train/train_torch.cpp — trains with LibTorch for bench_train
// (protocol in train_worker.h), in LibTorch's defaults (its fastest
// configuration here: see benchmarks/README.md), or at `--threads N` and
// `--blas-threads N` for the equal-thread rows. Same models, sizes and
// hyperparameters as train_anvil.cpp; the data are the same tensors, read from
// the raw dumps train_compare writes with anvil's reader.
#include <dlfcn.h>
#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <tuple>

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

// The book's ViT block as examples/d2l_vit.h builds it (anvil's
// TransformerEncoderLayer with norm_first and GELU, PyTorch's layout of
// that layer): LibTorch 1.13's C++ TransformerEncoderLayer has no norm_first,
// so the pre-norm block is spelled out. Inputs are [N, L, E]; its
// MultiheadAttention takes [L, N, E].
struct ViTBlockImpl : tnn::Module {
  ViTBlockImpl(std::int64_t hiddens, std::int64_t heads, std::int64_t mlp_hiddens, double dropout)
      : self_attn(register_module(
            "self_attn", tnn::MultiheadAttention(tnn::MultiheadAttentionOptions(hiddens, heads).dropout(dropout)))),
        linear1(register_module("linear1", tnn::Linear(hiddens, mlp_hiddens))),
        dropout(register_module("dropout", tnn::Dropout(dropout))),
        linear2(register_module("linear2", tnn::Linear(mlp_hiddens, hiddens))),
        norm1(register_module("norm1", tnn::LayerNorm(tnn::LayerNormOptions({hiddens}).eps(1e-5)))),
        norm2(register_module("norm2", tnn::LayerNorm(tnn::LayerNormOptions({hiddens}).eps(1e-5)))),
        dropout1(register_module("dropout1", tnn::Dropout(dropout))),
        dropout2(register_module("dropout2", tnn::Dropout(dropout))) {}
  torch::Tensor forward(const torch::Tensor& x) {
    const torch::Tensor q = norm1->forward(x).transpose(0, 1);
    const torch::Tensor attended =
        std::get<0>(self_attn->forward(q, q, q, /*key_padding_mask=*/{}, /*need_weights=*/false)).transpose(0, 1);
    const torch::Tensor y = x + dropout1->forward(attended);
    const torch::Tensor ff = linear2->forward(dropout->forward(torch::gelu(linear1->forward(norm2->forward(y)))));
    return y + dropout2->forward(ff);
  }
  tnn::MultiheadAttention self_attn;
  tnn::Linear linear1;
  tnn::Dropout dropout;
  tnn::Linear linear2;
  tnn::LayerNorm norm1, norm2;
  tnn::Dropout dropout1, dropout2;
};
TORCH_MODULE(ViTBlock);

// examples/d2l_vit.h's ViT at the sizes of train_worker.h.
struct ViTImpl : tnn::Module {
  ViTImpl()
      : patch_embedding(register_module(
            "patch_embedding",
            tnn::Conv2d(tnn::Conv2dOptions(1, tb::kVitHiddens, tb::kVitPatchSize).stride(tb::kVitPatchSize)))),
        dropout(register_module("dropout", tnn::Dropout(tb::kVitDropout))),
        blks(register_module("blks", tnn::Sequential())),
        head(register_module("head", tnn::Sequential(tnn::LayerNorm(tnn::LayerNormOptions({tb::kVitHiddens})),
                                                     tnn::Linear(tb::kVitHiddens, 10)))) {
    const std::int64_t patches = (tb::kVitImageSize / tb::kVitPatchSize) * (tb::kVitImageSize / tb::kVitPatchSize);
    cls_token = register_parameter("cls_token", torch::zeros({1, 1, tb::kVitHiddens}));
    pos_embedding = register_parameter("pos_embedding", torch::randn({1, patches + 1, tb::kVitHiddens}) * 0.02);
    for (std::int64_t i = 0; i < tb::kVitBlocks; ++i)
      blks->push_back(ViTBlock(tb::kVitHiddens, tb::kVitHeads, tb::kVitMlpHiddens, tb::kVitDropout));
  }
  torch::Tensor forward(const torch::Tensor& x) {
    torch::Tensor p = patch_embedding->forward(x).flatten(2).transpose(1, 2);  // [N, patches, hiddens]
    p = torch::cat({cls_token.expand({p.size(0), 1, p.size(2)}), p}, 1);
    p = dropout->forward(p + pos_embedding);
    p = blks->forward(p);
    return head->forward(p.select(1, 0));
  }
  tnn::Conv2d patch_embedding;
  tnn::Dropout dropout;
  tnn::Sequential blks, head;
  torch::Tensor cls_token, pos_embedding;
};
TORCH_MODULE(ViT);

// examples/d2l_rnn.h's RNNModel: one-hot characters through a GRU or an
// LSTM, then a Linear from every step's hidden state to the vocabulary.
struct RNNModelImpl : tnn::Module {
  RNNModelImpl(std::int64_t vocab, std::int64_t hiddens, const std::string& cell)
      : vocab(vocab), linear(register_module("linear", tnn::Linear(hiddens, vocab))) {
    if (cell == "lstm")
      lstm = register_module("rnn", tnn::LSTM(tnn::LSTMOptions(vocab, hiddens)));
    else
      gru = register_module("rnn", tnn::GRU(tnn::GRUOptions(vocab, hiddens)));
  }
  // tokens [batch, steps] -> logits [steps * batch, vocab], from a zero state.
  torch::Tensor forward(const torch::Tensor& tokens) {
    const torch::Tensor x = torch::one_hot(tokens.t(), vocab).to(torch::kFloat32);
    const torch::Tensor out = lstm ? std::get<0>(lstm->forward(x)) : std::get<0>(gru->forward(x));
    return linear->forward(out.reshape({-1, out.size(-1)}));
  }
  std::int64_t vocab;
  tnn::GRU gru{nullptr};
  tnn::LSTM lstm{nullptr};
  tnn::Linear linear;
};
TORCH_MODULE(RNNModel);

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
    if (model != "mlp" && model != "lenet")
      throw std::runtime_error("train_torch: unknown model; expected mlp, lenet, resnet18, gru, lstm or vit, got '" +
                               model + "'");
    torch::manual_seed(seed);
    net_ = model == "mlp" ? make_mlp() : make_lenet();
    opt_ = std::make_unique<torch::optim::SGD>(net_->parameters(), torch::optim::SGDOptions(tb::kLearningRate));
    train_x_ = load(dir, "train-images", torch::kFloat32);
    train_y_ = load(dir, "train-labels", torch::kInt64);
    test_x_ = load(dir, "test-images", torch::kFloat32);
    test_y_ = load(dir, "test-labels", torch::kInt64);
  }

  double train_epoch() override {
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
  tnn::Sequential net_{nullptr};
  std::unique_ptr<torch::optim::SGD> opt_;
  torch::Tensor train_x_, train_y_, test_x_, test_y_;
};

// resnet18 and vit: one step per "epoch" on a fixed batch of the first
// `batch` images (train_worker.h). `net` is the model, wrapped in a Sequential.
class TorchImageStepTrainer final : public tb::Trainer {
 public:
  TorchImageStepTrainer(tnn::Sequential net, std::int64_t batch, double lr, const std::string& dir)
      : net_(std::move(net)),
        batch_(batch),
        opt_(net_->parameters(), torch::optim::SGDOptions(lr)),
        x_(load(dir, "train-images", torch::kFloat32).slice(0, 0, batch).contiguous()),
        y_(load(dir, "train-labels", torch::kInt64).slice(0, 0, batch).contiguous()),
        test_x_(load(dir, "test-images", torch::kFloat32).slice(0, 0, batch).contiguous()),
        test_y_(load(dir, "test-labels", torch::kInt64).slice(0, 0, batch).contiguous()) {}

  double train_epoch() override {
    double loss = 0;
    for (int step = 0; step < tb::kStepsPerRound; ++step) {
      opt_.zero_grad();
      const torch::Tensor l = torch::nn::functional::cross_entropy(net_->forward(x_), y_);
      l.backward();
      opt_.step();
      loss = l.item<double>();
    }
    return loss;
  }
  int steps_per_epoch() const override { return tb::kStepsPerRound; }

  double test_accuracy() override {
    torch::NoGradGuard no_grad;
    net_->eval();
    const auto correct = (net_->forward(test_x_).argmax(1) == test_y_).sum().item<std::int64_t>();
    net_->train();
    return static_cast<double>(correct) / static_cast<double>(batch_);
  }

 private:
  tnn::Sequential net_;
  std::int64_t batch_;
  torch::optim::SGD opt_;
  torch::Tensor x_, y_, test_x_, test_y_;
};

// gru, lstm: one step per "epoch" on the fixed batch of sequences (train_worker.h).
class TorchRnnTrainer final : public tb::Trainer {
 public:
  TorchRnnTrainer(const std::string& cell, std::uint64_t seed, const std::string& dir)
      : x_(load(dir, "text-x", torch::kInt64)),
        y_(load(dir, "text-y", torch::kInt64).t().reshape({-1})),  // step-major, as the logits
        net_((torch::manual_seed(seed), load(dir, "text-vocab-size", torch::kInt64).item<std::int64_t>()),
             tb::kRnnHiddens, cell),
        opt_(net_->parameters(), torch::optim::SGDOptions(tb::kRnnLearningRate)) {}

  double train_epoch() override {
    double loss = 0;
    for (int step = 0; step < tb::kStepsPerRound; ++step) {
      opt_.zero_grad();
      const torch::Tensor l = torch::nn::functional::cross_entropy(net_->forward(x_), y_);
      l.backward();
      tnn::utils::clip_grad_norm_(net_->parameters(), tb::kRnnClipNorm);
      opt_.step();
      loss = l.item<double>();
    }
    return loss;
  }
  int steps_per_epoch() const override { return tb::kStepsPerRound; }

  double test_accuracy() override {
    torch::NoGradGuard no_grad;
    net_->eval();
    const auto correct = (net_->forward(x_).argmax(1) == y_).sum().item<std::int64_t>();
    net_->train();
    return static_cast<double>(correct) / static_cast<double>(y_.numel());
  }

 private:
  torch::Tensor x_, y_;
  RNNModel net_;
  torch::optim::SGD opt_;
};

// LibTorch's OpenBLAS (the pthread build) is not linked here directly, and
// at::set_num_threads leaves it alone: its thread count is set through the
// symbol the loaded library exports (as benchmarks/worker_torch.cpp does).
std::string set_blas_threads(int n) {
  using SetThreads = void (*)(int);
  auto* set = reinterpret_cast<SetThreads>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"));
  if (set == nullptr) return ", BLAS threads unchanged (no openblas_set_num_threads)";
  set(n);
  return ", openblas_set_num_threads(" + std::to_string(n) + ")";
}

}  // namespace

// `--threads N`: N intra-op threads instead of LibTorch's default;
// `--blas-threads N`: its OpenBLAS held to N threads (the driver's
// equal-thread rows set both).
int main(int argc, char** argv) {
  std::string threads = "defaults: ";
  std::string blas = ", pthread OpenBLAS at its default";
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--threads") {
      at::set_num_threads(std::stoi(argv[i + 1]));
      threads = "set_num_threads(" + std::string(argv[i + 1]) + "): ";
    } else if (flag == "--blas-threads") {
      blas = set_blas_threads(std::stoi(argv[i + 1]));
    }
  }
  const std::string info = "LibTorch " + std::to_string(TORCH_VERSION_MAJOR) + "." +
                           std::to_string(TORCH_VERSION_MINOR) + ", " + threads +
                           std::to_string(at::get_num_threads()) + " intra-op threads" + blas;
  return tb::serve(info, [](const std::string& model, std::uint64_t seed, const std::string& dir) {
    std::unique_ptr<tb::Trainer> trainer;
    if (model == "resnet18") {
      torch::manual_seed(seed);
      trainer =
          std::make_unique<TorchImageStepTrainer>(make_resnet18(), tb::kResnetBatch, tb::kResnetLearningRate, dir);
    } else if (model == "vit") {
      torch::manual_seed(seed);
      trainer =
          std::make_unique<TorchImageStepTrainer>(tnn::Sequential(ViT()), tb::kVitBatch, tb::kVitLearningRate, dir);
    } else if (model == "gru" || model == "lstm") {
      trainer = std::make_unique<TorchRnnTrainer>(model, seed, dir);
    } else {
      trainer = std::make_unique<TorchTrainer>(model, seed, dir);
    }
    return trainer;
  });
}
