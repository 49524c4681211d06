// The book's "Concise Implementation for Multiple GPUs" (Dive into Deep
// Learning): its ResNet-18 (examples/d2l_resnet.h) trained on Fashion-MNIST
// with nn::DataParallel and the book's loop (loss(net(X), y).backward();
// trainer.step()), first on one device and then on two of
// try_all_gpus(), batch and learning rate scaled with the device count as the
// book does (256 and 0.1 on one GPU, 512 and 0.2 on two). Prints the test
// accuracy and the seconds per epoch like the book:
//   test acc: 0.78, 41.3 sec/epoch on [opencl:0, opencl:1]
//
//   multi_gpu_concise                           # a subset, so it takes minutes on a CPU
//   multi_gpu_concise --devices 2 --subset 0 --epochs 10  # the book's run (all 60,000 images)
//
// ResNet-18 at 28x28 costs about 0.9 GFLOP per image forward, 2.7 with backward, so
// on a 2-core machine without a GPU the default trains one epoch on 128
// images (minutes on PoCL): enough to show the machinery and the time per
// epoch, not to learn (the test accuracy stays near chance, 0.1); the book's
// 0.9 needs --subset 0 --epochs 10, hours on such a CPU. Under
// ./run's two whole PoCL devices both share the same cores, so two devices
// are not faster there; with ANVIL_OPENCL_SUBDEVICES=1 POCL_DEVICES=pthread
// each device is one core and the two really run at once (docs/opencl.md).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "anvil/anvil.h"
#include "anvil/data.h"
#include "anvil/nn.h"
#include "anvil/nn/parallel.h"
#include "anvil/optim.h"
#include "d2l_flags.h"
#include "d2l_resnet.h"

using namespace anvil;

namespace {

struct Args {
  int devices = 0;            // 0: one, then two (when there are two)
  std::int64_t subset = 128;  // train and test images; 0 = all
  int epochs = 1;
  std::int64_t batch = 32;  // per device
  double lr = 0.05;         // per device
  std::uint64_t seed = 0;
};

Args parse(int argc, char** argv) {
  Args a;
  d2l::Flags("multi_gpu_concise")
      .add("--devices", a.devices, "N")
      .add("--subset", a.subset, "N")
      .add("--epochs", a.epochs, "N")
      .add("--batch", a.batch, "B")
      .add("--lr", a.lr, "LR")
      .add("--seed", a.seed, "S")
      .details(
          "  --devices N  train on the first N of try_all_gpus() (default: 1, then 2 when there are two)\n"
          "  --subset N   use the first N training and N test images (default 128; 0 = all 60,000 / 10,000)\n"
          "  --epochs N   epochs per run (default 1; the book trains 10)\n"
          "  --batch B    batch size per device; N devices take N*B per step (default 32; the book: 256)\n"
          "  --lr LR      learning rate per device; N devices use N*LR (default 0.05; the book: 0.1)\n"
          "  --seed S     initialisation and shuffling seed (default 0)\n"
          "  --profile F  profile the run: a Chrome trace to F and the top ops at the end\n")
      .parse(argc, argv);
  ANVIL_CHECK(a.devices >= 0 && a.subset >= 0 && a.epochs > 0 && a.batch > 0 && a.lr > 0, ValueError,
              "expected --devices >= 0, --subset >= 0, --epochs > 0, --batch > 0 and --lr > 0; got ", a.devices, ", ",
              a.subset, ", ", a.epochs, ", ", a.batch, ", ", a.lr);
  return a;
}

// The first n samples (all when n is 0 or larger than the set).
std::pair<Tensor, Tensor> first(const FashionMNIST& set, std::int64_t n) {
  if (n == 0 || n >= set.size()) return {set.images(), set.labels()};
  return {set.images().narrow(0, 0, n), set.labels().narrow(0, 0, n)};
}

// The book's init_weights: normal(0, 0.01) for every Linear and Conv2d weight.
void init_weights(nn::Module& m) {
  if (dynamic_cast<nn::Linear*>(&m) != nullptr || dynamic_cast<nn::Conv2d*>(&m) != nullptr) {
    Tensor w = m.weight();
    nn::init::normal_(w, 0.0, 0.01);
  }
}

// The book's evaluate_accuracy_gpu: eval mode, the replicas run their share
// of each batch at once; the correct count stays on the first device.
double evaluate(nn::DataParallel& net, DataLoader& loader) {
  net.eval();
  NoGradGuard no_grad;
  Tensor correct;
  for (const Batch& b : loader) {
    const Tensor hits = sum(argmax(net(b.inputs), 1) == b.targets.to(net.devices_used().front()));
    correct = correct.defined() ? correct + hits : hits;
  }
  net.train();
  return static_cast<double>(correct.item<std::int64_t>()) / static_cast<double>(loader.num_samples());
}

std::string device_list(const std::vector<Device>& ds) {
  std::string s = "[";
  for (std::size_t i = 0; i < ds.size(); ++i) s += (i ? ", " : "") + ds[i].str();
  return s + "]";
}

void train(int num_devices, const Args& args, const std::pair<Tensor, Tensor>& train_data,
           const std::pair<Tensor, Tensor>& test_data) {
  const std::vector<Device> all = try_all_gpus();
  const std::vector<Device> devices(all.begin(), all.begin() + num_devices);
  const std::int64_t batch = args.batch * num_devices;
  const double lr = args.lr * num_devices;
  std::cout << "\n== ResNet-18 on " << device_list(devices) << ": batch " << batch << ", lr " << lr << ", "
            << train_data.first.size(0) << " training images ==\n";
  manual_seed(args.seed);
  // The book's net = nn.DataParallel(net, device_ids=devices): the model
  // moves to the first device and is cloned onto the others.
  auto model = d2l::resnet18(10, 1);
  model->apply(init_weights);
  nn::DataParallel net(model, devices);
  optim::SGD trainer(net.parameters(), {.lr = lr});
  DataLoader train_iter(train_data.first, train_data.second,
                        {.batch_size = batch, .shuffle = true, .seed = args.seed, .device = cpu()});
  DataLoader test_iter(test_data.first, test_data.second, {.batch_size = batch, .device = cpu()});
  double total_seconds = 0, test_acc = 0;
  for (int epoch = 1; epoch <= args.epochs; ++epoch) {
    const auto t0 = std::chrono::steady_clock::now();
    Tensor loss_sum;
    for (const Batch& b : train_iter) {
      // The book's loop: the batch to the first device, the replicas run
      // their chunks at once, backward sums their gradients onto the model's.
      trainer.zero_grad();
      const Tensor X = b.inputs.to(devices[0]), y = b.targets.to(devices[0]);
      const Tensor l = nn::cross_entropy(net(X), y);
      l.backward();
      trainer.step();
      const Tensor s = l.detach() * static_cast<double>(y.size(0));
      loss_sum = loss_sum.defined() ? loss_sum + s : s;
    }
    synchronize(devices.front());
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    total_seconds += secs;
    test_acc = evaluate(net, test_iter);
    std::printf("  epoch %d: train loss %.4f, test acc %.4f, %.1f s (%.1f images/s)\n", epoch,
                loss_sum.item<double>() / static_cast<double>(train_iter.num_samples()), test_acc, secs,
                static_cast<double>(train_iter.num_samples()) / secs);
    std::fflush(stdout);
  }
  std::printf("test acc: %.2f, %.1f sec/epoch on %s\n", test_acc, total_seconds / args.epochs,
              device_list(devices).c_str());
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Args args = parse(argc, argv);
    const std::vector<Device> all = try_all_gpus();
    std::cout << "try_all_gpus(): " << device_list(all);
    if (all.front().is_cpu()) std::cout << " (" << try_gpu_reason() << ")";
    std::cout << "\n";
    std::vector<int> runs;
    if (args.devices > 0) {
      ANVIL_CHECK(static_cast<std::size_t>(args.devices) <= all.size(), ValueError, "--devices ", args.devices,
                  " is more than there are; expected at most ", all.size(), " (", device_list(all), "), got ",
                  args.devices, "; without a GPU try POCL_DEVICES=\"pthread pthread\" ANVIL_OPENCL_CPU=1");
      runs.push_back(args.devices);
    } else {
      runs.push_back(1);
      if (all.size() >= 2)
        runs.push_back(2);
      else
        std::cout << "one device only, so no two-device run (" << try_gpu_reason(1) << ")\n";
    }
    const FashionMNIST train_set(FashionMNIST::Split::Train);
    const FashionMNIST test_set(FashionMNIST::Split::Test);
    const auto train_data = first(train_set, args.subset), test_data = first(test_set, args.subset);
    for (int n : runs) train(n, args, train_data, test_data);
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "multi_gpu_concise: " << e.what() << "\n";
    return 1;
  }
}
