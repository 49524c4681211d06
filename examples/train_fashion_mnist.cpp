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
#include <cstdlib>
#include <iostream>
#include <string>

#include "anvil/anvil.h"
#include "anvil/data.h"
#include "anvil/nn.h"
#include "anvil/optim.h"
#include "d2l_train.h"

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
  const auto rows = d2l::fit(net, opt, train_loader, test_loader, device, args.epochs);
  d2l::write_curves(rows, args.out_dir, model, model + " on Fashion-MNIST (" + device.str() + ")");
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
