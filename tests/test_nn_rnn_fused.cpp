// The fused recurrent layers (Note [Fused recurrent layers]: cuDNN's RNN API
// on CUDA, oneDNN's RNN primitives on the CPU for f32) against the per-step
// composite every backend runs
// (ANVIL_FUSED_RNN=0): outputs, final states and every gradient (input,
// initial states, each parameter) for RNN, GRU and LSTM, two layers, seq- and
// batch-first, with and without initial state, on every device whose
// backend has a fused recurrent layer; skipped elsewhere (and failed on a
// CUDA device without one when ANVIL_REQUIRE_DEVICES names cuda). Also the
// validation of anvil::rnn, on every device.
#include <cmath>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "anvil/autograd.h"
#include "anvil/backends.h"
#include "anvil/nn/sequence.h"
#include "core/backend.h"
#include "device_test.h"
#include "env_guard.h"
#include "tf32_guard.h"

using namespace anvil;

namespace {

enum class Kind { Tanh, Relu, Gru, Lstm };
const char* kind_name(Kind k) {
  static constexpr const char* kNames[] = {"RNN(tanh)", "RNN(relu)", "GRU", "LSTM"};
  return kNames[static_cast<int>(k)];
}

struct Case {
  Kind kind;
  bool batch_first;
  bool initial_state;
  DType dtype;
};

std::string describe(const Case& c) {
  return std::string(kind_name(c.kind)) + (c.batch_first ? " batch_first" : " seq_first") +
         (c.initial_state ? " with h0" : " without h0") + " " + std::string(to_string(c.dtype));
}

constexpr std::int64_t kIn = 5, kHidden = 6, kLayers = 2, kSteps = 4, kBatch = 3;

std::shared_ptr<nn::RecurrentBase> make_layer(Kind k, bool batch_first) {
  switch (k) {
    case Kind::Tanh:
      return std::make_shared<nn::RNN>(kIn, kHidden, kLayers, "tanh", true, batch_first);
    case Kind::Relu:
      return std::make_shared<nn::RNN>(kIn, kHidden, kLayers, "relu", true, batch_first);
    case Kind::Gru:
      return std::make_shared<nn::GRU>(kIn, kHidden, kLayers, true, batch_first);
    case Kind::Lstm:
      break;
  }
  return std::make_shared<nn::LSTM>(kIn, kHidden, kLayers, true, batch_first);
}

// Outputs and gradients of one run.
struct Result {
  std::vector<Tensor> values;  // output, h_n[, c_n]
  std::vector<Tensor> grads;   // x, h0[, c0] (when given), then every parameter
};

// The layer's forward and the backward of sum(output * wy) + sum(h_n * wh)
// (+ sum(c_n * wc)), inputs fresh leaves on `d`.
Result run_once(nn::RecurrentBase& m, Kind k, const Tensor& x_data, const Tensor& h0_data, const Tensor& c0_data,
                const std::vector<Tensor>& weights) {
  m.zero_grad();
  Tensor x = x_data.clone().requires_grad_();
  Tensor h0 = h0_data.defined() ? h0_data.clone().requires_grad_() : Tensor();
  Tensor c0 = c0_data.defined() ? c0_data.clone().requires_grad_() : Tensor();
  Result r;
  if (k == Kind::Lstm) {
    auto out = static_cast<nn::LSTM&>(m).forward(x, h0, c0);
    r.values = {out.output, out.h_n, out.c_n};
  } else if (k == Kind::Gru) {
    auto out = static_cast<nn::GRU&>(m).forward(x, h0);
    r.values = {out.output, out.h_n};
  } else {
    auto out = static_cast<nn::RNN&>(m).forward(x, h0);
    r.values = {out.output, out.h_n};
  }
  Tensor loss = sum(r.values[0] * weights[0]) + sum(r.values[1] * weights[1]);
  if (k == Kind::Lstm) loss = loss + sum(r.values[2] * weights[2]);
  loss.backward();
  r.grads.push_back(x.grad());
  if (h0.defined()) r.grads.push_back(h0.grad());
  if (c0.defined()) r.grads.push_back(c0.grad());
  for (const Tensor& p : m.parameters()) r.grads.push_back(p.grad());
  return r;
}

// Whether `d`'s backend runs a recurrent layer of this shape fused.
bool fused_here(Device d, Kind k, DType t, bool batch_first) {
  detail::Backend* b = detail::backend_for(d.type());
  if (b == nullptr) return false;
  detail::RnnArgs a;
  a.mode = k == Kind::Tanh   ? detail::RnnMode::Tanh
           : k == Kind::Relu ? detail::RnnMode::Relu
           : k == Kind::Gru  ? detail::RnnMode::Gru
                             : detail::RnnMode::Lstm;
  a.dtype = t;
  a.layers = kLayers, a.input_size = kIn, a.hidden_size = kHidden, a.seq_len = kSteps, a.batch = kBatch;
  a.batch_first = batch_first;
  a.training = true;
  return b->supports_fused_rnn(d.index(), a);
}

// Skips (or, on a CUDA device ANVIL_REQUIRE_DEVICES asks for, fails) where
// the device has no fused recurrent layer: there both paths are the composite.
bool has_fused_or_skip(Device d) {
  if (fused_here(d, Kind::Lstm, f32, false)) return true;
  if (d.type() == DeviceType::CUDA && anvil::testing::required_device_types().count(DeviceType::CUDA) != 0)
    ADD_FAILURE() << d << " has no fused recurrent layer (cuDNN: " << backends::cudnn::status()
                  << "); ANVIL_REQUIRE_DEVICES=cuda expects cuDNN's";
  return false;
}

void expect_close(const Tensor& fused, const Tensor& composite, double tol, const std::string& what) {
  ASSERT_EQ(fused.defined(), composite.defined()) << what;
  if (!fused.defined()) return;
  ASSERT_EQ(fused.shape(), composite.shape()) << what;
  const std::vector<double> a = fused.cpu().to(f64).to_vector<double>(),
                            b = composite.cpu().to(f64).to_vector<double>();
  double worst = 0;
  std::size_t at = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const double err = std::abs(a[i] - b[i]) / (1.0 + std::abs(b[i]));
    if (!(err <= worst)) worst = err, at = i;  // NaN counts as worst
  }
  EXPECT_LE(worst, tol) << what << ": element " << at << " fused " << a[at] << " composite " << b[at];
}

}  // namespace

class FusedRnn : public anvil::testing::DeviceTest {};

TEST_P(FusedRnn, MatchesTheCompositeInValuesAndGradients) {
  const Device d = device();
  if (!has_fused_or_skip(d)) GTEST_SKIP() << d << " has no fused recurrent layer; the composite is the only path";
  const anvil::testing::CudnnTf32Guard strict(false);  // f32 compared as f32
  for (DType t : {f64, f32}) {
    if (t == f64 && !properties(d).fp64) continue;
    // oneDNN has no f64 RNN: on the CPU f64 runs the composite both ways
    // (F64FallsBackToTheComposite).
    if (d.type() == DeviceType::CPU && t == f64) continue;
    const double tol = t == f64 ? 1e-10 : 2e-5;
    for (Kind k : {Kind::Tanh, Kind::Relu, Kind::Gru, Kind::Lstm})
      for (bool batch_first : {false, true})
        for (bool initial : {true, false}) {
          const Case c{k, batch_first, initial, t};
          SCOPED_TRACE(describe(c));
          ASSERT_TRUE(fused_here(d, k, t, batch_first)) << describe(c) << " is not fused on " << d;
          manual_seed(11);
          std::shared_ptr<nn::RecurrentBase> m = make_layer(k, batch_first);
          {
            NoGradGuard no_grad;
            for (const Tensor& p : m->parameters()) p.set_data(p.to(t));
          }
          m->to(d);
          const Shape xs = batch_first ? Shape{kBatch, kSteps, kIn} : Shape{kSteps, kBatch, kIn};
          const Tensor x = randn(xs, d, t);
          const Tensor h0 = initial ? randn({kLayers, kBatch, kHidden}, d, t) : Tensor();
          const Tensor c0 = initial && k == Kind::Lstm ? randn({kLayers, kBatch, kHidden}, d, t) : Tensor();
          const Shape ys = batch_first ? Shape{kBatch, kSteps, kHidden} : Shape{kSteps, kBatch, kHidden};
          const std::vector<Tensor> w{randn(ys, d, t), randn({kLayers, kBatch, kHidden}, d, t),
                                      randn({kLayers, kBatch, kHidden}, d, t)};
          Result composite;
          {
            anvil::testing::EnvGuard off("ANVIL_FUSED_RNN", "0");
            composite = run_once(*m, k, x, h0, c0, w);
          }
          const Result fused = run_once(*m, k, x, h0, c0, w);
          ASSERT_EQ(fused.values.size(), composite.values.size());
          for (std::size_t i = 0; i < fused.values.size(); ++i)
            expect_close(fused.values[i], composite.values[i], tol, "value " + std::to_string(i));
          ASSERT_EQ(fused.grads.size(), composite.grads.size());
          for (std::size_t i = 0; i < fused.grads.size(); ++i)
            expect_close(fused.grads[i], composite.grads[i], tol, "gradient " + std::to_string(i));
        }
  }
}

// With TF32 allowed (PyTorch's default for cuDNN, and anvil's), f32 stays
// within TF32's tolerance of the strict composite: inputs rounded to 10-bit
// mantissas (relative 2^-11), f32 accumulation.
TEST_P(FusedRnn, Tf32WithinItsTolerance) {
  const Device d = device();
  if (!has_fused_or_skip(d)) GTEST_SKIP() << d << " has no fused recurrent layer; the composite is the only path";
  const anvil::testing::CudnnTf32Guard tf32(true);
  for (Kind k : {Kind::Gru, Kind::Lstm}) {
    SCOPED_TRACE(kind_name(k));
    manual_seed(13);
    std::shared_ptr<nn::RecurrentBase> m = make_layer(k, false);
    m->to(d);
    const Tensor x = randn({kSteps, kBatch, kIn}, d);
    const std::vector<Tensor> w{randn({kSteps, kBatch, kHidden}, d), randn({kLayers, kBatch, kHidden}, d),
                                randn({kLayers, kBatch, kHidden}, d)};
    Result composite;
    {
      anvil::testing::EnvGuard off("ANVIL_FUSED_RNN", "0");
      composite = run_once(*m, k, x, Tensor(), Tensor(), w);
    }
    const Result fused = run_once(*m, k, x, Tensor(), Tensor(), w);
    for (std::size_t i = 0; i < fused.values.size(); ++i)
      expect_close(fused.values[i], composite.values[i], 1e-2, "value " + std::to_string(i));
    for (std::size_t i = 0; i < fused.grads.size(); ++i)
      expect_close(fused.grads[i], composite.grads[i], 1e-2, "gradient " + std::to_string(i));
  }
}

// Partial use of the outputs (h_n alone, the output alone), inference without
// a graph, an unbatched input, and gradients for the parameters alone.
TEST_P(FusedRnn, PartialUseNoGradAndUnbatched) {
  const Device d = device();
  if (!has_fused_or_skip(d)) GTEST_SKIP() << d << " has no fused recurrent layer; the composite is the only path";
  const anvil::testing::CudnnTf32Guard strict(false);  // f32 compared as f32
  manual_seed(5);
  nn::LSTM m(kIn, kHidden, kLayers);
  m.to(d);
  const Tensor x = randn({kSteps, kBatch, kIn}, d);
  auto both = [&](const std::function<Tensor()>& f) {
    std::vector<Tensor> out;
    {
      anvil::testing::EnvGuard off("ANVIL_FUSED_RNN", "0");
      m.zero_grad();
      out.push_back(f());
      for (const Tensor& p : m.parameters()) out.push_back(p.grad());
    }
    m.zero_grad();
    out.push_back(f());
    for (const Tensor& p : m.parameters()) out.push_back(p.grad());
    return out;
  };
  auto compare = [&](const std::vector<Tensor>& r, const char* what) {
    const std::size_t half = r.size() / 2;
    for (std::size_t i = 0; i < half; ++i)
      expect_close(r[half + i], r[i], 2e-5, std::string(what) + " " + std::to_string(i));
  };
  compare(both([&] {
            Tensor h = m.forward(x, Tensor(), Tensor()).h_n;
            sum(h * h).backward();
            return h.detach();
          }),
          "h_n alone");
  compare(both([&] {
            Tensor y = m(x);
            sum(y).backward();
            return y.detach();
          }),
          "output alone");
  compare(both([&] {
            NoGradGuard no_grad;
            return m.forward(x, Tensor(), Tensor()).c_n;
          }),
          "no grad");
  compare(both([&] {
            Tensor y = m(x.select(1, 0));  // [T, in]
            EXPECT_EQ(y.shape(), Shape({kSteps, kHidden}));
            sum(y).backward();
            return y.detach();
          }),
          "unbatched");
}

// Dropout between layers: the fused layer drops out while training (cuDNN's
// own generator, so not the composite's mask) and not in evaluation.
TEST_P(FusedRnn, DropoutBetweenLayers) {
  const Device d = device();
  if (!has_fused_or_skip(d)) GTEST_SKIP() << d << " has no fused recurrent layer; the composite is the only path";
  const anvil::testing::CudnnTf32Guard strict(false);  // f32 compared as f32
  manual_seed(7);
  nn::GRU m(kIn, kHidden, kLayers, true, false, 0.5);
  m.to(d);
  const Tensor x = randn({kSteps, kBatch, kIn}, d);
  m.eval();
  Tensor composite;
  {
    anvil::testing::EnvGuard off("ANVIL_FUSED_RNN", "0");
    composite = m(x);
  }
  expect_close(m(x), composite, 2e-5, "evaluation");
  m.train();
  Tensor y = m(x);
  sum(y).backward();
  EXPECT_GT(amax(abs(y - composite)).item<double>(), 1e-4) << "training with dropout 0.5 changed nothing";
  for (const Tensor& p : m.parameters()) EXPECT_TRUE(std::isfinite(sum(p.grad()).item<double>()));

  // Where the mask follows anvil's seed (oneDNN's path draws it from
  // RnnArgs::dropout_seed; cuDNN's generator is seeded once and moves on),
  // the input's gradient through the dropped-out layer matches central
  // differences of the loss along a random direction.
  const auto loss = [&](const Tensor& in) {
    manual_seed(23);
    const Tensor out = m(in);
    return sum(out * out);
  };
  if (!loss(x).equal(loss(x))) return;
  Tensor xg = x.clone().requires_grad_();
  loss(xg).backward();
  const Tensor v = randn(x.shape(), d);
  const double eps = 1e-2, along = sum(xg.grad() * v).item<double>();
  const double fd = (loss(x + v * eps).item<double>() - loss(x - v * eps).item<double>()) / (2 * eps);
  EXPECT_NEAR(along, fd, 1e-2 * (1 + std::abs(fd))) << "the input's gradient through dropout";
}

// A layer of the language model's kind (wider than a vector register, so
// oneDNN's blocked weight layouts), GRU and LSTM without biases, and a
// parameter changed in place between two calls: the fused layer packs the
// weights on every call, so the second call sees the change.
TEST_P(FusedRnn, WiderLayerAndParameterChangedInPlace) {
  const Device d = device();
  if (!has_fused_or_skip(d)) GTEST_SKIP() << d << " has no fused recurrent layer; the composite is the only path";
  const anvil::testing::CudnnTf32Guard strict(false);  // f32 compared as f32
  for (Kind k : {Kind::Gru, Kind::Lstm, Kind::Tanh}) {
    SCOPED_TRACE(kind_name(k));
    manual_seed(19);
    constexpr std::int64_t in = 28, hidden = 40, steps = 9, batch = 7;
    std::shared_ptr<nn::RecurrentBase> m;
    if (k == Kind::Gru) m = std::make_shared<nn::GRU>(in, hidden, 2, false, true);
    if (k == Kind::Lstm) m = std::make_shared<nn::LSTM>(in, hidden, 2, false, true);
    if (k == Kind::Tanh) m = std::make_shared<nn::RNN>(in, hidden, 2, "tanh", true, true);
    m->to(d);
    const Tensor x = randn({batch, steps, in}, d);
    const std::vector<Tensor> w{randn({batch, steps, hidden}, d), randn({2, batch, hidden}, d),
                                randn({2, batch, hidden}, d)};
    for (int round = 0; round < 2; ++round) {
      SCOPED_TRACE(round == 0 ? "first call" : "after an in-place change");
      Result composite;
      {
        anvil::testing::EnvGuard off("ANVIL_FUSED_RNN", "0");
        composite = run_once(*m, k, x, Tensor(), Tensor(), w);
      }
      const Result fused = run_once(*m, k, x, Tensor(), Tensor(), w);
      for (std::size_t i = 0; i < fused.values.size(); ++i)
        expect_close(fused.values[i], composite.values[i], 2e-5, "value " + std::to_string(i));
      ASSERT_EQ(fused.grads.size(), composite.grads.size());
      for (std::size_t i = 0; i < fused.grads.size(); ++i)
        expect_close(fused.grads[i], composite.grads[i], 1e-4, "gradient " + std::to_string(i));
      NoGradGuard no_grad;
      for (Tensor p : m->parameters()) p.mul_(1.5);
    }
  }
}

// Where the backend fuses f32 but not f64 (oneDNN on the CPU), an f64 layer
// is not offered to it and runs the composite: the same values and gradients
// as the fused f32 layer, to f32's precision.
TEST_P(FusedRnn, F64FallsBackToTheComposite) {
  const Device d = device();
  if (!has_fused_or_skip(d)) GTEST_SKIP() << d << " has no fused recurrent layer; the composite is the only path";
  if (!properties(d).fp64 || fused_here(d, Kind::Lstm, f64, false)) GTEST_SKIP() << d << " fuses f64 too";
  const anvil::testing::CudnnTf32Guard strict(false);  // f32 compared as f32
  for (Kind k : {Kind::Gru, Kind::Lstm}) {
    SCOPED_TRACE(kind_name(k));
    manual_seed(17);
    std::shared_ptr<nn::RecurrentBase> m = make_layer(k, true);
    m->to(d);
    const Tensor x = randn({kBatch, kSteps, kIn}, d);
    const std::vector<Tensor> w{randn({kBatch, kSteps, kHidden}, d), randn({kLayers, kBatch, kHidden}, d),
                                randn({kLayers, kBatch, kHidden}, d)};
    const Result fused32 = run_once(*m, k, x, Tensor(), Tensor(), w);
    {
      NoGradGuard no_grad;
      for (const Tensor& p : m->parameters()) p.set_data(p.to(f64));
    }
    std::vector<Tensor> w64;
    for (const Tensor& t : w) w64.push_back(t.to(f64));
    const Result composite64 = run_once(*m, k, x.to(f64), Tensor(), Tensor(), w64);
    for (std::size_t i = 0; i < fused32.values.size(); ++i) {
      EXPECT_EQ(composite64.values[i].dtype(), f64);
      expect_close(fused32.values[i], composite64.values[i], 2e-5, "value " + std::to_string(i));
    }
    ASSERT_EQ(fused32.grads.size(), composite64.grads.size());
    for (std::size_t i = 0; i < fused32.grads.size(); ++i)
      expect_close(fused32.grads[i], composite64.grads[i], 2e-5, "gradient " + std::to_string(i));
  }
}

// anvil::rnn's own checks, on every device.
TEST_P(FusedRnn, OpValidation) {
  const Device d = device();
  const Tensor x = randn({kSteps, kBatch, kIn}, d);
  const Tensor wih = randn({3 * kHidden, kIn}, d), whh = randn({3 * kHidden, kHidden}, d), b = randn({3 * kHidden}, d);
  const RnnResult r = rnn(RnnMode::GRU, x, Tensor(), Tensor(), {wih, whh, b, b}, 1, true, false);
  EXPECT_EQ(r.output.shape(), Shape({kSteps, kBatch, kHidden}));
  EXPECT_EQ(r.h_n.shape(), Shape({1, kBatch, kHidden}));
  EXPECT_FALSE(r.c_n.defined());
  EXPECT_THROW(rnn(RnnMode::GRU, x, Tensor(), Tensor(), {wih, whh}, 1, true, false), ValueError);
  EXPECT_THROW(rnn(RnnMode::LSTM, x, Tensor(), Tensor(), {wih, whh, b, b}, 1, true, false), ShapeError);
  EXPECT_THROW(rnn(RnnMode::GRU, x, randn({2, kBatch, kHidden}, d), Tensor(), {wih, whh, b, b}, 1, true, false),
               ShapeError);
  EXPECT_THROW(rnn(RnnMode::GRU, x.select(0, 0), Tensor(), Tensor(), {wih, whh, b, b}, 1, true, false), ShapeError);
  if (d != cpu()) {
    try {
      rnn(RnnMode::GRU, x, Tensor(), Tensor(), {wih, whh.cpu(), b, b}, 1, true, false);
      ADD_FAILURE() << "expected DeviceMismatch";
    } catch (const DeviceMismatch& e) {
      EXPECT_NE(std::string(e.what()).find("gru"), std::string::npos) << e.what();
    }
  }
}

ANVIL_INSTANTIATE_DEVICE_TEST(FusedRnn);
