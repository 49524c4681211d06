// nn and optim: layer gradients (gradcheck through modules in f64), module
// identity across device moves, state_dict / safetensors round trips,
// optimiser updates, and a short end-to-end training run on Fashion-MNIST.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "anvil/autograd.h"
#include "anvil/data.h"
#include "anvil/nn.h"
#include "anvil/optim.h"
#include "core/backend.h"
#include "device_test.h"
#include "env_guard.h"
#include "ops/optimizer_step.h"

using namespace anvil;
using anvil::testing::EnvGuard;

namespace {
// Module parameters converted to f64 so gradcheck can drive them.
void to_f64(nn::Module& m) {
  NoGradGuard no_grad;
  for (const Tensor& p : m.parameters()) p.set_data(p.to(f64));
  for (const Tensor& b : m.buffers())
    if (is_floating(b.dtype())) b.set_data(b.to(f64));
}

// gradcheck of a module w.r.t. its input (parameters are checked through the
// functional ops in ParameterGradientsMatchFiniteDifferences).
void check_module(nn::Module& m, const Shape& in, Device d) {
  to_f64(m);
  m.to(d);
  const auto r =
      autograd::gradcheck([&](const std::vector<Tensor>& x) { return m(x[0]); }, {randn(in, d, f64).requires_grad_()});
  EXPECT_TRUE(r.ok) << m.name() << ": " << r.message;
}
}  // namespace

class NN : public anvil::testing::DeviceTest {};

TEST_P(NN, LayersPassGradcheckForTheirInput) {
  const Device d = device();
  if (!properties(d).fp64) GTEST_SKIP() << d << " has no f64; gradcheck needs float64";
  manual_seed(1);
  {
    nn::Linear m(4, 3);
    check_module(m, {2, 4}, d);
  }
  {
    nn::Conv2d m(2, 3, 3, 2, 1);
    check_module(m, {2, 2, 5, 5}, d);
  }
  {
    nn::Sequential m{nn::MaxPool2d(2), nn::AvgPool2d(2, 1), nn::Flatten(), nn::Tanh(), nn::Sigmoid(), nn::Softmax(1)};
    check_module(m, {2, 2, 6, 6}, d);
  }
  {
    nn::BatchNorm2d m(3);
    check_module(m, {4, 3, 2, 2}, d);
  }
  {
    nn::BatchNorm1d m(3);
    check_module(m, {5, 3}, d);
  }
}

TEST_P(NN, ParameterGradientsMatchFiniteDifferences) {
  const Device d = device();
  if (!properties(d).fp64) GTEST_SKIP() << d << " has no f64; gradcheck needs float64";
  // Parameters of Linear, Conv2d and BatchNorm through the functional ops
  // the layers run.
  const auto r = autograd::gradcheck(
      [](const std::vector<Tensor>& p) {
        Tensor y = conv2d(p[0], p[1], p[2], {1, 1}, {1, 1});
        y = relu(y).flatten(1);
        y = addmm(p[4], y, p[3].t());
        return batch_norm(y, {}, {}, p[5], p[6], true);
      },
      {randn({3, 1, 3, 3}, d, f64).requires_grad_(), randn({2, 1, 3, 3}, d, f64).requires_grad_(),
       randn({2}, d, f64).requires_grad_(), randn({4, 18}, d, f64).requires_grad_(),
       randn({4}, d, f64).requires_grad_(), randn({4}, d, f64).requires_grad_(), randn({4}, d, f64).requires_grad_()});
  EXPECT_TRUE(r.ok) << r.message;
}

// batch_norm's own gradient rule (Note [Batch norm's gradient]) against
// finite differences, in training and in evaluation, with and without the
// affine parameters; its running statistics; 16-bit inputs; its errors.
TEST_P(NN, BatchNormGradientsStatisticsAndErrors) {
  const Device d = device();
  if (!properties(d).fp64) GTEST_SKIP() << d << " has no f64; gradcheck needs float64";
  manual_seed(5);
  const Tensor rm = randn({3}, d, f64), rv = rand({3}, d, f64) + 0.5;
  for (const bool training : {true, false}) {
    for (const Shape& shape : {Shape{4, 3, 2, 5}, Shape{6, 3}, Shape{2, 3, 4}}) {
      SCOPED_TRACE(::testing::Message() << (training ? "training " : "evaluation ") << shape);
      const auto affine = autograd::gradcheck(
          [&](const std::vector<Tensor>& p) { return batch_norm(p[0], rm.clone(), rv.clone(), p[1], p[2], training); },
          {randn(shape, d, f64).requires_grad_(), randn({3}, d, f64).requires_grad_(),
           randn({3}, d, f64).requires_grad_()});
      EXPECT_TRUE(affine.ok) << affine.message;
      const auto plain = autograd::gradcheck(
          [&](const std::vector<Tensor>& p) { return batch_norm(p[0], rm.clone(), rv.clone(), {}, {}, training); },
          {randn(shape, d, f64).requires_grad_()});
      EXPECT_TRUE(plain.ok) << plain.message;
    }
  }

  // Training moves the running statistics by momentum towards the batch's,
  // the variance unbiased; evaluation leaves them alone.
  const Tensor x = randn({5, 3, 4}, d, f64);
  Tensor run_mean = rm.clone(), run_var = rv.clone();
  const Tensor y = batch_norm(x, run_mean, run_var, {}, {}, true, 0.25);
  const Tensor mu = mean(x, {0, 2}), unbiased = var(x, {0, 2});
  EXPECT_TRUE(allclose(run_mean, rm * 0.75 + mu * 0.25));
  EXPECT_TRUE(allclose(run_var, rv * 0.75 + unbiased * 0.25));
  EXPECT_TRUE(allclose(mean(y, {0, 2}), zeros({3}, d, f64), 1e-6, 1e-9));
  batch_norm(x, run_mean, run_var, {}, {}, false);
  EXPECT_TRUE(allclose(run_mean, rm * 0.75 + mu * 0.25));

  // 16-bit inputs compute in f32 and keep their dtype.
  for (const DType t : {f16, bf16}) {
    const Tensor xh = x.to(t);
    const Tensor yh = batch_norm(xh, {}, {}, ones({3}, d, t), zeros({3}, d, t), true);
    EXPECT_EQ(yh.dtype(), t);
    EXPECT_TRUE(allclose(yh.to(f64), batch_norm(xh.to(f32), {}, {}, {}, {}, true).to(t).to(f64)));
  }

  EXPECT_THROW(batch_norm(x, {}, {}, ones({4}, d, f64), {}, true), ShapeError);
  EXPECT_THROW(batch_norm(x, rm, {}, {}, {}, false), ValueError);
  EXPECT_THROW(batch_norm(x.sum(), {}, {}, {}, {}, true), ShapeError);
  EXPECT_THROW(batch_norm(x.to(i64), {}, {}, {}, {}, true), DTypeError);
  if (d != cpu()) {
    EXPECT_THROW(batch_norm(x, rm.cpu(), rv.cpu(), {}, {}, false), DeviceMismatch);
  }
  EXPECT_TRUE(batch_norm(x, rm, rv, {}, {}, false).defined());  // usable after the errors
}

// Note [Fused batch norm]: where the backend has the fused kernels (every
// floating dtype; f16 and bf16 inputs with f32 per-channel operands),
// batch_norm's output, running statistics and gradients agree with the
// composite's (ANVIL_NO_FUSED=1), over short rows (S < 64), rows longer
// than a summing block, S = 1, a non-contiguous input, in training and in
// evaluation, with and without the affine parameters.
TEST_P(NN, FusedBatchNormMatchesComposite) {
  const Device d = device();
  // The CPU's kernels and the shared device kernels (norm.kern) both take
  // batch norm, so on those the comparison below is of the fused path: it
  // cannot pass by running the composite twice. f64 where the device has
  // it.
  detail::Backend* backend = detail::backend_for(d.type());
  const int index = d.index();
  if (d.type() == DeviceType::CPU || d.type() == DeviceType::OpenCL || d.type() == DeviceType::CUDA) {
    ASSERT_TRUE(backend->supports_fused(detail::FusedOp::BatchNorm, f32, index)) << d;
  }
  if (backend->supports_fused(detail::FusedOp::BatchNorm, f32, index)) {
    for (const detail::FusedOp op : {detail::FusedOp::BatchNorm, detail::FusedOp::BatchNormBackward}) {
      EXPECT_TRUE(backend->supports_fused(op, f32, index)) << d;
      EXPECT_EQ(backend->supports_fused(op, f64, index), properties(d).fp64) << d;
      EXPECT_TRUE(backend->supports_fused(op, f16, index)) << d;
      EXPECT_TRUE(backend->supports_fused(op, bf16, index)) << d;
    }
  }
  // ANVIL_NORM_PARTS=3: norm.kern's split pass (each channel's sums from
  // three work-groups, a GPU's path for large maps) on every device type.
  for (const char* parts : {static_cast<const char*>(nullptr), "3"}) {
    EnvGuard split("ANVIL_NORM_PARTS", parts);
    for (const DType t : {f32, f64, f16, bf16}) {
      if (t == f64 && !properties(d).fp64) continue;
      const DType pt = is_half(t) ? f32 : t;  // the per-channel operands'
      for (const Shape& shape : {Shape{8, 5, 30}, Shape{2, 3, 1100}, Shape{6, 4}, Shape{3, 4}, Shape{3, 2, 5, 70}}) {
        for (const bool training : {true, false}) {
          for (const bool affine : {true, false}) {
            for (const bool transposed : {false, true}) {
              SCOPED_TRACE(::testing::Message()
                           << t << " " << shape << (training ? " training" : " evaluation") << (affine ? " affine" : "")
                           << (transposed ? " transposed" : "") << (parts ? " in 3 parts" : ""));
              manual_seed(11);
              const std::int64_t c = shape[1];
              const int last = shape.size() - 1;
              // A transposed input: the same shape, laid out with N innermost.
              Shape stored = shape;
              if (transposed) std::swap(stored[0], stored[last]);
              const Tensor x0 = randn(stored, d, t) * 3.0 + 1.5;
              const Tensor w0 = randn({c}, d, pt), b0 = randn({c}, d, pt), g = randn(shape, d, t);
              const Tensor rm0 = randn({c}, d, pt), rv0 = rand({c}, d, pt) + 0.5;
              const auto run = [&](bool fused) {
                EnvGuard env("ANVIL_NO_FUSED", fused ? nullptr : "1");
                Tensor x = x0.clone().requires_grad_();
                const Tensor xin = transposed ? x.transpose(0, last) : x;
                Tensor w = w0.clone().requires_grad_(), b = b0.clone().requires_grad_();
                Tensor rm = rm0.clone(), rv = rv0.clone();
                const Tensor y = affine ? batch_norm(xin, rm, rv, w, b, training, 0.3)
                                        : batch_norm(xin, rm, rv, {}, {}, training, 0.3);
                y.backward(g);
                return std::vector<Tensor>{
                    y.detach(), rm, rv, x.grad(), affine ? w.grad() : Tensor{}, affine ? b.grad() : Tensor{}};
              };
              const auto fused = run(true), composite = run(false);
              // 16-bit outputs: both round an f32 result once, from sums
              // added in different orders.
              const double tol = t == f32 ? 2e-4 : t == f64 ? 1e-10 : t == f16 ? 1e-2 : 4e-2;
              const char* names[] = {"output", "running_mean", "running_var", "x.grad", "weight.grad", "bias.grad"};
              for (std::size_t i = 0; i < fused.size(); ++i) {
                if (!composite[i].defined()) continue;
                ASSERT_TRUE(fused[i].defined()) << names[i];
                EXPECT_TRUE(allclose(fused[i], composite[i], tol, tol)) << names[i];
              }
            }
          }
        }
      }
    }
  }
  // Only the parameters want gradients: no input gradient is computed, and
  // the bias's is the count of each channel, the weight's ~0 for sum().
  const Tensor x = randn({4, 3, 10}, d);
  Tensor w = ones({3}, d).requires_grad_(), b = zeros({3}, d).requires_grad_();
  batch_norm(x, {}, {}, w, b, true).sum().backward();
  EXPECT_TRUE(allclose(b.grad(), full({3}, 40.0, d)));
  EXPECT_TRUE(allclose(w.grad(), zeros({3}, d), 1e-5, 1e-4));
}

// batch_norm's fused epilogue (issue 38 item 4): relu?(bn(x) + residual?)
// in one call agrees with the unfused composition of batch_norm, add and
// relu, in value, running statistics and every gradient (x, weight, bias,
// residual), in training and evaluation, every floating dtype, the one-pass
// and the split (ANVIL_NO_FUSED unset, ANVIL_NORM_PARTS=3) kernels and the
// composite (ANVIL_NO_FUSED=1). Both round bn(x) to the dtype before the add
// and share the batch-norm arithmetic, so they should agree to rounding.
TEST_P(NN, FusedBatchNormEpilogueMatchesUnfusedComposition) {
  const Device d = device();
  for (const char* parts : {static_cast<const char*>(nullptr), "3"}) {
    EnvGuard split("ANVIL_NORM_PARTS", parts);
    for (const DType t : {f32, f64, f16, bf16}) {
      if (t == f64 && !properties(d).fp64) continue;
      const DType pt = is_half(t) ? f32 : t;
      for (const Shape& shape : {Shape{8, 5, 30}, Shape{2, 3, 1100}, Shape{6, 4}, Shape{3, 2, 5, 7}}) {
        for (const bool training : {true, false}) {
          for (const bool with_residual : {true, false}) {
            for (const bool relu : {true, false}) {
              if (!with_residual && !relu) continue;  // FusedBatchNormMatchesComposite's case
              SCOPED_TRACE(::testing::Message() << t << " " << shape << (training ? " training" : " evaluation")
                                                << (with_residual ? " residual" : "") << (relu ? " relu" : "")
                                                << (parts ? " in 3 parts" : ""));
              manual_seed(12);
              const std::int64_t c = shape[1];
              const Tensor x0 = randn(shape, d, t) * 3.0 + 1.5, r0 = randn(shape, d, t) * 2.0;
              const Tensor w0 = randn({c}, d, pt), b0 = randn({c}, d, pt), g = randn(shape, d, t);
              const Tensor rm0 = randn({c}, d, pt), rv0 = rand({c}, d, pt) + 0.5;
              const Activation act = relu ? Activation::ReLU : Activation::None;
              // 0: one fused call; 1: batch_norm, then add and relu as ops;
              // 2: one call on the composite path (ANVIL_NO_FUSED=1).
              const auto run = [&](int how) {
                EnvGuard env("ANVIL_NO_FUSED", how == 2 ? "1" : nullptr);
                Tensor x = x0.clone().requires_grad_(), r = r0.clone().requires_grad_();
                Tensor w = w0.clone().requires_grad_(), b = b0.clone().requires_grad_();
                Tensor rm = rm0.clone(), rv = rv0.clone();
                const Tensor res = with_residual ? r : Tensor{};
                Tensor y;
                if (how == 1) {
                  y = batch_norm(x, rm, rv, w, b, training, 0.3);
                  if (with_residual) y = y + r;
                  if (relu) y = anvil::relu(y);
                } else {
                  y = batch_norm(x, rm, rv, w, b, training, 0.3, 1e-5, res, act);
                }
                y.backward(g);
                return std::vector<Tensor>{
                    y.detach(), rm, rv, x.grad(), w.grad(), b.grad(), with_residual ? r.grad() : Tensor{}};
              };
              const auto fused = run(0), unfused = run(1), composite = run(2);
              const double tol = t == f32 ? 2e-4 : t == f64 ? 1e-10 : t == f16 ? 1e-2 : 4e-2;
              const char* names[] = {"output",      "running_mean", "running_var",  "x.grad",
                                     "weight.grad", "bias.grad",    "residual.grad"};
              for (std::size_t i = 0; i < fused.size(); ++i) {
                if (!unfused[i].defined()) continue;
                ASSERT_TRUE(fused[i].defined()) << names[i];
                ASSERT_TRUE(composite[i].defined()) << names[i];
                // Against the unfused ops on the same kernels: to rounding
                // (the sums the same, so far tighter than the tolerance).
                EXPECT_TRUE(allclose(fused[i], unfused[i], tol / 10, tol / 10)) << names[i] << " against unfused";
                EXPECT_TRUE(allclose(composite[i], unfused[i], tol, tol)) << names[i] << " composite";
              }
              if (relu) {
                EXPECT_EQ(lt(fused[0], 0.0).sum().item<double>(), 0.0);
              }
            }
          }
        }
      }
    }
  }
  // Only the residual wants a gradient: the masked grad alone.
  const Tensor x = randn({4, 3, 10}, d), r = randn({4, 3, 10}, d).requires_grad_();
  const Tensor y = batch_norm(x, {}, {}, {}, {}, true, 0.1, 1e-5, r, Activation::ReLU);
  y.sum().backward();
  EXPECT_TRUE(equal(r.grad(), gt(y.detach(), 0.0).to(f32)));
}

// The fused epilogue's bad input: a typed error naming batch_norm.
TEST_P(NN, FusedBatchNormEpilogueRejectsBadResidual) {
  const Device d = device();
  const Tensor x = randn({4, 3, 5}, d);
  const auto message_of = [&](const Tensor& r) {
    try {
      batch_norm(x, {}, {}, {}, {}, true, 0.1, 1e-5, r, Activation::ReLU);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_THROW(batch_norm(x, {}, {}, {}, {}, true, 0.1, 1e-5, randn({4, 3, 6}, d)), ShapeError);
  EXPECT_THROW(batch_norm(x, {}, {}, {}, {}, true, 0.1, 1e-5, randn({4, 3, 5}, d, f64)), DTypeError);
  EXPECT_NE(message_of(randn({4, 3, 6}, d)).find("batch_norm: residual must have the input's shape"),
            std::string::npos);
  if (d.type() != DeviceType::CPU) {
    EXPECT_THROW(batch_norm(x, {}, {}, {}, {}, true, 0.1, 1e-5, randn({4, 3, 5}), Activation::ReLU), DeviceMismatch);
  }
  EXPECT_THROW(batch_norm(x, {}, {}, {}, {}, true, 0.1, 1e-5, {}, static_cast<Activation>(7)), ValueError);
}

namespace {
std::vector<double> host_f64(const Tensor& t) {
  const Tensor h = t.to(cpu()).to(f64).contiguous();
  const double* p = h.data_ptr<double>();
  return std::vector<double>(p, p + h.numel());
}

void check_window_ops(Device d, DType t, double tol) {
  manual_seed(3);
  const std::int64_t n = 2, c = 3, h = 8, w = 9, o = 4, kh = 3, kw = 2;
  // Distinct multiples of 1/64 below 4 in magnitude, exact in every dtype
  // here: no two candidates of a pool's window tie, whatever the rounding.
  std::vector<float> distinct(static_cast<std::size_t>(n * c * h * w));
  for (std::size_t k = 0; k < distinct.size(); ++k)
    distinct[k] = static_cast<float>(static_cast<std::int64_t>(k) - n * c * h * w / 2) / 64.0f;
  std::shuffle(distinct.begin(), distinct.end(), std::mt19937(3));
  const Tensor base = tensor(distinct, {n, c, w, h}, d, t);
  const Tensor x = base.transpose(2, 3);  // [n, c, h, w], strided
  const Tensor wt = randn({o, c, kh, kw}, d).to(t), b = randn({o}, d).to(t);
  const std::vector<double> xs = host_f64(x), ws = host_f64(wt), bs = host_f64(b);
  auto at = [&](std::int64_t ni, std::int64_t ci, std::int64_t i, std::int64_t j) {
    return xs[static_cast<std::size_t>(((ni * c + ci) * h + i) * w + j)];
  };

  {  // conv2d, stride {2, 1}, padding {1, 2}
    const std::int64_t sh = 2, sw = 1, ph = 1, pw = 2;
    const Tensor y = conv2d(x, wt, b, {sh, sw}, {ph, pw});
    const std::int64_t oh = (h + 2 * ph - kh) / sh + 1, ow = (w + 2 * pw - kw) / sw + 1;
    ASSERT_EQ(y.shape(), Shape({n, o, oh, ow}));
    const std::vector<double> ys = host_f64(y);
    for (std::int64_t ni = 0; ni < n; ++ni)
      for (std::int64_t oi = 0; oi < o; ++oi)
        for (std::int64_t p = 0; p < oh; ++p)
          for (std::int64_t q = 0; q < ow; ++q) {
            double acc = bs[static_cast<std::size_t>(oi)], magnitude = std::abs(acc);
            for (std::int64_t ci = 0; ci < c; ++ci)
              for (std::int64_t i = 0; i < kh; ++i)
                for (std::int64_t j = 0; j < kw; ++j) {
                  const std::int64_t ih = p * sh - ph + i, iw = q * sw - pw + j;
                  if (ih >= 0 && ih < h && iw >= 0 && iw < w) {
                    const double term =
                        ws[static_cast<std::size_t>(((oi * c + ci) * kh + i) * kw + j)] * at(ni, ci, ih, iw);
                    acc += term;
                    magnitude += std::abs(term);
                  }
                }
            const double got = ys[static_cast<std::size_t>(((ni * o + oi) * oh + p) * ow + q)];
            ASSERT_NEAR(got, acc, tol * (1 + magnitude))
                << "conv2d at [" << ni << ", " << oi << ", " << p << ", " << q << "]";
          }
  }

  {  // max_pool2d, kernel {3, 2}, stride {2, 1}, padding {1, 1}; gradient of sum(y * coeff)
    const std::int64_t ph = 3, pw = 2, sh = 2, sw = 1, pph = 1, ppw = 1;
    const Tensor xg = x.detach().requires_grad_();
    const Tensor y = max_pool2d(xg, {ph, pw}, {sh, sw}, {pph, ppw});
    const std::int64_t oh = (h + 2 * pph - ph) / sh + 1, ow = (w + 2 * ppw - pw) / sw + 1;
    ASSERT_EQ(y.shape(), Shape({n, c, oh, ow}));
    const Tensor coeff = randn({n, c, oh, ow}, d).to(t);
    (y * coeff).sum().backward();
    const std::vector<double> ys = host_f64(y), cs = host_f64(coeff), gs = host_f64(xg.grad());
    std::vector<double> expect(static_cast<std::size_t>(n * c * h * w), 0.0), magnitude(expect.size(), 0.0);
    for (std::int64_t ni = 0; ni < n; ++ni)
      for (std::int64_t ci = 0; ci < c; ++ci)
        for (std::int64_t p = 0; p < oh; ++p)
          for (std::int64_t q = 0; q < ow; ++q) {
            double best = -INFINITY;
            std::int64_t where = -1;
            for (std::int64_t i = 0; i < ph; ++i)
              for (std::int64_t j = 0; j < pw; ++j) {
                const std::int64_t ih = p * sh - pph + i, iw = q * sw - ppw + j;
                if (ih >= 0 && ih < h && iw >= 0 && iw < w && at(ni, ci, ih, iw) > best) {
                  best = at(ni, ci, ih, iw);
                  where = ((ni * c + ci) * h + ih) * w + iw;
                }
              }
            const std::size_t k = static_cast<std::size_t>(((ni * c + ci) * oh + p) * ow + q);
            ASSERT_EQ(ys[k], best) << "max_pool2d at [" << ni << ", " << ci << ", " << p << ", " << q << "]";
            expect[static_cast<std::size_t>(where)] += cs[k];
            magnitude[static_cast<std::size_t>(where)] += std::abs(cs[k]);
          }
    for (std::size_t k = 0; k < expect.size(); ++k)
      ASSERT_NEAR(gs[k], expect[k], tol * magnitude[k]) << "max_pool2d grad at " << k;
  }
}
}  // namespace

// conv2d and max_pool2d (forward, and max-pool's gradient routing) against
// plain loops, in f32, f16 and bf16 (what autocast runs them in) on a strided
// input with padding and stride: whichever path the device takes (fused
// kernels or the composites) must agree. The reference takes the inputs as
// rounded to the dtype; a 16-bit sum may be off by a rounding or two of the
// dtype's epsilon times the sum of its terms' magnitudes.
TEST_P(NN, WindowOpsMatchPlainLoops) {
  for (DType t : {f32, f16, bf16}) {
    SCOPED_TRACE(::testing::Message() << t);
    check_window_ops(device(), t, t == f32 ? 1e-4 : t == f16 ? 0x1p-10 : 0x1p-7);
  }
}

// The 2×2, stride-2 pool (LeNet's, the book's) against plain loops, on the
// layouts its CPU kernel tells apart: contiguous planes pooled many at a time
// (with several runs of planes), odd heights and widths (a row or column
// left over), a transposed and a channel-sliced input. Values are small
// integers with NaNs, so windows tie, and NaN wins its window (PyTorch's
// rule). The gradient of sum(y * coeff) goes to the first maximum in
// row-major order (the fused kernels, as PyTorch), or is shared evenly by
// the tied maxima (the composite path under ANVIL_NO_FUSED=1,
// rules_nn.cpp); a NaN window's goes to its NaNs.
TEST_P(NN, MaxPool2x2TiesNanAndLayouts) {
  const Device d = device();
  const char* no_fused = std::getenv("ANVIL_NO_FUSED");
  const bool ties_share = no_fused != nullptr && std::string(no_fused) == "1";
  struct Case {
    const char* name;
    std::function<Tensor(const Tensor&)> view;  // of a contiguous base
    Shape base;
  };
  const std::vector<Case> cases = {
      {"contiguous", [](const Tensor& b) { return b; }, {3, 5, 8, 6}},
      {"many planes", [](const Tensor& b) { return b; }, {2, 150, 6, 8}},
      {"odd height", [](const Tensor& b) { return b; }, {2, 3, 7, 6}},
      {"odd width", [](const Tensor& b) { return b; }, {2, 3, 6, 7}},
      {"transposed", [](const Tensor& b) { return b.transpose(2, 3); }, {2, 3, 8, 6}},
      {"channel slice", [](const Tensor& b) { return b.slice(1, 1, 3); }, {2, 4, 6, 8}},
  };
  std::mt19937 rng(5);
  for (DType t : {f32, f64, f16, bf16})
    for (const Case& c : cases) {
      SCOPED_TRACE(::testing::Message() << t << ' ' << c.name);
      std::vector<float> values(static_cast<std::size_t>(c.base.numel()));
      for (float& v : values) v = rng() % 16 == 0 ? NAN : static_cast<float>(static_cast<int>(rng() % 5) - 2);
      const Tensor x = c.view(tensor(values, c.base, d, t)).detach().requires_grad_();
      const std::int64_t n = x.size(0), ch = x.size(1), h = x.size(2), w = x.size(3), oh = h / 2, ow = w / 2;
      const Tensor y = max_pool2d(x, {2, 2}, {2, 2});
      ASSERT_EQ(y.shape(), Shape({n, ch, oh, ow}));
      std::vector<float> coeffs(static_cast<std::size_t>(n * ch * oh * ow));
      for (std::size_t k = 0; k < coeffs.size(); ++k) coeffs[k] = static_cast<float>(k % 7 + 1);
      (y * tensor(coeffs, y.shape(), d, t)).sum().backward();
      const std::vector<double> xs = host_f64(x), ys = host_f64(y), gs = host_f64(x.grad());
      std::vector<double> expect(xs.size(), 0.0);
      for (std::int64_t plane = 0; plane < n * ch; ++plane)
        for (std::int64_t p = 0; p < oh; ++p)
          for (std::int64_t q = 0; q < ow; ++q) {
            std::vector<std::size_t> window;
            for (std::int64_t i = 0; i < 2; ++i)
              for (std::int64_t j = 0; j < 2; ++j)
                window.push_back(static_cast<std::size_t>((plane * h + 2 * p + i) * w + 2 * q + j));
            std::size_t first = window[0];
            for (std::size_t at : window)
              if (!(xs[at] <= xs[first]) && !std::isnan(xs[first])) first = at;
            const auto k = static_cast<std::size_t>((plane * oh + p) * ow + q);
            const bool nan = std::isnan(xs[first]);
            if (nan)
              ASSERT_TRUE(std::isnan(ys[k])) << "at output " << k;
            else
              ASSERT_EQ(ys[k], xs[first]) << "at output " << k;
            std::vector<std::size_t> takers{first};
            if (ties_share) {
              takers.clear();
              for (std::size_t at : window)
                if (nan ? std::isnan(xs[at]) : xs[at] == xs[first]) takers.push_back(at);
            }
            for (std::size_t at : takers) expect[at] += coeffs[k] / static_cast<double>(takers.size());
          }
      // The first-maximum rule moves whole coefficients: exact. Shared ones
      // are quotients, rounded to the dtype.
      const double tol = !ties_share ? 0.0 : t == f64 ? 1e-12 : t == f32 ? 1e-6 : t == f16 ? 0x1p-9 : 0x1p-6;
      for (std::size_t k = 0; k < expect.size(); ++k)
        ASSERT_NEAR(gs[k], expect[k], tol * std::abs(expect[k])) << "gradient at input " << k;
    }
}

TEST_P(NN, MoveKeepsParameterIdentityAndOptimiserWorks) {
  const Device d = device();
  nn::Sequential net{nn::Linear(3, 4), nn::ReLU(), nn::Linear(4, 2), nn::BatchNorm1d(2)};
  const std::vector<Tensor> before = net.parameters();
  optim::SGD opt(net.parameters(), {.lr = 0.1, .momentum = 0.9});
  net.to(d);
  const std::vector<Tensor> after = net.parameters();
  ASSERT_EQ(before.size(), after.size());
  for (std::size_t i = 0; i < before.size(); ++i) {
    EXPECT_TRUE(before[i].is_same(after[i]));
    EXPECT_EQ(before[i].device(), d);
    EXPECT_TRUE(before[i].requires_grad());
  }
  EXPECT_EQ(net[0].weight().device(), d);
  EXPECT_EQ(net.devices(), std::vector<Device>{d});
  for (const Tensor& b : net.buffers()) EXPECT_EQ(b.device(), d);
  const Tensor y = net(randn({5, 3}, d));
  EXPECT_EQ(y.device(), d);
  const Tensor w0 = net[0].weight().clone();
  // Not y.sum(): a training-mode BatchNorm's outputs sum to N * bias whatever
  // the weights, so that gradient is zero and the step would not move them.
  (y * y).sum().backward();
  opt.step();
  EXPECT_FALSE(allclose(net[0].weight(), w0));
  EXPECT_THROW(net[1].weight(), ValueError);
  EXPECT_THROW(net[9], IndexError);
}

TEST_P(NN, StateDictAndSafetensorsRoundTrip) {
  const Device d = device();
  manual_seed(3);
  nn::Sequential a{nn::Conv2d(1, 2, 3), nn::BatchNorm2d(2), nn::Flatten(), nn::Linear(8, 3)};
  nn::Sequential b{nn::Conv2d(1, 2, 3), nn::BatchNorm2d(2), nn::Flatten(), nn::Linear(8, 3)};
  a.to(d);
  a(randn({2, 1, 4, 4}, d));  // updates BatchNorm's running statistics
  b.load_state_dict(a.state_dict());
  for (const auto& [k, t] : a.state_dict()) EXPECT_TRUE(equal(t.cpu(), b.state_dict().at(k).cpu())) << k;
  EXPECT_EQ(b.devices(), std::vector<Device>{cpu()});  // loaded onto b's own device

  const std::string path = (std::filesystem::temp_directory_path() / "anvil_test_nn.safetensors").string();
  a.save(path);
  nn::Sequential c{nn::Conv2d(1, 2, 3), nn::BatchNorm2d(2), nn::Flatten(), nn::Linear(8, 3)};
  const Tensor w = c[0].weight();
  c.load(path, d);
  EXPECT_TRUE(w.is_same(c[0].weight()));
  EXPECT_EQ(c.devices(), std::vector<Device>{d});
  a.eval();
  c.eval();
  const Tensor x = randn({2, 1, 4, 4}, d);
  EXPECT_TRUE(allclose(a(x), c(x), 1e-5, 1e-6));
  std::remove(path.c_str());

  nn::StateDict bad = a.state_dict();
  bad["3.weight"] = zeros({3, 9}, d);
  try {
    b.load_state_dict(bad);
    ADD_FAILURE() << "no ShapeError";
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("'3.weight'"), std::string::npos) << e.what();
  }
  bad = a.state_dict();
  bad["3.bias"] = zeros({3}, d, f64);
  EXPECT_THROW(b.load_state_dict(bad), DTypeError);
  bad = a.state_dict();
  bad.erase("0.bias");
  EXPECT_THROW(b.load_state_dict(bad), ValueError);
  b.load_state_dict(bad, false);
}

TEST_P(NN, AdamAndSgdMinimiseAQuadratic) {
  const Device d = device();
  for (int which = 0; which < 2; ++which) {
    Tensor w = full({3}, 5.0, d).requires_grad_();
    std::unique_ptr<optim::Optimizer> opt;
    if (which == 0)
      opt = std::make_unique<optim::SGD>(std::vector<Tensor>{w},
                                         optim::SGDOptions{.lr = 0.1, .momentum = 0.5, .weight_decay = 1e-4});
    else
      opt = std::make_unique<optim::Adam>(std::vector<Tensor>{w}, optim::AdamOptions{.lr = 0.3});
    for (int i = 0; i < 200; ++i) {
      opt->zero_grad();
      square(w - 1.0).sum().backward();
      opt->step();
    }
    EXPECT_TRUE(allclose(w, ones({3}, d), 0, 0.05)) << which << ": " << w;
  }
}

// The fused SGD and Adam steps (one pass per parameter, ops/optimizer_step.h)
// give the composite update's parameters and state (ANVIL_NO_FUSED=1) to
// rounding, over several steps and every option that changes the formula.
TEST_P(NN, FusedOptimizerStepsMatchTheComposite) {
  using MakeOptimizer = std::function<std::unique_ptr<optim::Optimizer>(std::vector<Tensor>)>;
  const auto sgd = [](optim::SGDOptions o) -> MakeOptimizer {
    return [o](std::vector<Tensor> p) { return std::make_unique<optim::SGD>(std::move(p), o); };
  };
  const auto adam = [](optim::AdamOptions o) -> MakeOptimizer {
    return [o](std::vector<Tensor> p) { return std::make_unique<optim::Adam>(std::move(p), o); };
  };
  const std::vector<std::pair<std::string, MakeOptimizer>> cases = {
      {"sgd", sgd({.lr = 0.1})},
      {"sgd weight_decay", sgd({.lr = 0.1, .weight_decay = 0.01})},
      {"sgd momentum dampening", sgd({.lr = 0.1, .momentum = 0.9, .dampening = 0.25})},
      {"sgd nesterov weight_decay", sgd({.lr = 0.05, .momentum = 0.9, .weight_decay = 1e-3, .nesterov = true})},
      {"adam", adam({.lr = 0.01})},
      {"adam weight_decay", adam({.lr = 0.01, .beta1 = 0.8, .beta2 = 0.99, .eps = 1e-6, .weight_decay = 0.05})},
  };
  const Device d = device();
  constexpr int kSteps = 4;
  for (DType t : {f32, f64}) {
    if (t == f64 && !properties(d).fp64) continue;
    manual_seed(7);
    const Tensor w0 = randn({37, 29}, d, t), b0 = randn({29}, d, t);
    std::vector<Tensor> grads;
    for (int s = 0; s < kSteps; ++s) grads.insert(grads.end(), {randn({37, 29}, d, t), randn({29}, d, t)});
    for (const auto& [what, make] : cases) {
      // Parameters and optimiser state after kSteps steps, fused or not.
      const auto train = [&](bool fused) {
        EnvGuard env("ANVIL_NO_FUSED", fused ? nullptr : "1");
        Tensor w = w0.clone().requires_grad_(), b = b0.clone().requires_grad_();
        const auto opt = make({w, b});
        for (int s = 0; s < kSteps; ++s) {
          w.set_grad(grads[2 * s]);
          b.set_grad(grads[2 * s + 1]);
          opt->step();
        }
        auto out = opt->state_dict();
        out["w"] = w.detach();
        out["b"] = b.detach();
        return out;
      };
      const auto fused = train(true), composite = train(false);
      ASSERT_EQ(fused.size(), composite.size()) << what;
      const double tol = t == f32 ? 1e-5 : 1e-12;
      for (const auto& [key, value] : composite)
        if (key == "step")  // Adam's step count
          EXPECT_EQ(fused.at(key).item<std::int64_t>(), value.item<std::int64_t>()) << what;
        else
          EXPECT_TRUE(allclose(fused.at(key), value, tol, tol)) << what << " " << t << " " << key;
    }
    // The fused kernel exists here and is what ran above.
    Tensor p = w0.clone();
    const detail::OptimizerStepArgs args{.kind = detail::OptimizerKind::Sgd, .lr = 0.5};
    EnvGuard env("ANVIL_NO_FUSED", nullptr);
    ASSERT_TRUE(detail::fused_optimizer_step(args, p, grads[0], nullptr, nullptr)) << d << " " << t;
    EXPECT_TRUE(allclose(p, w0 - grads[0] * 0.5, 1e-6, 1e-6));
  }
}

TEST_P(NN, DropoutTrainsAndEvaluates) {
  const Device d = device();
  nn::Dropout drop(0.5);
  const Tensor x = ones({1000}, d);
  const Tensor y = drop(x);
  const double kept = sum(y > 0).item<double>();
  EXPECT_GT(kept, 400);
  EXPECT_LT(kept, 600);
  EXPECT_TRUE(allclose(max(y), scalar_tensor(2.0, d)));
  drop.eval();
  EXPECT_TRUE(drop(x).is_same(x));
}

// dropout's mask comes from one Philox fill (RandomKind::KeepMask): the same
// elements dropped on every device for one seed, the kept ones scaled by
// by 1 / (1 - p) in the dtype, and the gradient the same mask.
TEST_P(NN, DropoutMaskIsOneFillTheSameOnEveryDevice) {
  const Device d = device();
  for (DType t : {f32, f64}) {
    SCOPED_TRACE(to_string(t));
    const Tensor x0 = arange(1, 5001, 1, cpu(), t).reshape({50, 100});
    const auto run = [&](Device on) {
      manual_seed(5);
      const Tensor x = x0.to(on).detach().requires_grad_();  // a leaf of its own on the CPU too
      const Tensor y = dropout(x, 0.3, true);
      y.backward(ones_like(y));
      return std::pair{y.cpu(), x.grad().cpu()};
    };
    const auto [y, g] = run(d);
    const auto [y_cpu, g_cpu] = run(cpu());
    EXPECT_TRUE(equal(y, y_cpu)) << "dropout's mask differs between " << d << " and cpu";
    EXPECT_TRUE(equal(g, g_cpu));
    const Tensor kept = y != 0.0, scale = full({50, 100}, 1.0 / (1.0 - 0.3), cpu(), t);
    EXPECT_TRUE(equal(y, where(kept, x0 * scale, 0.0)));
    EXPECT_TRUE(equal(g, where(kept, scale, 0.0)));
    const double fraction = mean(kept.to(f64)).item<double>();
    EXPECT_NEAR(fraction, 0.7, 0.03);
  }
}

// End to end: a few hundred SGD steps of the MLP on a Fashion-MNIST subset
// must bring the training loss under a threshold, on every device.
TEST_P(NN, ShortTrainingRunReachesLossThreshold) {
  const Device d = device();
  std::unique_ptr<FashionMNIST> data;
  try {
    data = std::make_unique<FashionMNIST>(FashionMNIST::Split::Train);
  } catch (const IOError& e) {
    GTEST_SKIP() << "Fashion-MNIST not installed (apt-get install dataset-fashion-mnist): " << e.what();
  }
  manual_seed(0);
  const Tensor images = data->images().narrow(0, 0, 6400), labels = data->labels().narrow(0, 0, 6400);
  nn::Sequential net{nn::Flatten(), nn::Linear(784, 64), nn::ReLU(), nn::Linear(64, 10)};
  net.to(d);
  optim::SGD opt(net.parameters(), {.lr = 0.1});
  DataLoader loader(images, labels, {.batch_size = 64, .shuffle = true, .seed = 1, .device = d});
  double last = 0;
  for (int epoch = 0; epoch < 3; ++epoch) {
    Tensor total = zeros({}, d);
    for (const Batch& b : loader) {
      opt.zero_grad();
      const Tensor loss = nn::cross_entropy(net(b.inputs), b.targets);
      loss.backward();
      opt.step();
      NoGradGuard no_grad;
      total += loss.detach();
    }
    last = total.item<double>() / static_cast<double>(loader.size());
  }
  EXPECT_LT(last, 0.75) << "mean training loss of the last epoch";
}

ANVIL_INSTANTIATE_DEVICE_TEST(NN);
