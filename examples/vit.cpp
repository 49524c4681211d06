// The book's Vision Transformer ("Transformers for Vision", D2L §11.8) on
// Fashion-MNIST, on try_gpu() unless --device says otherwise: patches
// embedded by a convolution with stride = patch size, a learned class token
// and positional embedding, pre-norm Transformer encoder blocks
// (nn::TransformerEncoderLayer with norm_first and GELU: the book's
// ViTBlock), and a LayerNorm + Linear head on the class token.
// The book resizes images to 96x96 with 16x16 patches; anvil has no resize,
// so the 28x28 images are cut into 7x7 patches (16 of them) instead.
//
//   vit                                          # 10 epochs on the whole training set
//   vit --subset 4096 --epochs 3 --device cpu
//   vit --subset 1024 --epochs 4 --lr 0.2 --expect-accuracy 0.45   # a quick check (ctest)
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "anvil/anvil.h"
#include "d2l_curves.h"

using namespace anvil;

namespace {

struct Args {
  int epochs = 10;
  std::string device;
  std::int64_t subset = 0, batch_size = 128, patch_size = 7, num_hiddens = 64, mlp_hiddens = 128, num_heads = 4,
               num_blks = 2;
  double lr = 0.1, dropout = 0.1;
  std::uint64_t seed = 0;
  double expect_accuracy = 0;  // > 0: exit 1 unless the last test accuracy reaches it
  std::string out_dir = ".";
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string s = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw ValueError("vit: " + s + " needs a value");
      return argv[++i];
    };
    if (s == "--epochs")
      a.epochs = std::stoi(value());
    else if (s == "--device")
      a.device = value();
    else if (s == "--subset")
      a.subset = std::stoll(value());
    else if (s == "--batch-size")
      a.batch_size = std::stoll(value());
    else if (s == "--patch-size")
      a.patch_size = std::stoll(value());
    else if (s == "--num-hiddens")
      a.num_hiddens = std::stoll(value());
    else if (s == "--mlp-hiddens")
      a.mlp_hiddens = std::stoll(value());
    else if (s == "--num-heads")
      a.num_heads = std::stoll(value());
    else if (s == "--num-blks")
      a.num_blks = std::stoll(value());
    else if (s == "--lr")
      a.lr = std::stod(value());
    else if (s == "--dropout")
      a.dropout = std::stod(value());
    else if (s == "--seed")
      a.seed = std::stoull(value());
    else if (s == "--expect-accuracy")
      a.expect_accuracy = std::stod(value());
    else if (s == "--out-dir")
      a.out_dir = value();
    else if (s == "-h" || s == "--help") {
      std::cout << "usage: vit [--epochs 10] [--device cpu|opencl:0|cuda:0] [--subset N] [--batch-size 128]\n"
                   "           [--patch-size 7] [--num-hiddens 64] [--mlp-hiddens 128] [--num-heads 4] [--num-blks 2]\n"
                   "           [--lr 0.1] [--dropout 0.1] [--seed 0] [--expect-accuracy A] [--out-dir .]\n";
      std::exit(0);
    } else {
      throw ValueError("vit: unknown flag '" + s + "'; see --help");
    }
  }
  ANVIL_CHECK(28 % a.patch_size == 0, ValueError, "vit: --patch-size must divide 28; got ", a.patch_size);
  return a;
}

class ViT : public nn::Module {
 public:
  ViT(const Args& a)
      : patch_embedding_(register_module("patch_embedding", nn::Conv2d(1, a.num_hiddens, a.patch_size, a.patch_size))),
        dropout_(register_module("dropout", nn::Dropout(a.dropout))),
        blks_(register_module("blks", nn::Sequential())),
        head_(register_module("head", nn::Sequential(nn::LayerNorm(a.num_hiddens), nn::Linear(a.num_hiddens, 10)))) {
    const std::int64_t patches = (28 / a.patch_size) * (28 / a.patch_size);
    cls_token_ = register_parameter("cls_token", zeros({1, 1, a.num_hiddens}));
    Tensor pos = empty({1, patches + 1, a.num_hiddens});
    nn::init::normal_(pos, 0.0, 0.02);
    pos_embedding_ = register_parameter("pos_embedding", pos);
    for (std::int64_t i = 0; i < a.num_blks; ++i)
      blks_->push_back(nn::TransformerEncoderLayer(a.num_hiddens, a.num_heads, a.mlp_hiddens, a.dropout, "gelu", 1e-5,
                                                   /*batch_first=*/true, /*norm_first=*/true));
  }
  Tensor forward(const Tensor& x) override {
    Tensor p = (*patch_embedding_)(x).flatten(2).transpose(1, 2);  // [N, patches, hiddens]
    p = cat({cls_token_.expand({p.size(0), 1, p.size(2)}), p}, 1);
    p = (*dropout_)(p + pos_embedding_);
    p = (*blks_)(p);
    return (*head_)(p.select(1, 0));
  }
  std::string name() const override { return "ViT"; }

 private:
  std::shared_ptr<nn::Conv2d> patch_embedding_;
  std::shared_ptr<nn::Dropout> dropout_;
  std::shared_ptr<nn::Sequential> blks_, head_;
  Tensor cls_token_, pos_embedding_;
};

double evaluate(nn::Module& net, DataLoader& loader) {
  NoGradGuard no_grad;
  net.eval();
  Tensor correct = zeros({}, loader.options().device, i64);
  for (const Batch& b : loader) correct += sum(argmax(net(b.inputs), 1) == b.targets);
  net.train();
  return static_cast<double>(correct.item<std::int64_t>()) / static_cast<double>(loader.num_samples());
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Args args = parse(argc, argv);
    const Device device = args.device.empty() ? try_gpu() : Device(args.device);
    if (args.device.empty() && device.is_cpu()) std::cout << "try_gpu(): cpu (" << try_gpu_reason() << ")\n";
    std::cout << "device: " << device << "\n";
    const FashionMNIST train_set(FashionMNIST::Split::Train), test_set(FashionMNIST::Split::Test);
    auto first = [&](const Tensor& t) {
      return args.subset > 0 ? t.narrow(0, 0, std::min(args.subset, t.size(0))) : t;
    };
    manual_seed(args.seed);
    ViT net(args);
    net.to(device);
    std::cout << net << "\n";
    optim::SGD opt(net.parameters(), {.lr = args.lr});
    DataLoader train_loader(first(train_set.images()), first(train_set.labels()),
                            {.batch_size = args.batch_size, .shuffle = true, .seed = args.seed, .device = device});
    DataLoader test_loader(first(test_set.images()), first(test_set.labels()),
                           {.batch_size = args.batch_size, .device = device});
    std::vector<std::vector<double>> rows;
    double test_acc = 0;
    for (int epoch = 1; epoch <= args.epochs; ++epoch) {
      const auto t0 = std::chrono::steady_clock::now();
      Tensor loss_sum = zeros({}, device);
      std::int64_t seen = 0;
      for (const Batch& b : train_loader) {
        opt.zero_grad();
        const Tensor l = cross_entropy(net(b.inputs), b.targets);
        l.backward();
        opt.step();
        NoGradGuard no_grad;
        loss_sum += l.detach() * static_cast<double>(b.targets.size(0));
        seen += b.targets.size(0);
      }
      const double loss = loss_sum.item<double>() / static_cast<double>(seen);  // waits for the device
      const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      test_acc = evaluate(net, test_loader);
      std::printf("epoch %d: train loss %.4f, test acc %.4f, %.1f s (%.0f examples/s on %s)\n", epoch, loss, test_acc,
                  secs, static_cast<double>(seen) / secs, device.str().c_str());
      std::fflush(stdout);
      rows.push_back({static_cast<double>(epoch), loss, test_acc, static_cast<double>(seen) / secs});
    }
    const std::string csv = args.out_dir + "/vit_curve.csv";
    d2l::write_csv(csv, "epoch,train_loss,test_acc,examples_per_s", rows);
    d2l::plot(csv, args.out_dir + "/vit_curve.png", "ViT on Fashion-MNIST (" + device.str() + ")", "epoch",
              {{2, "train loss"}, {3, "test acc"}});
    if (args.expect_accuracy > 0 && !(test_acc >= args.expect_accuracy)) {
      std::cerr << "vit: test accuracy " << test_acc << " after " << args.epochs
                << " epochs; expected >= " << args.expect_accuracy << "\n";
      return 1;
    }
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "vit: " << e.what() << "\n";
    return 1;
  }
}
