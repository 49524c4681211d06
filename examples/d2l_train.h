// The book's training loop for Fashion-MNIST classifiers, shared by the
// examples (train_fashion_mnist.cpp, resnet.cpp): one epoch at a time with a
// progress bar, test accuracy per epoch, curves written as CSV (and a PNG
// when gnuplot is installed; d2l_curves.h). Built on the public API only.
//
//   auto rows = d2l::fit(net, opt, train_loader, test_loader, device, epochs);
//   d2l::write_curves(rows, "out", "lenet", "lenet on Fashion-MNIST (cpu)");
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <iostream>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "anvil/amp.h"
#include "anvil/anvil.h"
#include "anvil/data.h"
#include "anvil/nn.h"
#include "anvil/optim.h"
#include "d2l_curves.h"

namespace d2l {

// What a batch's inputs go through before the model: identity by default;
// resnet.cpp and vit.cpp resize there, on the device (anvil::interpolate).
using Prepare = std::function<anvil::Tensor(const anvil::Tensor&)>;

struct EpochRow {
  int epoch;
  double loss, train_acc, test_acc, seconds, samples_per_s;
};

// The device a --device flag names, or try_gpu() when it is empty (saying
// why when that falls back to the cpu).
inline anvil::Device device_from_flag(const std::string& flag) {
  if (!flag.empty()) return anvil::Device(flag);
  const anvil::Device d = anvil::try_gpu();
  if (d.is_cpu()) std::cout << "try_gpu(): cpu (" << anvil::try_gpu_reason() << ")\n";
  return d;
}

// The first n samples of a dataset tensor (all of it for 0 or n past the end).
inline anvil::Tensor first(const anvil::Tensor& t, std::int64_t n) {
  return n > 0 && n < t.size(0) ? t.narrow(0, 0, n) : t;
}

// A loader over the first n samples of a Fashion-MNIST split (all of it
// for 0), with `options` (batch size, shuffling, where batches go).
inline anvil::DataLoader loader(const anvil::FashionMNIST& split, std::int64_t n, anvil::DataLoaderOptions options) {
  return anvil::DataLoader(first(split.images(), n), first(split.labels(), n), std::move(options));
}

// Mixed precision (docs/mixed-precision.md): the forward pass under
// autocast in `amp`'s dtype; f16's small gradients need the loss scaled
// (bf16 has f32's exponent range and needs no scaler).
using Amp = std::optional<anvil::DType>;

// The examples' --amp flag: bf16 or f16 runs the forward pass and the loss
// under autocast in that dtype (f16 with a GradScaler, as d2l::fit does), off
// (the default) runs in f32 throughout.
//
//   flags.add("--amp", "bf16|f16|off", d2l::set_amp(a.amp));
inline Amp amp_from_flag(const std::string& v) {
  if (v == "bf16") return anvil::bf16;
  if (v == "f16") return anvil::f16;
  if (v == "off") return std::nullopt;
  throw anvil::ValueError("--amp takes bf16, f16 or off; got '" + v + "'");
}

inline std::function<void(const std::string&)> set_amp(Amp& target) {
  return [&target](const std::string& v) { target = amp_from_flag(v); };
}

// How an --amp mode reads in a heading: "f32", "bf16 autocast", "f16 autocast".
inline std::string amp_name(const Amp& amp) {
  return !amp ? "f32" : *amp == anvil::bf16 ? "bf16 autocast" : "f16 autocast";
}

inline double evaluate(anvil::nn::Module& net, anvil::DataLoader& loader, anvil::Device device,
                       const Prepare& prepare = {}, Amp amp = {}) {
  using namespace anvil;
  NoGradGuard no_grad;
  std::optional<amp::AutocastGuard> autocast;
  if (amp) autocast.emplace(device, *amp);
  net.eval();
  Tensor correct = zeros({}, device, i64);
  for (const Batch& b : loader) {
    const Tensor x = prepare ? prepare(b.inputs) : b.inputs;
    correct += sum(argmax(net(x), 1) == b.targets.to(device));
  }
  net.train();
  return static_cast<double>(correct.item<std::int64_t>()) / static_cast<double>(loader.num_samples());
}

// Called before each optimiser step with the step's number (from 0) and the
// number of steps in the whole run: where a learning-rate schedule sets the
// optimiser's rate.
using BeforeStep = std::function<void(std::int64_t step, std::int64_t total_steps)>;

// Trains `epochs` epochs with cross-entropy, printing progress, and returns
// one row per epoch. Loss and correct counts stay on the device and are read
// once per progress update.
inline std::vector<EpochRow> fit(anvil::nn::Module& net, anvil::optim::Optimizer& opt, anvil::DataLoader& train_loader,
                                 anvil::DataLoader& test_loader, anvil::Device device, int epochs,
                                 const Prepare& prepare = {}, Amp amp = {}, const BeforeStep& before_step = {}) {
  using namespace anvil;
  amp::GradScaler scaler({.enabled = amp == f16});
  std::vector<EpochRow> rows;
  const std::int64_t nbatches = train_loader.size();
  std::int64_t step = 0;
  for (int epoch = 1; epoch <= epochs; ++epoch) {
    const auto t0 = std::chrono::steady_clock::now();
    // The epoch's training time as a span of a profile (scripts/cpu-scaling.sh --predict reads it).
    std::optional<profiler::Range> span;
    if (profiler::enabled()) span.emplace("train epoch " + std::to_string(epoch));
    Tensor loss_sum = zeros({}, device), correct = zeros({}, device, i64);
    std::int64_t seen = 0, batch = 0;
    double loss = 0, acc = 0, rate = 0;
    for (const Batch& b : train_loader) {
      const Tensor x = prepare ? prepare(b.inputs) : b.inputs;
      const Tensor y = b.targets.to(device);
      opt.zero_grad();
      Tensor logits, l;
      {
        std::optional<amp::AutocastGuard> autocast;  // the forward pass only, as with torch.autocast
        if (amp) autocast.emplace(device, *amp);
        logits = net(x);
        l = nn::cross_entropy(logits, y);
      }
      scaler.scale(l).backward();
      if (before_step) before_step(step, nbatches * epochs);
      ++step;
      scaler.step(opt);  // opt.step() unless a gradient overflowed (always when disabled)
      scaler.update();
      {
        NoGradGuard no_grad;
        loss_sum += l.detach() * static_cast<double>(y.size(0));
        correct += sum(argmax(logits.detach(), 1) == y);
      }
      seen += y.size(0);
      ++batch;
      if (batch % 20 == 0 || batch == nbatches) {
        const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        loss = loss_sum.item<double>() / static_cast<double>(seen);
        acc = static_cast<double>(correct.item<std::int64_t>()) / static_cast<double>(seen);
        rate = static_cast<double>(seen) / secs;
        const int width = 30, filled = static_cast<int>(width * batch / nbatches);
        std::printf("\repoch %d/%d [%s%s] %3lld/%lld  loss %.4f  acc %.4f  %8.0f samples/s", epoch, epochs,
                    std::string(filled, '#').c_str(), std::string(width - filled, '.').c_str(),
                    static_cast<long long>(batch), static_cast<long long>(nbatches), loss, acc, rate);
        std::fflush(stdout);
      }
    }
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    span.reset();
    const double test_acc = evaluate(net, test_loader, device, prepare, amp);
    std::printf("\n  epoch %d: train loss %.4f, train acc %.4f, test acc %.4f, %.2f s (%.0f samples/s)\n", epoch, loss,
                acc, test_acc, secs, static_cast<double>(seen) / secs);
    rows.push_back({epoch, loss, acc, test_acc, secs, static_cast<double>(seen) / secs});
  }
  return rows;
}

// <out_dir>/<model>_curves.csv (and .png).
inline void write_curves(const std::vector<EpochRow>& rows, const std::string& out_dir, const std::string& model,
                         const std::string& title, bool with_plot = true) {
  const std::string csv = out_dir + "/" + model + "_curves.csv";
  std::vector<std::vector<double>> table;
  for (const EpochRow& r : rows)
    table.push_back({static_cast<double>(r.epoch), r.loss, r.train_acc, r.test_acc, r.seconds, r.samples_per_s});
  write_csv(csv, "epoch,train_loss,train_acc,test_acc,seconds,samples_per_s", table);
  if (with_plot)
    plot(csv, out_dir + "/" + model + "_curves.png", title, "epoch",
         {{2, "train loss"}, {3, "train acc"}, {4, "test acc"}});
}

}  // namespace d2l
