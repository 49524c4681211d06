// The sequence layers (anvil/nn/sequence.h) on every device: gradients of
// input, initial state and every parameter against float64 central
// differences, shapes and state_dict names, and the errors of bad input.
// Their values against PyTorch: test_nn_torch.cpp.
#include <cmath>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "anvil/autograd.h"
#include "anvil/nn/sequence.h"
#include "core/backend.h"
#include "device_test.h"
#include "env_guard.h"

using namespace anvil;

namespace {
void to_f64(nn::Module& m) {
  NoGradGuard no_grad;
  for (const Tensor& p : m.parameters()) p.set_data(p.to(f64));
}

// Analytic gradients of sum(f() * w) for the inputs (gradcheck) and then for
// every parameter element against central differences, perturbing the
// parameter in place (gradcheck itself only drives the tensors it is given).
void check_layer(nn::Module& m, Device d, const std::vector<Tensor>& inputs,
                 const std::function<Tensor(const std::vector<Tensor>&)>& f) {
  to_f64(m);
  m.to(d);
  const auto r = autograd::gradcheck(f, inputs);
  EXPECT_TRUE(r.ok) << m.name() << ": " << r.message;

  m.zero_grad();
  const Tensor out = f(inputs);
  const Tensor w = randn(out.shape(), d, f64);
  sum(out * w).backward();
  const double eps = 1e-6;
  for (auto& [name, p] : m.named_parameters()) {
    SCOPED_TRACE(name);
    ASSERT_TRUE(p.grad().defined());
    const std::vector<double> analytic = p.grad().to_vector<double>();
    std::vector<double> v = p.to_vector<double>();
    NoGradGuard no_grad;
    for (std::size_t j = 0; j < v.size(); ++j) {
      const double orig = v[j];
      auto loss_at = [&](double value) {
        v[j] = value;
        p.copy_(from_host(v.data(), p.shape(), f64, d));
        return sum(f(inputs) * w).item<double>();
      };
      const double numeric = (loss_at(orig + eps) - loss_at(orig - eps)) / (2 * eps);
      loss_at(orig);
      ASSERT_NEAR(analytic[j], numeric, 1e-5 + 1e-4 * std::abs(numeric)) << "element " << j;
    }
  }
}

Tensor flat(std::initializer_list<Tensor> ts) {
  std::vector<Tensor> v;
  for (const Tensor& t : ts) v.push_back(t.flatten());
  return cat(v);
}

std::vector<std::string> keys(const nn::Module& m) {
  std::vector<std::string> k;
  for (const auto& [name, t] : m.state_dict()) k.push_back(name);
  return k;
}
}  // namespace

class SequenceLayers : public anvil::testing::DeviceTest {};

TEST_P(SequenceLayers, RecurrentGradients) {
  const Device d = device();
  if (!properties(d).fp64) GTEST_SKIP() << d << " has no f64; gradcheck needs float64";
  manual_seed(3);
  using V = const std::vector<Tensor>&;
  {
    nn::RNN m(3, 4, 2);
    check_layer(m, d, {randn({4, 2, 3}, d, f64).requires_grad_(), randn({2, 2, 4}, d, f64).requires_grad_()}, [&](V x) {
      auto r = m.forward(x[0], x[1]);
      return flat({r.output, r.h_n});
    });
  }
  {
    nn::RNN m(3, 2, 1, "relu", true, true);
    check_layer(m, d, {randn({2, 3, 3}, d, f64).requires_grad_()}, [&](V x) { return m(x[0]); });
  }
  {
    nn::GRU m(3, 4, 2, true, true);
    check_layer(m, d, {randn({2, 3, 3}, d, f64).requires_grad_(), randn({2, 2, 4}, d, f64).requires_grad_()}, [&](V x) {
      auto r = m.forward(x[0], x[1]);
      return flat({r.output, r.h_n});
    });
  }
  {
    nn::LSTM m(2, 3, 2);
    check_layer(m, d,
                {randn({3, 2, 2}, d, f64).requires_grad_(), randn({2, 2, 3}, d, f64).requires_grad_(),
                 randn({2, 2, 3}, d, f64).requires_grad_()},
                [&](V x) {
                  auto r = m.forward(x[0], x[1], x[2]);
                  return flat({r.output, r.h_n, r.c_n});
                });
  }
}

TEST_P(SequenceLayers, AttentionAndNormGradients) {
  const Device d = device();
  if (!properties(d).fp64) GTEST_SKIP() << d << " has no f64; gradcheck needs float64";
  manual_seed(4);
  using V = const std::vector<Tensor>&;
  {
    nn::LayerNorm m(Shape{2, 3});
    check_layer(m, d, {randn({2, 2, 3}, d, f64).requires_grad_()}, [&](V x) { return m(x[0]); });
  }
  {
    nn::Embedding m(5, 3);
    const Tensor idx = tensor({{4, 0, 4}, {1, 1, 2}}, d);
    check_layer(m, d, {}, [&](V) { return m(idx); });
  }
  {
    nn::MultiheadAttention m(4, 2);
    const Tensor padding = tensor({{0, 0, 1}, {0, 0, 0}}, d) > 0;
    check_layer(m, d, {randn({2, 2, 4}, d, f64).requires_grad_(), randn({3, 2, 4}, d, f64).requires_grad_()}, [&](V x) {
      auto r = m.forward(x[0], x[1], x[1], padding);
      return flat({r.output, r.weights});
    });
  }
  {
    nn::TransformerEncoderLayer m(4, 2, 6, 0.0, "gelu", 1e-5, true, true);
    check_layer(m, d, {randn({2, 3, 4}, d, f64).requires_grad_()}, [&](V x) { return m(x[0]); });
  }
}

TEST_P(SequenceLayers, ShapesNamesAndDevices) {
  const Device d = device();
  nn::LSTM lstm(3, 5, 2, true, true);
  EXPECT_EQ(keys(lstm), (std::vector<std::string>{"bias_hh_l0", "bias_hh_l1", "bias_ih_l0", "bias_ih_l1",
                                                  "weight_hh_l0", "weight_hh_l1", "weight_ih_l0", "weight_ih_l1"}));
  EXPECT_EQ(lstm.param("weight_ih_l0").shape(), Shape({20, 3}));
  EXPECT_EQ(lstm.param("weight_ih_l1").shape(), Shape({20, 5}));
  lstm.to(d);
  auto r = lstm.forward(randn({4, 7, 3}, d), Tensor(), Tensor());
  EXPECT_EQ(r.output.shape(), Shape({4, 7, 5}));
  EXPECT_EQ(r.h_n.shape(), Shape({2, 4, 5}));
  EXPECT_EQ(r.c_n.shape(), Shape({2, 4, 5}));
  EXPECT_EQ(r.output.device(), d);
  EXPECT_EQ(lstm.name(), "LSTM(3, 5, num_layers=2, batch_first=true)");

  nn::GRU gru(3, 4);
  EXPECT_EQ(gru.param("weight_hh_l0").shape(), Shape({12, 4}));
  gru.to(d);
  // The final state continues the sequence: two halves with the state
  // carried over give the whole run.
  const Tensor x = randn({6, 2, 3}, d);
  const auto whole = gru.forward(x, Tensor());
  const auto first = gru.forward(x.narrow(0, 0, 3), Tensor());
  const auto second = gru.forward(x.narrow(0, 3, 3), first.h_n);
  EXPECT_TRUE(allclose(second.h_n, whole.h_n, 1e-5, 1e-6));
  EXPECT_TRUE(allclose(cat({first.output, second.output}), whole.output, 1e-5, 1e-6));

  nn::MultiheadAttention mha(6, 3);
  EXPECT_EQ(keys(mha),
            (std::vector<std::string>{"in_proj_bias", "in_proj_weight", "out_proj.bias", "out_proj.weight"}));
  nn::TransformerEncoderLayer enc(6, 3, 10);
  const auto ek = keys(enc);
  EXPECT_EQ(ek.size(), 12u);
  EXPECT_EQ(ek.front(), "linear1.bias");
  EXPECT_EQ(ek.back(), "self_attn.out_proj.weight");
  enc.to(d);
  enc.eval();
  EXPECT_EQ(enc(randn({5, 2, 6}, d)).shape(), Shape({5, 2, 6}));

  nn::Embedding emb(7, 3);
  emb.to(d);
  EXPECT_EQ(emb(tensor({{1, 2}, {6, 0}}, d)).shape(), Shape({2, 2, 3}));
}

TEST_P(SequenceLayers, Errors) {
  const Device d = device();
  nn::GRU gru(3, 4);
  gru.to(d);
  EXPECT_THROW(gru.forward(randn({5, 2, 2}, d), Tensor()), ShapeError);             // input_size
  EXPECT_THROW(gru.forward(randn({5, 2, 3}, d), zeros({1, 3, 4}, d)), ShapeError);  // h0 batch
  try {
    gru.forward(randn({5, 2, 3}, d), zeros({2, 2, 4}, d));
    ADD_FAILURE() << "no error";
  } catch (const ShapeError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("GRU"), std::string::npos) << m;
    EXPECT_NE(m.find("[1, 2, 4]"), std::string::npos) << m;
    EXPECT_NE(m.find("[2, 2, 4]"), std::string::npos) << m;
  }
  nn::LSTM lstm(3, 4);
  EXPECT_THROW(lstm.forward(randn({5, 2, 3}), zeros({1, 2, 4}), Tensor()), ValueError);  // h0 without c0
  EXPECT_THROW(nn::RNN(3, 4, 1, "gelu"), ValueError);
  EXPECT_THROW(nn::MultiheadAttention(6, 4), ValueError);
  EXPECT_THROW(nn::TransformerEncoderLayer(4, 2, 8, 0.1, "swish"), ValueError);
  nn::MultiheadAttention mha(4, 2);
  mha.to(d);
  EXPECT_THROW(mha.forward(randn({3, 2, 4}, d), randn({5, 2, 4}, d), randn({4, 2, 4}, d)), ShapeError);
  EXPECT_THROW(
      mha.forward(randn({3, 2, 4}, d), randn({5, 2, 4}, d), randn({5, 2, 4}, d), zeros({2, 3}, d, DType::Bool)),
      ShapeError);
  if (d != cpu()) {
    EXPECT_THROW(mha.forward(randn({3, 2, 4}, cpu()), randn({5, 2, 4}, d), randn({5, 2, 4}, d)), DeviceMismatch);
  }
  EXPECT_THROW(layer_norm(randn({2, 3}, d), {2}), ShapeError);
  EXPECT_THROW(layer_norm(randn({2, 3}, d), {3}, ones({2}, d)), ShapeError);
  EXPECT_THROW(embedding(ones({2}, d), randn({4, 3}, d)), DTypeError);
  EXPECT_THROW(embedding(tensor({1}, d), randn({4}, d)), ShapeError);
  EXPECT_THROW(embedding(tensor({4}, d), randn({4, 3}, d)).to_vector<float>(), IndexError);
  EXPECT_THROW(scaled_dot_product_attention(randn({2, 3}, d), randn({4, 2}, d), randn({4, 2}, d)), ShapeError);
  EXPECT_THROW(scaled_dot_product_attention(randn({2, 3}, d), randn({4, 3}, d), randn({5, 2}, d)), ShapeError);
  EXPECT_THROW(scaled_dot_product_attention(randn({2, 3}, d), randn({4, 3}, d), randn({4, 2}, d), ones({3, 4}, d)),
               ShapeError);
  EXPECT_THROW(
      scaled_dot_product_attention(randn({2, 3}, d), randn({4, 3}, d), randn({4, 2}, d), ones({2, 4}, d), true),
      ValueError);
}

TEST_P(SequenceLayers, AttentionMatchesAPlainSoftmax) {
  const Device d = device();
  manual_seed(9);
  const Tensor q = randn({2, 3, 4}, d), k = randn({2, 5, 4}, d), v = randn({2, 5, 3}, d);
  const Tensor want = matmul(softmax(matmul(q, k.transpose(1, 2)) / 2.0, -1), v);
  EXPECT_TRUE(allclose(scaled_dot_product_attention(q, k, v), want, 1e-5, 1e-6));
  // A huge scale stays finite (the row maximum is subtracted).
  for (float y : scaled_dot_product_attention(q * 1e4, k * 1e4, v).to_vector<float>()) EXPECT_TRUE(std::isfinite(y));
  // Causal equals the lower-triangular bool mask and the -inf additive mask.
  const Tensor qs = randn({4, 4}, d), ks = randn({4, 4}, d), vs = randn({4, 2}, d);
  const Tensor keep = tril(ones({4, 4}, d, DType::Bool));
  const Tensor causal = scaled_dot_product_attention(qs, ks, vs, {}, true);
  EXPECT_TRUE(allclose(causal, scaled_dot_product_attention(qs, ks, vs, keep), 1e-6, 1e-7));
  const Tensor additive = zeros({4, 4}, d).masked_fill(keep == false, -INFINITY);
  EXPECT_TRUE(allclose(causal, scaled_dot_product_attention(qs, ks, vs, additive), 1e-6, 1e-7));
  // The first query sees only the first key.
  EXPECT_TRUE(allclose(causal[0], vs[0], 1e-6, 1e-7));
  // A query with nothing to attend to gives 0, as PyTorch 2.5+, and its
  // gradients stay finite; the other rows are unchanged.
  Tensor qg = qs.detach().requires_grad_();
  Tensor none = keep.clone();
  none[1].fill_(false);
  const Tensor masked = scaled_dot_product_attention(qg, ks, vs, none);
  EXPECT_TRUE(allclose(masked[1], zeros({2}, d))) << masked;
  EXPECT_TRUE(allclose(masked[2], causal[2], 1e-6, 1e-7));
  masked.sum().backward();
  for (float gq : qg.grad().to_vector<float>()) EXPECT_TRUE(std::isfinite(gq));
  EXPECT_TRUE(allclose(qg.grad()[1], zeros({4}, d)));
}

ANVIL_INSTANTIATE_DEVICE_TEST(SequenceLayers);

namespace {

struct LayerNormResult {
  Tensor y, gx, gw, gb;
};

// y and the gradients of sum(y * w) for layer_norm over the last dim.
LayerNormResult run_layer_norm(const Tensor& x0, const Tensor& w0, const Tensor& b0, const Tensor& weights,
                               bool composite) {
  anvil::testing::EnvGuard env("ANVIL_NO_FUSED", composite ? "1" : nullptr);
  Tensor x = x0.detach().requires_grad_();
  Tensor w = w0.defined() ? w0.detach().requires_grad_() : Tensor{};
  Tensor b = b0.defined() ? b0.detach().requires_grad_() : Tensor{};
  const Tensor y = layer_norm(x, {x0.size(-1)}, w, b, 1e-5);
  sum(y * weights).backward();
  return {y.detach(), x.grad(), w.defined() ? w.grad() : Tensor{}, b.defined() ? b.grad() : Tensor{}};
}

}  // namespace

// Note [Fused layer norm]: layer_norm is one call each way on every device
// (on the OpenCL and CUDA ones layer_norm.kern: one launch forward, at most
// three backward). Its values and gradients against the composite
// (ANVIL_NO_FUSED=1), with and without weight and bias, over more rows than
// one block of the weight's sums; the same bits run again and, on the CPU,
// on one thread and on two.
class LayerNormFused : public anvil::testing::DeviceTest {};

TEST_P(LayerNormFused, AgainstTheCompositeAndTheSameBitsAgain) {
  const Device d = device();
  std::vector<DType> dtypes{f32};
  if (properties(d).fp64) dtypes.push_back(f64);
  for (DType t : dtypes)
    for (detail::FusedOp op : {detail::FusedOp::LayerNorm, detail::FusedOp::LayerNormBackward})
      EXPECT_TRUE(detail::backend_for(d.type())->supports_fused(op, t, d.index())) << to_string(t);
  manual_seed(12);
  const int threads = num_threads();
  for (DType t : dtypes)
    for (int affine = 0; affine < 4; ++affine) {
      SCOPED_TRACE(::testing::Message() << to_string(t) << " weight " << (affine & 1) << " bias " << (affine & 2));
      const Tensor x = (randn({37, 17, 64}, d) * 3 + 1).to(t), weights = randn({37, 17, 64}, d).to(t);
      const Tensor w = (affine & 1) ? randn({64}, d).to(t) : Tensor{},
                   b = (affine & 2) ? randn({64}, d).to(t) : Tensor{};
      const LayerNormResult fused = run_layer_norm(x, w, b, weights, false),
                            composite = run_layer_norm(x, w, b, weights, true);
      const double tol = t == f64 ? 1e-10 : 1e-4;
      EXPECT_TRUE(allclose(fused.y, composite.y, tol, tol));
      EXPECT_TRUE(allclose(fused.gx, composite.gx, tol, tol));
      if (w.defined()) {
        EXPECT_TRUE(allclose(fused.gw, composite.gw, tol, tol));
      }
      if (b.defined()) {
        EXPECT_TRUE(allclose(fused.gb, composite.gb, tol, tol));
      }
      if (d.is_cpu()) set_num_threads(threads == 1 ? 2 : 1);
      const LayerNormResult other = run_layer_norm(x, w, b, weights, false);
      set_num_threads(threads);
      EXPECT_TRUE(equal(other.y, fused.y) && equal(other.gx, fused.gx));
      if (w.defined()) {
        EXPECT_TRUE(equal(other.gw, fused.gw));
      }
      if (b.defined()) {
        EXPECT_TRUE(equal(other.gb, fused.gb));
      }
    }
  // A strided weight and bias (every other column of a [32, 2]): the
  // kernels read them as rows, so the op must pass them contiguous both ways.
  {
    const Tensor x0 = randn({6, 7, 32}, d), weights = randn({6, 7, 32}, d);
    const Tensor w0 = randn({32, 2}, d).select(1, 0), b0 = randn({32, 2}, d).select(1, 1);
    ASSERT_FALSE(w0.is_contiguous());
    const LayerNormResult fused = run_layer_norm(x0, w0, b0, weights, false),
                          composite = run_layer_norm(x0, w0, b0, weights, true);
    EXPECT_TRUE(allclose(fused.y, composite.y, 1e-4, 1e-4));
    EXPECT_TRUE(allclose(fused.gx, composite.gx, 1e-4, 1e-4));
    EXPECT_TRUE(allclose(fused.gw, composite.gw, 1e-4, 1e-4));
    EXPECT_TRUE(allclose(fused.gb, composite.gb, 1e-4, 1e-4));
  }
  Tensor x = randn({8, 5, 32}, d).requires_grad_();
  const Tensor w = ones({32}, d).requires_grad_(), b = zeros({32}, d).requires_grad_();
  Ledger forward;
  const Tensor y = layer_norm(x, {32}, w, b);
  EXPECT_EQ(forward.report().device_work(d).launches, 1u) << forward.report();
  const Tensor g = ones({8, 5, 32}, d);
  Ledger backward;
  y.backward(g);
  // CPU: the kernel, then the three leaves' gradients stored (no
  // accumulation on a first pass); devices: grad_x by rows, the blocks'
  // sums, the sums over blocks.
  EXPECT_LE(backward.report().device_work(d).launches, d.is_cpu() ? 2u : 3u) << backward.report();
}

ANVIL_INSTANTIATE_DEVICE_TEST(LayerNormFused);
