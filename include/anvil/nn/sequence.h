// anvil/nn/sequence.h — the layers of sequence models, with PyTorch's
// constructor arguments, parameter names and gate orders, so a state_dict
// saved from PyTorch loads as it is:
//
//   anvil::nn::GRU gru(vocab, 256);                      // weight_ih_l0 [3*256, vocab], ...
//   auto [output, h_n] = gru.forward(x, h0);             // x [T, N, vocab]; h0 [1, N, 256] or {}
//   anvil::nn::LSTM lstm(8, 16, 2, true, /*batch_first=*/true);
//   auto [y, h, c] = lstm.forward(x, h0, c0);
//   anvil::nn::MultiheadAttention mha(64, 4);
//   auto [out, weights] = mha.forward(q, k, v);          // weights averaged over heads
//
// A layer with several inputs or outputs has a named forward overload that
// returns a struct; its one-tensor forward (what Sequential calls) is the
// common case: zero initial state, self-attention, the output alone.
// Built on the public op API, so every layer runs and trains on every device.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "anvil/nn.h"

namespace anvil::nn {

// Rows of `weight` [num_embeddings, embedding_dim] (initialised N(0, 1))
// picked by integer indices of any shape: indices.shape + [embedding_dim].
class Embedding : public Module {
 public:
  Embedding(std::int64_t num_embeddings, std::int64_t embedding_dim);
  Tensor forward(const Tensor& indices) override;
  std::string name() const override;
  std::shared_ptr<Module> clone_impl(std::optional<Device> device) const override;

 private:
  std::int64_t num_, dim_;
  Tensor w_;
};

// layer_norm over the trailing normalized_shape dims; weight (ones) and
// bias (zeros) of that shape when elementwise_affine.
class LayerNorm : public Module {
 public:
  explicit LayerNorm(Shape normalized_shape, double eps = 1e-5, bool elementwise_affine = true);
  explicit LayerNorm(std::int64_t normalized_shape, double eps = 1e-5, bool elementwise_affine = true)
      : LayerNorm(Shape{normalized_shape}, eps, elementwise_affine) {}
  Tensor forward(const Tensor& x) override;
  std::string name() const override;
  std::shared_ptr<Module> clone_impl(std::optional<Device> device) const override;
  double eps() const noexcept { return eps_; }

 private:
  Shape shape_;
  double eps_;
  Tensor w_, b_;
};

// What RNN and GRU return: the last layer's hidden state at every step,
// output [T, N, H] ([N, T, H] with batch_first, [T, H] for an unbatched
// [T, input_size] input), and every layer's last one, h_n [num_layers, N, H]
// ([num_layers, H] unbatched). LSTM adds its last cell state c_n.
struct RNNOutput {
  Tensor output, h_n;
};
struct LSTMOutput {
  Tensor output, h_n, c_n;
};

// The body the three recurrent layers share: per layer l the parameters
// weight_ih_l<l> [G*H, in], weight_hh_l<l> [G*H, H], bias_ih_l<l>,
// bias_hh_l<l> [G*H] (G gates: 1, 3 for GRU's r, z, n, 4 for LSTM's
// i, f, g, o), all uniform in ±1/sqrt(H) as PyTorch; dropout on every
// layer's output but the last while training. One direction only.
class RecurrentBase : public Module {
 public:
  std::int64_t input_size() const noexcept { return input_; }
  std::int64_t hidden_size() const noexcept { return hidden_; }
  std::int64_t num_layers() const noexcept { return layers_; }
  bool batch_first() const noexcept { return batch_first_; }
  std::shared_ptr<Module> clone_impl(std::optional<Device> device) const override;

 protected:
  enum class Cell { Tanh, ReLU, GRU, LSTM };
  RecurrentBase(Cell cell, std::int64_t input_size, std::int64_t hidden_size, std::int64_t num_layers, bool bias,
                bool batch_first, double dropout);
  // {output, h_n} or, for LSTM, {output, h_n, c_n}; an undefined state is zeros.
  // Through anvil::rnn: the backend's fused recurrent layer where it has one.
  std::vector<Tensor> run(const Tensor& x, const Tensor& h0, const Tensor& c0);
  std::string describe(const char* kind) const;
  RnnMode mode() const noexcept;

 private:
  Cell cell_;
  std::int64_t input_, hidden_, layers_;
  bool bias_, batch_first_;
  double dropout_;
  std::vector<std::vector<Tensor>> w_;  // per layer: w_ih, w_hh[, b_ih, b_hh]
};

// h_t = tanh(x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh) (or relu).
class RNN : public RecurrentBase {
 public:
  RNN(std::int64_t input_size, std::int64_t hidden_size, std::int64_t num_layers = 1,
      const std::string& nonlinearity = "tanh", bool bias = true, bool batch_first = false, double dropout = 0.0);
  Tensor forward(const Tensor& x) override { return forward(x, Tensor()).output; }
  RNNOutput forward(const Tensor& x, const Tensor& h0);
  std::string name() const override { return describe("RNN"); }
};

// PyTorch's GRU: r, z = sigmoid(..), n = tanh(x W_in + b_in + r * (h W_hn + b_hn)),
// h = (1 - z) * n + z * h.
class GRU : public RecurrentBase {
 public:
  GRU(std::int64_t input_size, std::int64_t hidden_size, std::int64_t num_layers = 1, bool bias = true,
      bool batch_first = false, double dropout = 0.0);
  Tensor forward(const Tensor& x) override { return forward(x, Tensor()).output; }
  RNNOutput forward(const Tensor& x, const Tensor& h0);
  std::string name() const override { return describe("GRU"); }
};

// PyTorch's LSTM: c = f * c + i * g, h = o * tanh(c). h0 and c0 are given
// together or not at all.
class LSTM : public RecurrentBase {
 public:
  LSTM(std::int64_t input_size, std::int64_t hidden_size, std::int64_t num_layers = 1, bool bias = true,
       bool batch_first = false, double dropout = 0.0);
  Tensor forward(const Tensor& x) override { return forward(x, Tensor(), Tensor()).output; }
  LSTMOutput forward(const Tensor& x, const Tensor& h0, const Tensor& c0);
  std::string name() const override { return describe("LSTM"); }
};

// output [L, N, E] ([N, L, E] with batch_first) and the attention weights
// [N, L, S], averaged over the heads ([N, heads, L, S] when not averaged;
// undefined when not asked for).
struct AttentionOutput {
  Tensor output, weights;
};

// PyTorch's MultiheadAttention (kdim = vdim = embed_dim): in_proj_weight
// [3E, E] (Xavier-uniform), in_proj_bias [3E] (zeros), out_proj (Linear,
// bias zeros). Masks take PyTorch's MultiheadAttention meaning: a bool
// attn_mask [L, S] or [N * heads, L, S] and key_padding_mask [N, S] are true
// where attention is NOT allowed; float masks are added to the scores.
class MultiheadAttention : public Module {
 public:
  MultiheadAttention(std::int64_t embed_dim, std::int64_t num_heads, double dropout = 0.0, bool bias = true,
                     bool batch_first = false);
  Tensor forward(const Tensor& x) override { return forward(x, x, x, Tensor(), false).output; }
  AttentionOutput forward(const Tensor& query, const Tensor& key, const Tensor& value,
                          const Tensor& key_padding_mask = {}, bool need_weights = true, const Tensor& attn_mask = {},
                          bool average_attn_weights = true);
  std::string name() const override;
  std::shared_ptr<Module> clone_impl(std::optional<Device> device) const override;
  bool batch_first() const noexcept { return batch_first_; }

 private:
  std::int64_t embed_, heads_;
  double dropout_;
  bool batch_first_;
  Tensor in_w_, in_b_;
  std::shared_ptr<Linear> out_proj_;
};

// PyTorch's TransformerEncoderLayer: self-attention and a feed-forward
// block (linear1, activation "relu" or "gelu", dropout, linear2), each with
// a residual connection and LayerNorm (after it, or before it with
// norm_first). Children: self_attn, linear1, dropout, linear2, norm1, norm2,
// dropout1, dropout2.
class TransformerEncoderLayer : public Module {
 public:
  TransformerEncoderLayer(std::int64_t d_model, std::int64_t nhead, std::int64_t dim_feedforward = 2048,
                          double dropout = 0.1, const std::string& activation = "relu", double layer_norm_eps = 1e-5,
                          bool batch_first = false, bool norm_first = false);
  Tensor forward(const Tensor& src) override { return forward(src, Tensor()); }
  Tensor forward(const Tensor& src, const Tensor& src_mask, const Tensor& src_key_padding_mask = {});
  std::string name() const override;
  std::shared_ptr<Module> clone_impl(std::optional<Device> device) const override;

 private:
  Tensor self_attention(const Tensor& x, const Tensor& mask, const Tensor& padding);
  Tensor feed_forward(const Tensor& x);
  std::int64_t d_model_, nhead_, ff_;
  bool gelu_, norm_first_;
  std::shared_ptr<MultiheadAttention> self_attn_;
  std::shared_ptr<Linear> linear1_;
  std::shared_ptr<Dropout> dropout_;
  std::shared_ptr<Linear> linear2_;
  std::shared_ptr<LayerNorm> norm1_, norm2_;
  std::shared_ptr<Dropout> dropout1_, dropout2_;
};

}  // namespace anvil::nn
