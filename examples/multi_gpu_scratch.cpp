// Dive into Deep Learning, "Training on Multiple GPUs", from scratch: LeNet
// written as plain tensors, each minibatch split across the devices by hand,
// gradients summed over the devices with an allreduce (dist::LocalGroup),
// and the same SGD step applied on every device so the copies stay equal.
// Trains on one device, then on every device of try_all_gpus(), and prints
// test accuracy and seconds per epoch for each, like the book.
//
//   multi_gpu_scratch                                  # full data set, 10 epochs
//   multi_gpu_scratch --epochs 2 --train-subset 6000 --test-subset 2000 --init-scale 0.1
//
// With ANVIL_OPENCL_CPU=1 and POCL_DEVICES="pthread pthread" the two PoCL
// devices stand in for two GPUs.
#include <chrono>
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "anvil/anvil.h"
#include "anvil/dist.h"
#include "d2l_flags.h"
#include "d2l_train.h"

using namespace anvil;

namespace {

struct Args {
  int epochs = 10;
  std::int64_t batch_size = 256;
  double lr = 0.2;
  std::int64_t train_subset = 0;  // 0: all 60,000
  std::int64_t test_subset = 0;   // 0: all 10,000
  int max_devices = 0;            // 0: every device of try_all_gpus()
  double init_scale = 0.01;       // the book's; larger starts learning sooner on a subset
};

Args parse(int argc, char** argv) {
  Args a;
  d2l::Flags("multi_gpu_scratch")
      .add("--epochs", a.epochs)
      .add("--batch-size", a.batch_size)
      .add("--lr", a.lr)
      .add("--train-subset", a.train_subset, "N")
      .add("--test-subset", a.test_subset, "N")
      .add("--max-devices", a.max_devices, "N")
      .add("--init-scale", a.init_scale)
      .parse(argc, argv);
  return a;
}

// The book's LeNet parameters: conv 20@3x3, conv 50@5x5, 800 → 128 → 10,
// drawn with scale 0.01 (the book's: with it the first epochs of a small
// subset stay near chance; --init-scale 0.1 starts learning sooner).
std::vector<Tensor> init_params(double scale) {
  return {randn({20, 1, 3, 3}) * scale, zeros({20}),  randn({50, 20, 5, 5}) * scale, zeros({50}),
          randn({800, 128}) * scale,    zeros({128}), randn({128, 10}) * scale,      zeros({10})};
}

Tensor lenet(const Tensor& x, const std::vector<Tensor>& p) {
  Tensor h = avg_pool2d(relu(conv2d(x, p[0], p[1])), {2, 2}, {2, 2});
  h = avg_pool2d(relu(conv2d(h, p[2], p[3])), {2, 2}, {2, 2});
  h = relu(matmul(h.reshape({h.size(0), -1}), p[4]) + p[5]);
  return matmul(h, p[6]) + p[7];
}

// get_params: a copy of every parameter on `d`, requiring grad.
std::vector<Tensor> get_params(const std::vector<Tensor>& params, Device d) {
  std::vector<Tensor> out;
  for (const Tensor& p : params) out.push_back(p.copy_to(d).requires_grad_());
  return out;
}

// split_batch: X and y in len(devices) pieces along dim 0, one per device.
std::pair<std::vector<Tensor>, std::vector<Tensor>> split_batch(const Tensor& x, const Tensor& y,
                                                                const std::vector<Device>& devices) {
  const auto n = static_cast<std::int64_t>(devices.size());
  const std::int64_t per = (x.size(0) + n - 1) / n;
  std::vector<Tensor> xs, ys;
  for (std::int64_t i = 0, start = 0; start < x.size(0); ++i, start += per) {
    const std::int64_t len = std::min(per, x.size(0) - start);
    xs.push_back(x.narrow(0, start, len).to(devices[static_cast<std::size_t>(i)]));
    ys.push_back(y.narrow(0, start, len).to(devices[static_cast<std::size_t>(i)]));
  }
  return {xs, ys};
}

void train_batch(const Tensor& x, const Tensor& y, std::vector<std::vector<Tensor>>& device_params,
                 const std::vector<Device>& devices, dist::LocalGroup& group, double lr) {
  auto [xs, ys] = split_batch(x, y, devices);
  // Loss on each device (summed over its samples), backward on each device.
  // Device work is queued and runs asynchronously, so the devices overlap.
  for (std::size_t i = 0; i < xs.size(); ++i) {
    const Tensor loss = cross_entropy(lenet(xs[i], device_params[i]), ys[i]) * static_cast<double>(xs[i].size(0));
    loss.backward();
  }
  // allreduce: every device's gradient becomes the sum over the devices.
  NoGradGuard no_grad;
  for (std::size_t k = 0; k < device_params[0].size(); ++k) {
    std::vector<Tensor> grads;
    for (std::size_t i = 0; i < devices.size(); ++i) {
      Tensor g = device_params[i][k].grad();
      if (!g.defined()) g = zeros_like(device_params[i][k]);  // a device that got no samples
      grads.push_back(g);
    }
    group.allreduce(grads).wait();
    // sgd: the same update on every device keeps the copies identical.
    for (std::size_t i = 0; i < devices.size(); ++i) {
      device_params[i][k].sub_(grads[i] * (lr / static_cast<double>(x.size(0))));
      device_params[i][k].set_grad({});
    }
  }
}

double evaluate(const std::vector<Tensor>& params, const Tensor& x, const Tensor& y, Device d) {
  NoGradGuard no_grad;
  Tensor correct = zeros({}, d, i64);
  for (std::int64_t start = 0; start < x.size(0); start += 1024) {
    const std::int64_t len = std::min<std::int64_t>(1024, x.size(0) - start);
    correct += sum(argmax(lenet(x.narrow(0, start, len).to(d), params), 1) == y.narrow(0, start, len).to(d));
  }
  return static_cast<double>(correct.item<std::int64_t>()) / static_cast<double>(x.size(0));
}

void train(const Args& args, const std::vector<Device>& devices, const Tensor& train_x, const Tensor& train_y,
           const Tensor& test_x, const Tensor& test_y) {
  manual_seed(0);
  const std::vector<Tensor> params = init_params(args.init_scale);
  std::vector<std::vector<Tensor>> device_params;
  for (Device d : devices) device_params.push_back(get_params(params, d));
  dist::LocalGroup group(devices);
  DataLoader loader(train_x, train_y, {.batch_size = args.batch_size, .shuffle = true, .seed = 0});
  std::cout << "\ntraining on";
  for (Device d : devices) std::cout << " " << d;
  std::cout << "\n";
  double total = 0;
  for (int epoch = 1; epoch <= args.epochs; ++epoch) {
    const auto t0 = std::chrono::steady_clock::now();
    for (const Batch& b : loader) train_batch(b.inputs, b.targets, device_params, devices, group, args.lr);
    for (Device d : devices) synchronize(d);
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    total += secs;
    const double acc = evaluate(device_params[0], test_x, test_y, devices[0]);
    std::printf("  epoch %d: test acc %.3f, %.2f s\n", epoch, acc, secs);
  }
  std::printf("test acc: %.2f, %.1f sec/epoch on %zu device(s)\n",
              evaluate(device_params[0], test_x, test_y, devices[0]), total / args.epochs, devices.size());
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Args args = parse(argc, argv);
    std::vector<Device> devices = try_all_gpus();
    if (args.max_devices > 0 && static_cast<int>(devices.size()) > args.max_devices) devices.resize(args.max_devices);
    if (devices.size() == 1 && devices[0].is_cpu())
      std::cout << "try_all_gpus(): cpu only (" << try_gpu_reason() << ")\n";
    const FashionMNIST train_set(FashionMNIST::Split::Train);
    const FashionMNIST test_set(FashionMNIST::Split::Test);
    const Tensor train_x = d2l::first(train_set.images(), args.train_subset);
    const Tensor train_y = d2l::first(train_set.labels(), args.train_subset);
    const Tensor test_x = d2l::first(test_set.images(), args.test_subset);
    const Tensor test_y = d2l::first(test_set.labels(), args.test_subset);
    std::cout << "LeNet on Fashion-MNIST: " << train_x.size(0) << " training and " << test_x.size(0)
              << " test images, batch " << args.batch_size << ", lr " << args.lr << "\n";
    train(args, {devices[0]}, train_x, train_y, test_x, test_y);
    if (devices.size() > 1)
      train(args, devices, train_x, train_y, test_x, test_y);
    else
      std::cout << "(one device only: the multi-device run needs two; try ANVIL_OPENCL_CPU=1)\n";
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "multi_gpu_scratch: " << e.what() << "\n";
    return 1;
  }
}
