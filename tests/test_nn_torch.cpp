// anvil's layers against PyTorch 1.13: each row builds a layer, loads the
// parameters PyTorch used through their state_dict names (strict, so the
// names and shapes must match PyTorch's), runs the same inputs on every
// device and compares outputs, input gradients and parameter gradients.
// The reference file comes from tests/python/torch_layers_reference.py;
// a new layer is one case there and one row in rows() here.
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "anvil/backends.h"
#include "anvil/nn/sequence.h"
#include "device_test.h"
#include "tf32_guard.h"

using namespace anvil;

namespace {
using Inputs = const std::vector<Tensor>&;
struct Row {
  std::string name;
  std::function<std::shared_ptr<nn::Module>()> make;
  // Outputs in the order the Python case returns them.
  std::function<std::vector<Tensor>(nn::Module&, Inputs)> run;
};

template <typename M>
M& as(nn::Module& m) {
  return dynamic_cast<M&>(m);
}

std::vector<Row> rows() {
  using M = nn::Module;
  return {
      {"layernorm",
       [] {
         return std::make_shared<nn::LayerNorm>(Shape{4, 6});
       },
       [](M& m, Inputs x) { return std::vector<Tensor>{m(x[0])}; }},
      {"batchnorm2d", [] { return std::make_shared<nn::BatchNorm2d>(3); },
       [](M& m, Inputs x) {
         const Tensor y = m(x[0]);
         const auto state = m.state_dict();
         return std::vector<Tensor>{y, state.at("running_mean"), state.at("running_var")};
       }},
      {"batchnorm1d_eval",
       [] {
         auto m = std::make_shared<nn::BatchNorm1d>(4);
         m->eval();
         return m;
       },
       [](M& m, Inputs x) { return std::vector<Tensor>{m(x[0])}; }},
      {"embedding", [] { return std::make_shared<nn::Embedding>(10, 5); },
       [](M& m, Inputs x) { return std::vector<Tensor>{m(x[0])}; }},
      {"rnn_tanh", [] { return std::make_shared<nn::RNN>(4, 6, 2); },
       [](M& m, Inputs x) {
         auto r = as<nn::RNN>(m).forward(x[0], x[1]);
         return std::vector<Tensor>{r.output, r.h_n};
       }},
      {"rnn_relu_batch_first", [] { return std::make_shared<nn::RNN>(4, 5, 1, "relu", true, true); },
       [](M& m, Inputs x) {
         auto r = as<nn::RNN>(m).forward(x[0], Tensor());
         return std::vector<Tensor>{r.output, r.h_n};
       }},
      {"gru", [] { return std::make_shared<nn::GRU>(4, 6, 2, true, true); },
       [](M& m, Inputs x) {
         auto r = as<nn::GRU>(m).forward(x[0], x[1]);
         return std::vector<Tensor>{r.output, r.h_n};
       }},
      {"gru_unbatched", [] { return std::make_shared<nn::GRU>(3, 4); },
       [](M& m, Inputs x) {
         auto r = as<nn::GRU>(m).forward(x[0], Tensor());
         return std::vector<Tensor>{r.output, r.h_n};
       }},
      {"lstm", [] { return std::make_shared<nn::LSTM>(4, 6, 2); },
       [](M& m, Inputs x) {
         auto r = as<nn::LSTM>(m).forward(x[0], x[1], x[2]);
         return std::vector<Tensor>{r.output, r.h_n, r.c_n};
       }},
      {"lstm_nobias_batch_first", [] { return std::make_shared<nn::LSTM>(3, 5, 1, false, true); },
       [](M& m, Inputs x) {
         auto r = as<nn::LSTM>(m).forward(x[0], Tensor(), Tensor());
         return std::vector<Tensor>{r.output, r.h_n, r.c_n};
       }},
      {"mha", [] { return std::make_shared<nn::MultiheadAttention>(8, 2); },
       [](M& m, Inputs x) {
         auto r = as<nn::MultiheadAttention>(m).forward(x[0], x[1], x[2], x[3] > 0);
         return std::vector<Tensor>{r.output, r.weights};
       }},
      {"mha_batch_first_float_mask", [] { return std::make_shared<nn::MultiheadAttention>(8, 4, 0.0, true, true); },
       [](M& m, Inputs x) {
         auto r = as<nn::MultiheadAttention>(m).forward(x[0], x[0], x[0], {}, true, x[1], false);
         return std::vector<Tensor>{r.output, r.weights};
       }},
      {"encoder_relu", [] { return std::make_shared<nn::TransformerEncoderLayer>(8, 2, 16, 0.0); },
       [](M& m, Inputs x) { return std::vector<Tensor>{as<nn::TransformerEncoderLayer>(m).forward(x[0], x[1] > 0)}; }},
      {"encoder_gelu_norm_first",
       [] { return std::make_shared<nn::TransformerEncoderLayer>(8, 2, 16, 0.0, "gelu", 1e-5, true, true); },
       [](M& m, Inputs x) { return std::vector<Tensor>{m(x[0])}; }},
  };
}

// The committed references, or ANVIL_TORCH_LAYERS: a file the generator
// just wrote (ctest test_nn_torch_fresh_reference).
const std::map<std::string, Tensor>& reference() {
  static const std::map<std::string, Tensor> r = [] {
    const char* fresh = std::getenv("ANVIL_TORCH_LAYERS");
    return load_safetensors(fresh != nullptr && *fresh != '\0'
                                ? std::string(fresh)
                                : std::string(ANVIL_SOURCE_DIR) + "/tests/data/torch_layers.safetensors");
  }();
  return r;
}

// The entries "<row>.<kind>.<key>", keyed by <key>.
std::map<std::string, Tensor> entries(const std::string& row, const std::string& kind) {
  const std::string prefix = row + "." + kind + ".";
  std::map<std::string, Tensor> out;
  for (const auto& [k, v] : reference())
    if (k.rfind(prefix, 0) == 0) out[k.substr(prefix.size())] = v;
  return out;
}

::testing::AssertionResult near(const Tensor& got, const Tensor& want, const std::string& what) {
  if (!got.defined()) return ::testing::AssertionFailure() << what << ": no tensor";
  if (got.shape() != want.shape())
    return ::testing::AssertionFailure() << what << ": shape " << got.shape() << ", expected " << want.shape();
  if (!allclose(got.cpu().to(f32), want, 1e-4, 2e-5))
    return ::testing::AssertionFailure() << what << ": max |difference| "
                                         << amax(abs(got.cpu().to(f32) - want)).item<float>();
  return ::testing::AssertionSuccess();
}
}  // namespace

class TorchLayers : public anvil::testing::DeviceTest {};

TEST_P(TorchLayers, MatchPyTorch) {
  const Device d = device();
  // PyTorch's references are strict f32, and so is cuDNN here (the recurrent
  // layers run through it on CUDA); TF32 is held to its own tolerance in
  // test_nn_rnn_fused.
  const anvil::testing::CudnnTf32Guard strict(false);
  for (const Row& row : rows()) {
    SCOPED_TRACE(row.name);
    std::shared_ptr<nn::Module> m = row.make();
    m->load_state_dict(entries(row.name, "param"));  // strict: PyTorch's names and shapes
    m->to(d);
    std::vector<Tensor> inputs;
    for (const auto& [i, t] : entries(row.name, "input")) {
      Tensor x = t.to(d).clone();  // the shared reference itself never gets a gradient
      if (is_floating(x.dtype())) x.requires_grad_();
      inputs.push_back(x);
    }
    const std::vector<Tensor> outputs = row.run(*m, inputs);
    const auto want = entries(row.name, "output");
    const auto upstream = entries(row.name, "grad_output");
    ASSERT_EQ(outputs.size(), want.size());
    Tensor loss = zeros({}, d);
    for (std::size_t j = 0; j < outputs.size(); ++j) {
      const std::string key = std::to_string(j);
      EXPECT_TRUE(near(outputs[j], want.at(key), "output " + key));
      EXPECT_EQ(outputs[j].device(), d);
      loss = loss + sum(outputs[j] * upstream.at(key).to(d));
    }
    loss.backward();
    for (const auto& [i, g] : entries(row.name, "grad_input"))
      EXPECT_TRUE(near(inputs[std::stoul(i)].grad(), g, "grad of input " + i));
    const auto grads = entries(row.name, "grad_param");
    const auto params = m->named_parameters();
    EXPECT_EQ(params.size(), grads.size());
    for (const auto& [k, p] : params) EXPECT_TRUE(near(p.grad(), grads.at(k), "grad of " + k));
  }
}

ANVIL_INSTANTIATE_DEVICE_TEST(TorchLayers);
