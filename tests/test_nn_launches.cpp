// Launch counts of a training step (issue 38, Note [What a launch is] in
// anvil/ledger.h): what a small model costs in tiny launches, held where
// it is so that a change that adds launches fails here, without a GPU.
#include <gtest/gtest.h>

#include <iostream>
#include <vector>

#include "../examples/d2l_resnet.h"
#include "anvil/anvil.h"

using namespace anvil;

namespace {

struct StepWork {
  DeviceWork work;
  LedgerReport report;
};

// One SGD training step (momentum 0.9, weight decay 5e-4) of the book's
// ResNet-18 on f32 [8, 3, 32, 32] on `d`, after a first step that compiles
// kernels and creates the optimiser's state.
StepWork resnet18_step(Device d) {
  manual_seed(3);
  auto net = d2l::resnet18(10, 3);
  net->to(d);
  net->train();
  optim::SGD opt(net->parameters(), {.lr = 0.05, .momentum = 0.9, .weight_decay = 5e-4});
  const Tensor x = randn({8, 3, 32, 32}, d), y = randint(0, 10, {8}, d);
  const auto step = [&] {
    opt.zero_grad();
    cross_entropy((*net)(x), y).backward();
    opt.step();
  };
  step();
  synchronize(d);
  Ledger scope;
  step();
  synchronize(d);
  const LedgerReport r = scope.report();
  return {r.device_work(d), r};
}

// The launches of that step on opencl:0, measured when the bound was set
// (482 before the multi-tensor optimiser step, 409 after); lower it when a
// change saves launches.
constexpr std::uint64_t kResNet18StepLaunchesOpenCL = 409;

TEST(Launches, ResNet18TrainingStepOnOpenCL) {
  if (device_count(DeviceType::OpenCL) == 0)
    GTEST_SKIP() << "no OpenCL device: " << device_unavailable_reason(DeviceType::OpenCL);
  const Device d("opencl:0");
  const StepWork s = resnet18_step(d);
  std::cout << "resnet18 step on " << d << ": " << s.work.launches << " launches, " << s.work.bytes_allocated
            << " bytes allocated, " << s.work.bytes_read << " read, " << s.work.bytes_written << " written\n"
            << s.report;
  EXPECT_LE(s.work.launches, kResNet18StepLaunchesOpenCL) << s.report;
  EXPECT_GT(s.work.bytes_read, 0u);
}

// The CPU's figures, reported (its launches depend on which convolutions
// oneDNN takes on this processor, so they are not held).
TEST(Launches, ResNet18TrainingStepOnCpu) {
  const StepWork s = resnet18_step(cpu());
  std::cout << "resnet18 step on cpu: " << s.work.launches << " launches, " << s.work.bytes_allocated
            << " bytes allocated, " << s.work.bytes_read << " read, " << s.work.bytes_written << " written\n";
  EXPECT_GT(s.work.launches, 0u);
}

}  // namespace
