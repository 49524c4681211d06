// The book's ResNet-18 (d2l_resnet.h) trained on Fashion-MNIST, on try_gpu()
// unless --device says otherwise: SGD lr 0.05, batch 256, images resized to
// 96x96 on the device (bilinear, like the book's transforms.Resize). Prints the
// book's metrics (loss, train acc, test acc, examples/sec on the device) and
// writes the curves to resnet18_curves.csv (and .png with gnuplot).
//
//   resnet                                              # 10 epochs at 96x96
//   resnet --resize 0 --train-subset 2048 --epochs 2 --device cpu
//
// --amp bf16 runs the forward pass and the loss under autocast (f16 adds a
// GradScaler; d2l::fit), as torch.autocast does; off (the default) is f32.
// --channels-last lays the network and each batch out NHWC in memory
// (anvil::MemoryFormat::ChannelsLast, PyTorch's torch.channels_last); values
// are those of the default NCHW.
// --expect-loss-below L exits non-zero when the last epoch's training loss
// is not below L (what the ctest runs).
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "anvil/anvil.h"
#include "anvil/data.h"
#include "anvil/nn.h"
#include "anvil/optim.h"
#include "d2l_flags.h"
#include "d2l_resnet.h"
#include "d2l_train.h"

using namespace anvil;

namespace {

struct Args {
  int epochs = 10;
  std::int64_t resize = 96;                        // 0: keep 28x28
  std::int64_t train_subset = 0, test_subset = 0;  // 0: the whole split
  std::string device;
  std::int64_t batch_size = 256;
  double lr = 0.05;
  std::uint64_t seed = 0;
  std::string out_dir = ".";
  double expect_loss_below = 0;  // 0: no check
  d2l::Amp amp;                  // --amp: off (f32)
  bool channels_last = false;
};

Args parse(int argc, char** argv) {
  Args a;
  d2l::Flags("resnet")
      .add("--epochs", a.epochs)
      .add("--resize", a.resize)
      .add("--train-subset", a.train_subset, "N")
      .add("--test-subset", a.test_subset, "N")
      .add("--device", a.device, "cpu|opencl:0|cuda:0")
      .add("--batch-size", a.batch_size)
      .add("--lr", a.lr)
      .add("--seed", a.seed)
      .add("--out-dir", a.out_dir)
      .add("--expect-loss-below", a.expect_loss_below, "L")
      .add("--amp", "bf16|f16|off", d2l::set_amp(a.amp))
      .add("--channels-last", a.channels_last)
      .parse(argc, argv);
  if (a.resize < 0 || a.train_subset < 0 || a.test_subset < 0 || a.batch_size <= 0 || a.epochs <= 0)
    throw ValueError("--resize and the subsets must be >= 0, --batch-size and --epochs > 0");
  return a;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Args args = parse(argc, argv);
    const Device device = d2l::device_from_flag(args.device);
    std::cout << "device: " << device << "\n";
    const FashionMNIST train_set(FashionMNIST::Split::Train);
    const FashionMNIST test_set(FashionMNIST::Split::Test);

    manual_seed(args.seed);
    auto net = d2l::resnet18(FashionMNIST::kNumClasses);
    net->to(device);
    const MemoryFormat format = args.channels_last ? MemoryFormat::ChannelsLast : MemoryFormat::Contiguous;
    net->to(format);
    std::cout << "== resnet18 on " << device << ", " << (args.resize > 0 ? args.resize : 28) << "x"
              << (args.resize > 0 ? args.resize : 28) << " inputs, " << d2l::amp_name(args.amp)
              << (args.channels_last ? ", channels-last" : "") << " ==\n";
    optim::SGD opt(net->parameters(), {.lr = args.lr});
    // The loader puts each 28x28 batch on the device, which resizes it there
    // (anvil::interpolate, bilinear as the book's transforms.Resize).
    DataLoader train_loader =
        d2l::loader(train_set, args.train_subset,
                    {.batch_size = args.batch_size, .shuffle = true, .seed = args.seed, .device = device});
    DataLoader test_loader = d2l::loader(test_set, args.test_subset, {.batch_size = args.batch_size, .device = device});
    const std::int64_t resize = args.resize;
    const d2l::Prepare prepare = [resize, format](const Tensor& x) {
      const Tensor r =
          resize > 0 && resize != x.size(-1) ? interpolate(x, {.size = {resize, resize}, .mode = "bilinear"}) : x;
      return r.contiguous(format);
    };
    const auto rows = d2l::fit(*net, opt, train_loader, test_loader, device, args.epochs, prepare, args.amp);
    const d2l::EpochRow& last = rows.back();
    std::printf("loss %.3f, train acc %.3f, test acc %.3f\n%.1f examples/sec on %s\n", last.loss, last.train_acc,
                last.test_acc, last.samples_per_s, device.str().c_str());
    d2l::write_curves(rows, args.out_dir, "resnet18", "resnet18 on Fashion-MNIST (" + device.str() + ")");
    if (args.expect_loss_below > 0 && !(last.loss < args.expect_loss_below)) {
      std::cerr << "resnet: the training loss did not fall far enough; expected below " << args.expect_loss_below
                << ", got " << last.loss << "\n";
      return 1;
    }
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "resnet: " << e.what() << "\n";
    return 1;
  }
}
