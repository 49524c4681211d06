// Trains D2L's MLP (784-256-10, ReLU) and LeNet on Fashion-MNIST, on
// try_gpu() unless --device says otherwise: batch 256, SGD lr 0.1,
// reshuffled every epoch. Prints a progress bar (epoch, batch, loss,
// accuracy, samples/s) and the test accuracy per epoch, writes the curves to
// <model>_curves.csv and, when gnuplot is installed, <model>_curves.png.
//
//   train_fashion_mnist                         # both models, 2 epochs
//   train_fashion_mnist --model mlp --epochs 10 --device cpu
//   train_fashion_mnist --model lenet --amp f32,bf16,f16    # mixed precision, one run each
//
// --amp bf16 runs the forward pass under amp::AutocastGuard(device, bf16);
// f16 adds an amp::GradScaler (f16 gradients underflow without it); f32 is
// the plain run. With several modes, --max-amp-gap P exits 1 when a mode's
// final test accuracy falls more than P points below the first mode's (the
// mixed-precision ctests); --expect-accuracy A exits 1 when a mode's final
// test accuracy is below A (a fraction), so that modes all stuck at chance
// cannot pass as "equal". --train-samples / --test-samples take the first N.
// --lr-schedule linear lowers the rate linearly from --lr to 0 over the run:
// the last steps barely move the weights, so the final accuracy is settled
// rather than one sample of constant-rate SGD's epoch-to-epoch swings of a
// few points (what lets the ctests compare modes to within 1 point).
//
// The models are d2l_models.h's; LeNet there is the modern variant (ReLU and
// max-pooling).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "anvil/amp.h"
#include "anvil/anvil.h"
#include "anvil/data.h"
#include "anvil/nn.h"
#include "anvil/optim.h"
#include "d2l_flags.h"
#include "d2l_models.h"
#include "d2l_train.h"

using namespace anvil;

namespace {

struct Args {
  int epochs = 2;
  std::string model = "both";
  std::string device;
  std::int64_t batch_size = 256;
  double lr = 0.1;
  double momentum = 0;
  bool linear_lr = false;  // --lr-schedule linear
  std::uint64_t seed = 0;
  std::string out_dir = ".";
  std::vector<std::string> amp = {"f32"};
  double max_amp_gap = -1;                           // off
  double expect_accuracy = 0;                        // > 0: every mode must reach it
  std::int64_t train_samples = 0, test_samples = 0;  // 0: all
  bool no_plot = false;
};

// The low dtype of an --amp mode; nothing for f32.
std::optional<DType> amp_dtype(const std::string& mode) {
  if (mode == "bf16") return bf16;
  if (mode == "f16") return f16;
  return std::nullopt;
}

Args parse(int argc, char** argv) {
  Args a;
  d2l::Flags("train_fashion_mnist")
      .add("--epochs", a.epochs)
      .add("--model", a.model, "mlp|lenet|both")
      .add("--device", a.device, "cpu|opencl:0|cuda:0")
      .add("--batch-size", a.batch_size)
      .add("--lr", a.lr)
      .add("--momentum", a.momentum)
      .add("--lr-schedule", "constant|linear",
           [&a](const std::string& v) {
             if (v != "constant" && v != "linear")
               throw ValueError("--lr-schedule takes constant or linear; got '" + v + "'");
             a.linear_lr = v == "linear";
           })
      .add("--seed", a.seed)
      .add("--out-dir", a.out_dir)
      .add("--amp", "f32|bf16|f16[,...]",
           [&a](const std::string& v) {
             a.amp.clear();
             std::stringstream ss(v);
             for (std::string m; std::getline(ss, m, ',');) {
               if (m != "f32" && m != "bf16" && m != "f16")
                 throw ValueError("--amp takes f32, bf16 or f16 (comma-separated); got '" + m + "'");
               a.amp.push_back(m);
             }
           })
      .add("--max-amp-gap", a.max_amp_gap, "POINTS")
      .add("--expect-accuracy", a.expect_accuracy, "A")
      .add("--train-samples", a.train_samples, "N")
      .add("--test-samples", a.test_samples, "N")
      .add("--no-plot", a.no_plot)
      .parse(argc, argv);
  if (a.model != "mlp" && a.model != "lenet" && a.model != "both")
    throw ValueError("--model must be mlp, lenet or both; got '" + a.model + "'");
  return a;
}

// Trains one model in one --amp mode; returns the final test accuracy.
double train(const std::string& model, const std::string& mode, const Args& args, Device device,
             const FashionMNIST& train_set, const FashionMNIST& test_set) {
  manual_seed(args.seed);
  nn::Sequential net = model == "mlp" ? d2l::mlp() : d2l::lenet();
  net.to(device);
  std::cout << "\n== " << model << " on " << device << ", " << mode << " ==\n" << net << "\n";
  optim::SGD opt(net.parameters(), {.lr = args.lr, .momentum = args.momentum});
  DataLoader train_loader =
      d2l::loader(train_set, args.train_samples,
                  {.batch_size = args.batch_size, .shuffle = true, .seed = args.seed, .device = device});
  DataLoader test_loader = d2l::loader(test_set, args.test_samples, {.batch_size = 1024, .device = device});
  d2l::BeforeStep schedule;
  if (args.linear_lr)
    schedule = [&](std::int64_t step, std::int64_t total) {
      opt.options().lr = args.lr * static_cast<double>(total - step) / static_cast<double>(total);
    };
  const auto rows = d2l::fit(net, opt, train_loader, test_loader, device, args.epochs, {}, amp_dtype(mode), schedule);
  d2l::write_curves(rows, args.out_dir, model + (mode == "f32" ? "" : "_" + mode),
                    model + " on Fashion-MNIST (" + device.str() + ", " + mode + ")", !args.no_plot);
  return rows.empty() ? 0.0 : rows.back().test_acc;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Args args = parse(argc, argv);
    const Device device = d2l::device_from_flag(args.device);
    std::cout << "device: " << device << "\n";
    const FashionMNIST train_set(FashionMNIST::Split::Train);
    const FashionMNIST test_set(FashionMNIST::Split::Test);
    int status = 0;
    for (const std::string model : {"mlp", "lenet"}) {
      if (args.model != model && args.model != "both") continue;
      std::vector<std::pair<double, double>> results;  // test accuracy, seconds
      for (const std::string& mode : args.amp) {
        const auto t0 = std::chrono::steady_clock::now();
        const double acc = train(model, mode, args, device, train_set, test_set);
        results.emplace_back(acc, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
        if (args.expect_accuracy > 0 && !(acc >= args.expect_accuracy)) {
          std::printf("%s on %s, %s: final test accuracy %.2f%% is below --expect-accuracy %.2f%%\n", model.c_str(),
                      device.str().c_str(), mode.c_str(), 100.0 * acc, 100.0 * args.expect_accuracy);
          status = 1;
        }
      }
      if (args.amp.size() < 2) continue;
      std::printf("\n%s on %s: final test accuracy by --amp mode\n", model.c_str(), device.str().c_str());
      for (std::size_t i = 0; i < results.size(); ++i) {
        const double gap = 100.0 * (results[0].first - results[i].first);  // points below the first mode
        const bool bad = args.max_amp_gap >= 0 && gap > args.max_amp_gap;
        std::printf("  %-5s %.2f%%  (%+.2f points vs %s)  %.1f s%s\n", args.amp[i].c_str(), 100.0 * results[i].first,
                    -gap, args.amp[0].c_str(), results[i].second, bad ? "  << more than --max-amp-gap below" : "");
        if (bad) status = 1;
      }
    }
    return status;
  } catch (const std::exception& e) {
    std::cerr << "train_fashion_mnist: " << e.what() << "\n";
    return 1;
  }
}
