// nn::DataParallel: several devices in one process give what one device
// gives on the whole batch (within float rounding), replicas stay identical,
// bad arguments are typed errors.
#include <gtest/gtest.h>

#include <memory>

#include "anvil/nn/parallel.h"
#include "device_test.h"

namespace {

using namespace anvil;

std::shared_ptr<nn::Module> make_mlp() {
  return std::make_shared<nn::Sequential>(nn::Linear(12, 16), nn::ReLU(), nn::Linear(16, 5));
}

// No BatchNorm: in training it normalises each chunk by that chunk's own
// statistics, so no data-parallel split reproduces one device's batch (as in
// PyTorch without SyncBatchNorm).
std::shared_ptr<nn::Module> make_convnet() {
  return std::make_shared<nn::Sequential>(nn::Conv2d(1, 4, 3, 1, 1), nn::ReLU(), nn::MaxPool2d(2), nn::Flatten(),
                                          nn::Linear(4 * 4 * 4, 5));
}

bool have(const std::vector<Device>& want) {
  const auto all = all_devices();
  for (Device d : want)
    if (std::find(all.begin(), all.end(), d) == all.end()) return false;
  return true;
}

// What is missing of `want` ("" when every device is there), and whether a
// missing one is of a type ANVIL_REQUIRE_DEVICES names.
std::string missing_devices(const std::vector<Device>& want, bool* required) {
  const auto all = all_devices();
  const auto types = anvil::testing::required_device_types();
  std::string why;
  *required = false;
  for (Device d : want) {
    if (std::find(all.begin(), all.end(), d) != all.end()) continue;
    why += (why.empty() ? "needs " : "; needs ") + d.str() + ": " + device_unavailable_reason(d.type());
    *required = *required || types.count(d.type()) > 0;
  }
  return why;
}

// Skips the test when a device of the list is missing, or fails it when
// ANVIL_REQUIRE_DEVICES names that device's type (like the device-generic
// suites of device_test.h).
#define NEED_DEVICES(...)                                                                       \
  do {                                                                                          \
    bool required_ = false;                                                                     \
    const std::string why_ = missing_devices({__VA_ARGS__}, &required_);                        \
    if (!why_.empty() && required_) FAIL() << "ANVIL_REQUIRE_DEVICES is set and this " << why_; \
    if (!why_.empty()) GTEST_SKIP() << why_;                                                    \
  } while (0)

// Trains `steps` SGD steps (momentum) on a fixed synthetic batch stream with
// DataParallel over `devices` and with one model on `reference` from the same
// initial weights; the parameters must agree after every step and the
// replicas must equal the master whenever they compute.
void expect_matches_one_device(const nn::ModuleFactory& factory, const Shape& input_shape,
                               const std::vector<Device>& devices, Device reference, std::int64_t batch) {
  manual_seed(7);
  auto ref = factory();
  ref->to(reference);
  manual_seed(7);
  nn::DataParallel dp(factory, devices);
  ASSERT_EQ(dp.num_replicas(), devices.size());
  for (std::size_t r = 0; r < devices.size(); ++r) EXPECT_EQ(dp.replica(r).devices(), std::vector<Device>{devices[r]});

  optim::SGD ref_opt(ref->parameters(), {.lr = 0.05, .momentum = 0.9});
  optim::SGD dp_opt(dp.parameters(), {.lr = 0.05, .momentum = 0.9});
  manual_seed(11);
  for (int step = 0; step < 4; ++step) {
    Shape xs = input_shape;
    xs.insert(0, batch);
    const Tensor x = randn(xs);
    const Tensor y = randint(0, 5, {batch});
    ref_opt.zero_grad();
    const Tensor ref_loss = nn::cross_entropy((*ref)(x.to(reference)), y.to(reference));
    ref_loss.backward();
    ref_opt.step();

    dp_opt.zero_grad();
    const auto result = dp.train_step(x, y, nn::cross_entropy);
    EXPECT_EQ(result.output.shape()[0], batch);
    EXPECT_NEAR(result.loss.item<float>(), ref_loss.item<float>(), 1e-5 * (1 + std::abs(ref_loss.item<float>())));
    // The replicas computed with exactly the master's weights.
    const auto master = dp.module().state_dict();
    for (std::size_t r = 1; r < dp.num_replicas(); ++r)
      for (const auto& [name, t] : dp.replica(r).state_dict()) {
        if (name.find("running") != std::string::npos || name.find("num_batches") != std::string::npos) continue;
        EXPECT_TRUE(equal(t.cpu(), master.at(name).cpu())) << "replica " << r << " '" << name << "' step " << step;
      }
    dp_opt.step();

    const auto want = ref->named_parameters();
    const auto got = dp.module().named_parameters();
    ASSERT_EQ(want.size(), got.size());
    for (std::size_t k = 0; k < want.size(); ++k)
      EXPECT_TRUE(allclose(got[k].second.cpu(), want[k].second.cpu(), 1e-5, 1e-6))
          << "'" << want[k].first << "' after step " << step << ": "
          << (got[k].second.cpu() - want[k].second.cpu()).abs().max().item<float>();
  }
  // Evaluation: chunks computed in parallel and gathered in batch order.
  dp.eval();
  ref->eval();
  manual_seed(3);
  Shape xs = input_shape;
  xs.insert(0, 6);
  const Tensor x = randn(xs);
  EXPECT_TRUE(allclose(dp(x).cpu(), (*ref)(x.to(reference)).cpu(), 1e-4, 1e-5));
}

TEST(DataParallel, TwoOpenCLDevicesMatchOneOnAnMLP) {
  NEED_DEVICES(Device("opencl:0"), Device("opencl:1"));
  expect_matches_one_device(make_mlp, {12}, {Device("opencl:0"), Device("opencl:1")}, cpu(), 9);
}

TEST(DataParallel, CpuAndOpenCLMatchOneDeviceOnAConvNet) {
  NEED_DEVICES(Device("opencl:0"));
  expect_matches_one_device(make_convnet, {1, 8, 8}, {cpu(), Device("opencl:0")}, Device("opencl:0"), 8);
}

TEST(DataParallel, TwoOpenCLDevicesMatchOneOnAConvNet) {
  NEED_DEVICES(Device("opencl:0"), Device("opencl:1"));
  expect_matches_one_device(make_convnet, {1, 8, 8}, {Device("opencl:0"), Device("opencl:1")}, cpu(), 10);
}

TEST(DataParallel, OneDeviceIsPlainTraining) { expect_matches_one_device(make_mlp, {12}, {cpu()}, cpu(), 7); }

TEST(DataParallel, BatchSmallerThanTheDeviceCountAndGradModeKept) {
  NEED_DEVICES(Device("opencl:0"));
  nn::DataParallel dp(make_mlp, {cpu(), Device("opencl:0")});
  NoGradGuard no_grad;  // the caller's mode is left alone
  const auto r = dp.train_step(randn({1, 12}), randint(0, 5, {1}), nn::cross_entropy);
  EXPECT_FALSE(is_grad_enabled());
  EXPECT_EQ(r.output.shape(), (Shape{1, 5}));
  EXPECT_TRUE(dp.parameters()[0].grad().defined());
}

TEST(DataParallel, BuffersAreTheMastersAndReachEveryReplica) {
  NEED_DEVICES(Device("opencl:0"));
  auto factory = [] { return std::make_shared<nn::Sequential>(nn::Linear(3, 4), nn::BatchNorm1d(4)); };
  nn::DataParallel dp(factory, {Device("opencl:0"), cpu()});
  manual_seed(5);
  const Tensor x = randn({8, 3});
  dp.train_step(x, randn({8, 4}), nn::mse_loss);
  // The master saw the first 4 samples: its running mean is 0.1 * their mean.
  const auto master = dp.module().state_dict();
  const Tensor h = dp.module().named_children()[0].second->forward(x.narrow(0, 0, 4).to(Device("opencl:0")));
  EXPECT_TRUE(allclose(master.at("1.running_mean").cpu(), (h.detach().mean({0}) * 0.1f).cpu(), 1e-5, 1e-6));
  dp.sync_replicas();
  EXPECT_TRUE(equal(dp.replica(1).state_dict().at("1.running_mean"), master.at("1.running_mean").cpu()));
  EXPECT_EQ(dp.replica(1).state_dict().at("1.num_batches_tracked").item<std::int64_t>(), 1);
}

TEST(DataParallel, TypedErrors) {
  EXPECT_THROW(nn::DataParallel(make_mlp, {}), ValueError);
  EXPECT_THROW(nn::DataParallel(make_mlp, {cpu(), cpu()}), ValueError);
  EXPECT_THROW(nn::DataParallel(nullptr, {cpu()}), ValueError);
  EXPECT_THROW(nn::DataParallel([] { return std::shared_ptr<nn::Module>(); }, {cpu()}), ValueError);
  if (have({Device("opencl:0")})) {
    int calls = 0;
    auto differing = [&calls]() -> std::shared_ptr<nn::Module> { return std::make_shared<nn::Linear>(4, ++calls); };
    try {
      nn::DataParallel dp(differing, {cpu(), Device("opencl:0")});
      ADD_FAILURE() << "expected ValueError";
    } catch (const ValueError& e) {
      EXPECT_NE(std::string(e.what()).find("differ"), std::string::npos) << e.what();
    }
  } else if (anvil::testing::required_device_types().count(DeviceType::OpenCL) > 0) {
    ADD_FAILURE() << "ANVIL_REQUIRE_DEVICES names opencl but there is no opencl:0: "
                  << device_unavailable_reason(DeviceType::OpenCL);
  }
  nn::DataParallel dp(make_mlp, {cpu()});
  EXPECT_THROW(dp.train_step(randn({4, 12}), randint(0, 5, {3}), nn::cross_entropy), ShapeError);
  EXPECT_THROW(dp.train_step(randn({0, 12}), randint(0, 5, {0}), nn::cross_entropy), ShapeError);
  EXPECT_THROW(dp.replica(1), IndexError);
}

}  // namespace
