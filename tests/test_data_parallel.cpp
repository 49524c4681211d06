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
  EXPECT_THROW(nn::DataParallel(nn::ModuleFactory(), {cpu()}), ValueError);
  EXPECT_THROW(nn::DataParallel(std::shared_ptr<nn::Module>(), {cpu()}), ValueError);
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

// --- forward through autograd: loss(dp(x), y).backward(); opt.step() ------------------

// Three SGD steps (momentum) three ways from the same initial weights: the
// book's loop through DataParallel's recorded forward, train_step, and one
// model on `reference` with the whole batch. `batch` not divisible by the
// device count makes an uneven last chunk.
void expect_backward_matches(const nn::ModuleFactory& factory, const Shape& input_shape,
                             const std::vector<Device>& devices, Device reference, std::int64_t batch) {
  manual_seed(7);
  std::shared_ptr<nn::Module> net = factory();
  auto ref = net->clone(reference);
  auto fast_net = net->clone();
  nn::DataParallel dp(net, devices);
  nn::DataParallel fast(fast_net, devices);
  ASSERT_EQ(&dp.module(), net.get());  // the master is the module given, moved
  for (std::size_t r = 0; r < devices.size(); ++r) EXPECT_EQ(dp.replica(r).devices(), std::vector<Device>{devices[r]});

  optim::SGD dp_opt(dp.parameters(), {.lr = 0.05, .momentum = 0.9});
  optim::SGD fast_opt(fast.parameters(), {.lr = 0.05, .momentum = 0.9});
  optim::SGD ref_opt(ref->parameters(), {.lr = 0.05, .momentum = 0.9});
  manual_seed(11);
  for (int step = 0; step < 3; ++step) {
    Shape xs = input_shape;
    xs.insert(0, batch);
    const Tensor x = randn(xs);
    const Tensor y = randint(0, 5, {batch});

    dp_opt.zero_grad();
    const Tensor out = dp(x);
    EXPECT_EQ(out.device(), devices[0]);
    if (devices.size() > 1) {
      EXPECT_EQ(out.grad_fn_name(), "CatBackward");  // the gather
    }
    const Tensor l = nn::cross_entropy(out, y.to(devices[0]));
    l.backward();
    dp_opt.step();

    fast_opt.zero_grad();
    fast.train_step(x, y, nn::cross_entropy);
    fast_opt.step();

    ref_opt.zero_grad();
    const Tensor ref_loss = nn::cross_entropy((*ref)(x.to(reference)), y.to(reference));
    ref_loss.backward();
    ref_opt.step();
    EXPECT_NEAR(l.item<float>(), ref_loss.item<float>(), 1e-5 * (1 + std::abs(ref_loss.item<float>())));

    const auto want = ref->named_parameters();
    const auto got = dp.module().named_parameters();
    const auto got_fast = fast.module().named_parameters();
    ASSERT_EQ(want.size(), got.size());
    for (std::size_t k = 0; k < want.size(); ++k) {
      EXPECT_TRUE(allclose(got[k].second.cpu(), want[k].second.cpu(), 1e-5, 1e-6))
          << "'" << want[k].first << "' after step " << step << ": "
          << (got[k].second.cpu() - want[k].second.cpu()).abs().max().item<float>();
      EXPECT_TRUE(allclose(got[k].second.cpu(), got_fast[k].second.cpu(), 1e-5, 1e-6))
          << "'" << want[k].first << "' after step " << step << " against train_step";
    }
    // Gradients reach the master alone: a replica's parameters are not leaves.
    for (std::size_t r = 1; r < dp.num_replicas(); ++r)
      for (const Tensor& p : dp.replica(r).parameters()) EXPECT_FALSE(p.grad().defined());
  }
}

TEST(DataParallelBackward, TwoOpenCLDevicesMatchOneOnAnMLP) {
  NEED_DEVICES(Device("opencl:0"), Device("opencl:1"));
  expect_backward_matches(make_mlp, {12}, {Device("opencl:0"), Device("opencl:1")}, cpu(), 9);
}

TEST(DataParallelBackward, TwoOpenCLDevicesMatchOneOnAConvNet) {
  NEED_DEVICES(Device("opencl:0"), Device("opencl:1"));
  expect_backward_matches(make_convnet, {1, 8, 8}, {Device("opencl:0"), Device("opencl:1")}, cpu(), 10);
}

TEST(DataParallelBackward, CpuAndOpenCLMatchOneDeviceWithAnUnevenBatch) {
  NEED_DEVICES(Device("opencl:0"));
  expect_backward_matches(make_convnet, {1, 8, 8}, {cpu(), Device("opencl:0")}, Device("opencl:0"), 7);
}

TEST(DataParallelBackward, OneDeviceIsPlainTraining) { expect_backward_matches(make_mlp, {12}, {cpu()}, cpu(), 6); }

TEST(DataParallelBackward, TheInputsGradientGathersBack) {
  NEED_DEVICES(Device("opencl:0"), Device("opencl:1"));
  manual_seed(3);
  auto net = make_mlp();
  auto ref = net->clone();
  nn::DataParallel dp(net, {Device("opencl:0"), Device("opencl:1")});
  const Tensor x = randn({5, 12}).requires_grad_();
  const Tensor x_ref = x.detach().clone().requires_grad_();
  dp(x).square().sum().backward();
  (*ref)(x_ref).square().sum().backward();
  ASSERT_TRUE(x.grad().defined());
  EXPECT_EQ(x.grad().device(), cpu());
  EXPECT_TRUE(allclose(x.grad(), x_ref.grad(), 1e-4, 1e-5));
}

TEST(DataParallelBackward, NoGradForwardRecordsNothing) {
  NEED_DEVICES(Device("opencl:0"));
  nn::DataParallel dp(make_mlp(), {cpu(), Device("opencl:0")});
  NoGradGuard no_grad;
  const Tensor out = dp(randn({4, 12}));
  EXPECT_FALSE(out.requires_grad());
  EXPECT_THROW(out.sum().backward(), ValueError);
}

// As PyTorch's DataParallel: the master runs the first chunk and keeps its
// own BatchNorm updates; the other replicas' updates are overwritten by the
// next copy from the master.
TEST(DataParallelBackward, BatchNormStatisticsAreTheFirstChunks) {
  NEED_DEVICES(Device("opencl:0"), Device("opencl:1"));
  auto net = std::make_shared<nn::Sequential>(nn::Linear(3, 4), nn::BatchNorm1d(4));
  auto probe = net->clone();
  nn::DataParallel dp(net, {Device("opencl:0"), Device("opencl:1")});
  manual_seed(5);
  const Tensor x = randn({8, 3});
  dp(x).square().mean().backward();
  const auto master = dp.module().state_dict();
  const Tensor h = probe->named_children()[0].second->forward(x.narrow(0, 0, 4)).detach();
  EXPECT_TRUE(allclose(master.at("1.running_mean").cpu(), h.mean({0}) * 0.1f, 1e-5, 1e-6));
  EXPECT_EQ(master.at("1.num_batches_tracked").item<std::int64_t>(), 1);
  // Replica 1 updated its own copy from the second chunk ...
  const Tensor h1 = probe->named_children()[0].second->forward(x.narrow(0, 4, 4)).detach();
  EXPECT_TRUE(allclose(dp.replica(1).state_dict().at("1.running_mean").cpu(), h1.mean({0}) * 0.1f, 1e-5, 1e-6));
  // ... which the next copy from the master replaces.
  dp.sync_replicas();
  EXPECT_TRUE(equal(dp.replica(1).state_dict().at("1.running_mean").cpu(), master.at("1.running_mean").cpu()));
}

TEST(DataParallelBackward, AModuleThatCannotCloneSaysHow) {
  struct Opaque : nn::Module {
    Tensor forward(const Tensor& x) override { return x; }
    std::string name() const override { return "Opaque()"; }
  };
  EXPECT_NO_THROW(nn::DataParallel(std::make_shared<Opaque>(), {cpu()}));  // one device: nothing to clone
  NEED_DEVICES(Device("opencl:0"));
  try {
    nn::DataParallel dp(std::make_shared<Opaque>(), {cpu(), Device("opencl:0")});
    ADD_FAILURE() << "expected NotSupported";
  } catch (const NotSupported& e) {
    EXPECT_NE(std::string(e.what()).find("clone: Opaque() does not know how to copy itself"), std::string::npos)
        << e.what();
  }
}

}  // namespace
