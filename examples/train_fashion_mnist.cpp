// Trains D2L's MLP (784-256-10, ReLU) and LeNet on Fashion-MNIST, on
// try_gpu() unless --device says otherwise: batch 256, SGD lr 0.1,
// reshuffled every epoch. Prints a progress bar (epoch, batch, loss,
// accuracy, samples/s) and the test accuracy per epoch, writes the curves to
// <model>_curves.csv and, when gnuplot is installed, <model>_curves.png.
//
//   train_fashion_mnist                         # both models, 2 epochs
//   train_fashion_mnist --model mlp --epochs 10 --device cpu
//
// LeNet here is the modern variant (ReLU and max-pooling): with D2L's
// sigmoid/avg-pool original, lr 0.1 barely moves in a few epochs (D2L itself
// uses lr 0.9 for it).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "anvil/anvil.h"
#include "anvil/data.h"
#include "anvil/nn.h"
#include "anvil/optim.h"
#include "d2l_curves.h"

using namespace anvil;

namespace {

struct Args {
  int epochs = 2;
  std::string model = "both";
  std::string device;
  std::int64_t batch_size = 256;
  double lr = 0.1;
  std::uint64_t seed = 0;
  std::string out_dir = ".";
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string s = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw ValueError("train_fashion_mnist: " + s + " needs a value");
      return argv[++i];
    };
    if (s == "--epochs")
      a.epochs = std::stoi(value());
    else if (s == "--model")
      a.model = value();
    else if (s == "--device")
      a.device = value();
    else if (s == "--batch-size")
      a.batch_size = std::stoll(value());
    else if (s == "--lr")
      a.lr = std::stod(value());
    else if (s == "--seed")
      a.seed = std::stoull(value());
    else if (s == "--out-dir")
      a.out_dir = value();
    else if (s == "-h" || s == "--help") {
      std::cout << "usage: train_fashion_mnist [--epochs N] [--model mlp|lenet|both] [--device cpu|opencl:0|cuda:0]\n"
                   "                           [--batch-size 256] [--lr 0.1] [--seed 0] [--out-dir .]\n";
      std::exit(0);
    } else {
      throw ValueError("train_fashion_mnist: unknown flag '" + s +
                       "'; expected --epochs, --model, --device, "
                       "--batch-size, --lr, --seed or --out-dir");
    }
  }
  if (a.model != "mlp" && a.model != "lenet" && a.model != "both")
    throw ValueError("train_fashion_mnist: --model must be mlp, lenet or both; got '" + a.model + "'");
  return a;
}

nn::Sequential make_mlp() {
  nn::Sequential net{nn::Flatten(), nn::Linear(784, 256), nn::ReLU(), nn::Linear(256, 10)};
  for (Tensor w : {net[1].weight(), net[3].weight()}) nn::init::normal_(w, 0.0, 0.01);  // D2L's init
  return net;
}

nn::Sequential make_lenet() {
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

double evaluate(nn::Module& net, DataLoader& loader) {
  NoGradGuard no_grad;
  net.eval();
  Tensor correct = zeros({}, loader.options().device, i64);
  for (const Batch& b : loader) correct += sum(argmax(net(b.inputs), 1) == b.targets);
  net.train();
  return static_cast<double>(correct.item<std::int64_t>()) / static_cast<double>(loader.num_samples());
}

struct EpochRow {
  int epoch;
  double loss, train_acc, test_acc, seconds, samples_per_s;
};

void train(const std::string& model, const Args& args, Device device, const FashionMNIST& train_set,
           const FashionMNIST& test_set) {
  manual_seed(args.seed);
  nn::Sequential net = model == "mlp" ? make_mlp() : make_lenet();
  net.to(device);
  std::cout << "\n== " << model << " on " << device << " ==\n" << net << "\n";
  optim::SGD opt(net.parameters(), {.lr = args.lr});
  DataLoader train_loader(train_set.images(), train_set.labels(),
                          {.batch_size = args.batch_size, .shuffle = true, .seed = args.seed, .device = device});
  DataLoader test_loader(test_set.images(), test_set.labels(), {.batch_size = 1024, .device = device});
  std::vector<EpochRow> rows;
  const std::int64_t nbatches = train_loader.size();
  for (int epoch = 1; epoch <= args.epochs; ++epoch) {
    const auto t0 = std::chrono::steady_clock::now();
    // Loss and correct counts stay on the device; read once per progress update.
    Tensor loss_sum = zeros({}, device), correct = zeros({}, device, i64);
    std::int64_t seen = 0, batch = 0;
    double loss = 0, acc = 0, rate = 0;
    for (const Batch& b : train_loader) {
      opt.zero_grad();
      const Tensor logits = net(b.inputs);
      const Tensor l = nn::cross_entropy(logits, b.targets);
      l.backward();
      opt.step();
      {
        NoGradGuard no_grad;
        loss_sum += l.detach() * static_cast<double>(b.targets.size(0));
        correct += sum(argmax(logits.detach(), 1) == b.targets);
      }
      seen += b.targets.size(0);
      ++batch;
      if (batch % 20 == 0 || batch == nbatches) {
        const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        loss = loss_sum.item<double>() / static_cast<double>(seen);
        acc = static_cast<double>(correct.item<std::int64_t>()) / static_cast<double>(seen);
        rate = static_cast<double>(seen) / secs;
        const int width = 30, filled = static_cast<int>(width * batch / nbatches);
        std::printf("\repoch %d/%d [%s%s] %3lld/%lld  loss %.4f  acc %.4f  %8.0f samples/s", epoch, args.epochs,
                    std::string(filled, '#').c_str(), std::string(width - filled, '.').c_str(),
                    static_cast<long long>(batch), static_cast<long long>(nbatches), loss, acc, rate);
        std::fflush(stdout);
      }
    }
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double test_acc = evaluate(net, test_loader);
    std::printf("\n  epoch %d: train loss %.4f, train acc %.4f, test acc %.4f, %.2f s (%.0f samples/s)\n", epoch, loss,
                acc, test_acc, secs, static_cast<double>(seen) / secs);
    rows.push_back({epoch, loss, acc, test_acc, secs, static_cast<double>(seen) / secs});
  }
  const std::string csv = args.out_dir + "/" + model + "_curves.csv";
  std::vector<std::vector<double>> table;
  for (const EpochRow& r : rows)
    table.push_back({static_cast<double>(r.epoch), r.loss, r.train_acc, r.test_acc, r.seconds, r.samples_per_s});
  d2l::write_csv(csv, "epoch,train_loss,train_acc,test_acc,seconds,samples_per_s", table);
  d2l::plot(csv, args.out_dir + "/" + model + "_curves.png", model + " on Fashion-MNIST (" + device.str() + ")",
            "epoch", {{2, "train loss"}, {3, "train acc"}, {4, "test acc"}});
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Args args = parse(argc, argv);
    const Device device = args.device.empty() ? try_gpu() : Device(args.device);
    if (args.device.empty() && device.is_cpu()) std::cout << "try_gpu(): cpu (" << try_gpu_reason() << ")\n";
    std::cout << "device: " << device << "\n";
    const FashionMNIST train_set(FashionMNIST::Split::Train);
    const FashionMNIST test_set(FashionMNIST::Split::Test);
    for (const std::string model : {"mlp", "lenet"})
      if (args.model == model || args.model == "both") train(model, args, device, train_set, test_set);
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "train_fashion_mnist: " << e.what() << "\n";
    return 1;
  }
}
