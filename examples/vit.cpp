// The book's Vision Transformer ("Transformers for Vision", D2L §11.8; the
// model is d2l::ViT of d2l_vit.h) on Fashion-MNIST, on try_gpu() unless
// --device says otherwise. By default the 28x28 images are cut into 7x7
// patches (16 of them); --resize 96 resizes each batch on the device
// (anvil::interpolate, bilinear as the book's transforms.Resize) and cuts
// 16x16 patches (36), the book's sizes.
//
//   vit                                          # 10 epochs on the whole training set
//   vit --subset 4096 --epochs 3 --device cpu
//   vit --resize 96 --subset 4096 --epochs 3     # the book's 96x96 images, 16x16 patches
//   vit --subset 1024 --epochs 4 --lr 0.2 --expect-accuracy 0.45   # a quick check (ctest)
//   vit --subset 4096 --epochs 3 --amp bf16      # forward pass and loss under bf16 autocast
//
// --amp bf16|f16 runs the forward pass and the loss under autocast, as
// torch.autocast does (f16 adds a GradScaler, as d2l::fit); off (the
// default) is f32.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "anvil/amp.h"
#include "anvil/anvil.h"
#include "d2l_curves.h"
#include "d2l_flags.h"
#include "d2l_train.h"
#include "d2l_vit.h"

using namespace anvil;

namespace {

struct Args {
  int epochs = 10;
  std::string device;
  std::int64_t subset = 0, batch_size = 128;
  std::int64_t resize = 0;      // 0: keep 28x28
  std::int64_t patch_size = 0;  // 0: 7 at 28x28, the book's 16 when resized
  d2l::ViTConfig model;         // the rest of the sizes
  double lr = 0.1;
  std::uint64_t seed = 0;
  double expect_accuracy = 0;  // > 0: exit 1 unless the last test accuracy reaches it
  std::string out_dir = ".";
  d2l::Amp amp;  // --amp: off (f32)
};

Args parse(int argc, char** argv) {
  Args a;
  d2l::Flags("vit")
      .add("--epochs", a.epochs)
      .add("--device", a.device, "cpu|opencl:0|cuda:0")
      .add("--subset", a.subset, "N")
      .add("--batch-size", a.batch_size)
      .add("--resize", a.resize, "N (0: 28x28)")
      .add("--patch-size", a.patch_size, "P (7; 16 when resized)")
      .add("--num-hiddens", a.model.num_hiddens)
      .add("--mlp-hiddens", a.model.mlp_hiddens)
      .add("--num-heads", a.model.num_heads)
      .add("--num-blks", a.model.num_blks)
      .add("--lr", a.lr)
      .add("--dropout", a.model.dropout)
      .add("--seed", a.seed)
      .add("--expect-accuracy", a.expect_accuracy, "A")
      .add("--out-dir", a.out_dir)
      .add("--amp", "bf16|f16|off", d2l::set_amp(a.amp))
      .parse(argc, argv);
  ANVIL_CHECK(a.resize >= 0 && a.patch_size >= 0, ValueError,
              "--resize and --patch-size must not be negative; expected >= 0, got ", a.resize, " and ", a.patch_size);
  a.model.img_size = a.resize > 0 ? a.resize : 28;
  a.model.patch_size = a.patch_size > 0 ? a.patch_size : a.resize > 0 ? 16 : 7;
  return a;  // d2l::ViT checks that the patch size divides the image size
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Args args = parse(argc, argv);
    const Device device = d2l::device_from_flag(args.device);
    std::cout << "device: " << device << "\n"
              << "images: " << args.model.img_size << "x" << args.model.img_size << " in " << args.model.patch_size
              << "x" << args.model.patch_size << " patches, " << d2l::amp_name(args.amp) << "\n";
    const FashionMNIST train_set(FashionMNIST::Split::Train), test_set(FashionMNIST::Split::Test);
    auto first = [&](const Tensor& t) {
      return args.subset > 0 ? t.narrow(0, 0, std::min(args.subset, t.size(0))) : t;
    };
    manual_seed(args.seed);
    d2l::ViT net(args.model);
    net.to(device);
    std::cout << net << "\n";
    optim::SGD opt(net.parameters(), {.lr = args.lr});
    // The loader puts each 28x28 batch on the device, which resizes it there:
    // (96/28)^2 = 11.7x fewer bytes to move than a resized batch, and no
    // work on the host.
    DataLoader train_loader(first(train_set.images()), first(train_set.labels()),
                            {.batch_size = args.batch_size, .shuffle = true, .seed = args.seed, .device = device});
    DataLoader test_loader(first(test_set.images()), first(test_set.labels()),
                           {.batch_size = args.batch_size, .device = device});
    const std::int64_t resize = args.resize;
    const d2l::Prepare prepare = [resize](const Tensor& x) {
      return resize > 0 ? interpolate(x, {.size = {resize, resize}, .mode = "bilinear"}) : x;
    };
    amp::GradScaler scaler({.enabled = args.amp == f16});
    std::vector<std::vector<double>> rows;
    double test_acc = 0;
    for (int epoch = 1; epoch <= args.epochs; ++epoch) {
      const auto t0 = std::chrono::steady_clock::now();
      Tensor loss_sum = zeros({}, device);
      std::int64_t seen = 0;
      for (const Batch& b : train_loader) {
        opt.zero_grad();
        const Tensor x = prepare(b.inputs), y = b.targets.to(device);
        Tensor l;
        {
          std::optional<amp::AutocastGuard> autocast;  // the forward pass and loss only, as with torch.autocast
          if (args.amp) autocast.emplace(device, *args.amp);
          l = cross_entropy(net(x), y);
        }
        scaler.scale(l).backward();
        scaler.step(opt);  // opt.step() unless a gradient overflowed (always when disabled)
        scaler.update();
        NoGradGuard no_grad;
        loss_sum += l.detach() * static_cast<double>(b.targets.size(0));
        seen += b.targets.size(0);
      }
      const double loss = loss_sum.item<double>() / static_cast<double>(seen);  // waits for the device
      const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      test_acc = d2l::evaluate(net, test_loader, device, prepare, args.amp);
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
