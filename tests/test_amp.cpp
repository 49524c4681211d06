// Mixed precision (anvil/amp.h) on every device: which ops autocast lowers
// and which it keeps in f32, guard nesting, gradients reaching f32
// parameters, and GradScaler's skip / back-off / growth / exact unscaling.
#include <cmath>
#include <limits>
#include <vector>

#include "anvil/amp.h"
#include "anvil/nn.h"
#include "anvil/optim.h"
#include "device_test.h"
#include "ops/op_common.h"

namespace {

using namespace anvil;
using anvil::amp::AutocastGuard;
using anvil::amp::GradScaler;
using anvil::testing::DeviceTest;

class Amp : public DeviceTest {};

constexpr double kInf = std::numeric_limits<double>::infinity();

std::vector<float> values(const Tensor& t) { return t.to(f32).cpu().to_vector<float>(); }

// A device type other than `d`'s: a guard for it must leave `d` alone.
DeviceType other_type(Device d) { return d.is_cpu() ? DeviceType::OpenCL : DeviceType::CPU; }

TEST_P(Amp, LowerPrecisionOpsRunInTheGuardDtype) {
  const Device d = device();
  manual_seed(0);
  const Tensor a = randn({4, 8}, d), b = randn({8, 3}, d), bias = randn({3}, d);
  const Tensor x = randn({2, 3, 6, 6}, d), w = randn({4, 3, 3, 3}, d), cb = randn({4}, d);
  nn::Linear lin(8, 3);
  lin.to(d);
  for (DType low : {bf16, f16}) {
    AutocastGuard ac(d, low);
    EXPECT_EQ(matmul(a, b).dtype(), low) << low;
    EXPECT_EQ(mm(a, b).dtype(), low) << low;
    EXPECT_EQ(bmm(a.unsqueeze(0), b.unsqueeze(0)).dtype(), low) << low;
    EXPECT_EQ(addmm(bias, a, b).dtype(), low) << low;
    EXPECT_EQ(lin(a).dtype(), low) << low;
    EXPECT_EQ(lin(a.unsqueeze(0)).dtype(), low) << low;  // the matmul path of Linear
    EXPECT_EQ(conv2d(x, w, cb, {1, 1}, {1, 1}).dtype(), low) << low;
    // The product itself is the one of the cast inputs: nothing else changes.
    const std::vector<float> got = values(matmul(a, b));
    const std::vector<float> want = values(matmul(a.to(low), b.to(low)));
    EXPECT_EQ(got, want) << low;
  }
  // Every conv2d argument survives the cast: dilation and groups too.
  const Tensor wg = randn({4, 1, 3, 3}, d);
  for (DType low : {bf16, f16}) {
    const std::vector<float> want =
        values(conv2d(x.narrow(1, 0, 2).to(low), wg.to(low), cb.to(low), {2, 1}, {1, 2}, {2, 2}, 2));
    AutocastGuard ac(d, low);
    const Tensor got = conv2d(x.narrow(1, 0, 2), wg, cb, {2, 1}, {1, 2}, {2, 2}, 2);
    EXPECT_EQ(got.shape(), Shape({2, 4, 2, 6})) << low;
    EXPECT_EQ(values(got), want) << low;
  }
  // f64 is asked for on purpose: autocast leaves it alone, as PyTorch does.
  AutocastGuard ac(d, bf16);
  EXPECT_EQ(matmul(a.to(f64), b.to(f64)).dtype(), f64);
}

TEST_P(Amp, Fp32OpsComeOutF32) {
  const Device d = device();
  manual_seed(1);
  const Tensor a = randn({4, 8}, d), b = randn({8, 5}, d);
  const Tensor target = tensor(std::vector<std::int64_t>{0, 4, 2, 1}, d);
  // Outside the guard a 16-bit input keeps its dtype: the guard makes the difference.
  const Tensor h = a.to(bf16);
  EXPECT_EQ(sum(h).dtype(), bf16);
  EXPECT_EQ(softmax(h, 1).dtype(), bf16);
  for (DType low : {bf16, f16}) {
    AutocastGuard ac(d, low);
    const Tensor y = matmul(a, b);
    ASSERT_EQ(y.dtype(), low);
    EXPECT_EQ(sum(y).dtype(), f32) << low;
    EXPECT_EQ(mean(y).dtype(), f32) << low;
    EXPECT_EQ(prod(y, {1}).dtype(), f32) << low;
    EXPECT_EQ(norm(y).dtype(), f32) << low;
    EXPECT_EQ(logsumexp(y, {1}).dtype(), f32) << low;
    EXPECT_EQ(softmax(y, 1).dtype(), f32) << low;
    EXPECT_EQ(log_softmax(y, 1).dtype(), f32) << low;
    EXPECT_EQ(nn::cross_entropy(y, target).dtype(), f32) << low;
    EXPECT_EQ(nn::mse_loss(y, y * 0.5).dtype(), f32) << low;
    EXPECT_EQ(exp(y).dtype(), f32) << low;
    EXPECT_EQ(log(abs(y) + 1).dtype(), f32) << low;
    EXPECT_EQ(rsqrt(abs(y) + 1).dtype(), f32) << low;
    EXPECT_EQ(pow(y, 2.0).dtype(), f32) << low;
    EXPECT_EQ(sinh(y).dtype(), f32) << low;  // PyTorch's list has sinh and cosh, not asinh
    EXPECT_EQ(cosh(y).dtype(), f32) << low;
    EXPECT_EQ(asinh(y).dtype(), low) << low;
    // Every op of one tensor as its row in anvil/ops.def says.
    for (int i = 0; i < static_cast<int>(detail::UnaryOp::Count); ++i) {
      const auto op = static_cast<detail::UnaryOp>(i);
      const detail::op_table::UnaryRow& row = detail::row(op);
      const DType want = row.autocast == detail::AutocastPolicy::Fp32 ? f32
                         : row.rule == detail::UnaryRule::ToBool      ? DType::Bool
                                                                      : low;
      EXPECT_EQ(detail::unary_op(op, y, {-1, 1}).dtype(), want) << detail::name(op) << " " << low;
    }
    // Ops on neither list run in their input's dtype.
    EXPECT_EQ(relu(y).dtype(), low) << low;
    EXPECT_EQ((y + y).dtype(), low) << low;
    // The f32 op computes on the widened input: the same as widening by hand.
    EXPECT_EQ(values(softmax(y, 1)), values(softmax(y.to(f32), 1))) << low;
  }
}

TEST_P(Amp, GuardsNestAndRestore) {
  const Device d = device();
  const Tensor a = ones({2, 2}, d);
  const DeviceType type = d.type();
  EXPECT_FALSE(amp::is_autocast_enabled(type));
  EXPECT_EQ(matmul(a, a).dtype(), f32);
  {
    AutocastGuard outer(d, bf16);
    EXPECT_TRUE(amp::is_autocast_enabled(type));
    EXPECT_EQ(matmul(a, a).dtype(), bf16);
    {
      AutocastGuard inner(type, f16);
      EXPECT_EQ(amp::autocast_dtype(type), f16);
      EXPECT_EQ(matmul(a, a).dtype(), f16);
      {
        AutocastGuard off(d, f16, false);
        EXPECT_FALSE(amp::is_autocast_enabled(type));
        EXPECT_EQ(matmul(a, a).dtype(), f32);
      }
      EXPECT_EQ(matmul(a, a).dtype(), f16);
    }
    EXPECT_EQ(amp::autocast_dtype(type), bf16);
    EXPECT_EQ(matmul(a, a).dtype(), bf16);
  }
  EXPECT_FALSE(amp::is_autocast_enabled(type));
  EXPECT_EQ(matmul(a, a).dtype(), f32);
  // A guard for another device type does not touch this device's ops.
  AutocastGuard elsewhere(other_type(d), bf16);
  EXPECT_EQ(matmul(a, a).dtype(), f32);
  EXPECT_EQ(softmax(a.to(bf16), 1).dtype(), bf16);
}

TEST_P(Amp, NonFloatingDtypeIsAValueError) {
  const Device d = device();
  for (DType t : {i32, i64, u8, boolean, f64}) EXPECT_THROW(AutocastGuard(d, t), ValueError) << t;
  EXPECT_FALSE(amp::is_autocast_enabled(d.type()));
}

// The casts are differentiable to(dtype): the f32 parameters get f32
// gradients, equal to those of the same computation with the casts written out.
TEST_P(Amp, GradientsReachF32ParametersAsF32) {
  const Device d = device();
  for (DType low : {bf16, f16}) {
    manual_seed(2);
    nn::Sequential net{nn::Conv2d(1, 4, 3, 1, 1), nn::ReLU(), nn::Flatten(), nn::Linear(4 * 5 * 5, 3)};
    net.to(d);
    const Tensor x = randn({2, 1, 5, 5}, d);
    const Tensor target = tensor(std::vector<std::int64_t>{2, 0}, d);
    Tensor loss;
    {
      AutocastGuard ac(d, low);
      loss = nn::cross_entropy(net(x), target);
    }
    EXPECT_EQ(loss.dtype(), f32);
    loss.backward();
    std::vector<std::vector<float>> auto_grads;
    for (const Tensor& p : net.parameters()) {
      ASSERT_TRUE(p.grad().defined());
      EXPECT_EQ(p.dtype(), f32);
      EXPECT_EQ(p.grad().dtype(), f32) << low;
      auto_grads.push_back(values(p.grad()));
      p.set_grad(Tensor());
    }
    // By hand: every conv / linear operand cast to `low`, the loss in f32.
    const Tensor cw = net[0].weight(), cbias = net[0].bias(), lw = net[3].weight(), lbias = net[3].bias();
    const Tensor h = relu(conv2d(x.to(low), cw.to(low), cbias.to(low), {1, 1}, {1, 1})).flatten(1);
    const Tensor logits = addmm(lbias.to(low), h, lw.to(low).t());
    nn::cross_entropy(logits.to(f32), target).backward();
    std::size_t i = 0;
    for (const Tensor& p : net.parameters()) EXPECT_EQ(values(p.grad()), auto_grads[i++]) << low << " parameter " << i;
  }
}

TEST_P(Amp, GradScalerScalesTheLoss) {
  const Device d = device();
  GradScaler scaler;
  EXPECT_EQ(scaler.get_scale(), 65536.0);
  const Tensor loss = full({}, 0.75, d);
  EXPECT_EQ(scaler.scale(loss).item<double>(), 0.75 * 65536.0);
  GradScaler off({.enabled = false});
  EXPECT_TRUE(off.scale(loss).is_same(loss));
  EXPECT_EQ(off.get_scale(), 1.0);
}

// unscale_ divides each gradient by the scale exactly; the step that follows
// is the optimiser's own on the unscaled gradients.
TEST_P(Amp, GradScalerUnscalesExactly) {
  const Device d = device();
  const std::vector<float> g = {0.1f, -3.0f, 1e-6f, 2.5e3f}, w0 = {1.0f, 2.0f, -1.0f, 0.5f};
  Tensor w = tensor(w0, d).requires_grad_();
  Tensor bias = tensor(std::vector<float>{0.25f}, d).requires_grad_();
  optim::SGD opt({w, bias}, 0.5);
  GradScaler scaler({.init_scale = 1024.0});
  w.set_grad(tensor(g, d) * 1024.0);
  bias.set_grad(tensor(std::vector<float>{-4096.0f}, d));
  scaler.unscale_(opt);
  EXPECT_EQ(values(w.grad()), g);
  EXPECT_EQ(values(bias.grad()), std::vector<float>{-4.0f});
  EXPECT_TRUE(scaler.step(opt));
  std::vector<float> want(4);
  for (std::size_t i = 0; i < 4; ++i) want[i] = w0[i] - 0.5f * g[i];
  EXPECT_EQ(values(w), want);
  EXPECT_EQ(values(bias), std::vector<float>{0.25f + 2.0f});
  scaler.update();
  EXPECT_EQ(scaler.get_scale(), 1024.0);
  EXPECT_EQ(scaler.growth_tracker(), 1);
  // unscale_ twice in one step is a mistake (the gradients would shrink twice).
  w.set_grad(ones({4}, d));
  scaler.unscale_(opt);
  EXPECT_THROW(scaler.unscale_(opt), ValueError);
}

TEST_P(Amp, GradScalerSkipsAStepWithAnInfGradientAndBacksOff) {
  const Device d = device();
  for (double bad : {kInf, -kInf, std::nan("")}) {
    Tensor a = tensor(std::vector<float>{1.0f, 2.0f}, d).requires_grad_();
    Tensor b = tensor(std::vector<float>{3.0f}, d).requires_grad_();
    optim::SGD opt({a, b}, 0.1);
    GradScaler scaler({.init_scale = 256.0});
    a.set_grad(tensor(std::vector<float>{1.0f, 1.0f}, d));
    b.set_grad(full({1}, bad, d));  // one bad element among the parameters
    EXPECT_FALSE(scaler.step(opt)) << bad;
    EXPECT_EQ(values(a), (std::vector<float>{1.0f, 2.0f})) << "the step must be skipped for " << bad;
    EXPECT_EQ(values(b), std::vector<float>{3.0f});
    scaler.update();
    EXPECT_EQ(scaler.get_scale(), 128.0) << bad;
    EXPECT_EQ(scaler.growth_tracker(), 0);
  }
  GradScaler scaler;
  EXPECT_THROW(scaler.update(), ValueError);  // nothing was checked
}

TEST_P(Amp, GradScalerGrowsAfterGrowthIntervalCleanSteps) {
  const Device d = device();
  Tensor w = zeros({3}, d).requires_grad_();
  optim::SGD opt({w}, 0.1);
  GradScaler scaler({.init_scale = 8.0, .growth_interval = 3});
  auto step_with = [&](double g) {
    w.set_grad(full({3}, g, d));
    scaler.step(opt);
    scaler.update();
  };
  step_with(1.0);
  step_with(1.0);
  EXPECT_EQ(scaler.get_scale(), 8.0);
  EXPECT_EQ(scaler.growth_tracker(), 2);
  step_with(kInf);  // resets the count and halves
  EXPECT_EQ(scaler.get_scale(), 4.0);
  EXPECT_EQ(scaler.growth_tracker(), 0);
  step_with(1.0);
  step_with(1.0);
  EXPECT_EQ(scaler.get_scale(), 4.0);
  step_with(1.0);
  EXPECT_EQ(scaler.get_scale(), 8.0);
  EXPECT_EQ(scaler.growth_tracker(), 0);
  // The state a checkpoint keeps comes back.
  step_with(1.0);
  GradScaler restored;
  restored.load_state_dict(scaler.state_dict());
  EXPECT_EQ(restored.get_scale(), 8.0);
  EXPECT_EQ(restored.growth_tracker(), 1);
  EXPECT_THROW(restored.load_state_dict({}), ValueError);
}

// f16 training of a small net with the scaler: the loss falls, and the scale
// comes off 65536 only when a gradient overflowed f16 (a skipped step).
TEST_P(Amp, F16TrainingWithGradScalerLowersTheLoss) {
  const Device d = device();
  manual_seed(3);
  nn::Sequential net{nn::Linear(10, 32), nn::ReLU(), nn::Linear(32, 4)};
  net.to(d);
  const Tensor x = randn({64, 10}, d);
  const Tensor y = argmax(x.narrow(1, 0, 4), 1);
  optim::SGD opt(net.parameters(), 0.5);
  GradScaler scaler;
  double first = 0, last = 0;
  int skipped = 0;
  for (int it = 0; it < 60; ++it) {
    opt.zero_grad();
    Tensor loss;
    {
      AutocastGuard ac(d, f16);
      loss = nn::cross_entropy(net(x), y);
    }
    scaler.scale(loss).backward();
    skipped += scaler.step(opt) ? 0 : 1;
    scaler.update();
    const double l = loss.item<double>();
    if (it == 0) first = l;
    last = l;
  }
  EXPECT_LT(last, 0.5 * first);
  EXPECT_EQ(scaler.get_scale(), 65536.0 / std::pow(2.0, skipped));
}

ANVIL_INSTANTIATE_DEVICE_TEST(Amp);

}  // namespace
