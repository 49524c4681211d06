// The layers of anvil/nn/sequence.h.
#include "anvil/nn/sequence.h"

#include <cmath>
#include <limits>

#include "anvil/autograd.h"
#include "nn/repr.h"

namespace anvil::nn {

namespace {
constexpr double kNegInf = -std::numeric_limits<double>::infinity();
}  // namespace

// --- Embedding, LayerNorm -------------------------------------------------------------------
Embedding::Embedding(std::int64_t num_embeddings, std::int64_t embedding_dim)
    : num_(num_embeddings), dim_(embedding_dim) {
  ANVIL_CHECK(num_embeddings > 0 && embedding_dim > 0, ValueError,
              "Embedding: sizes must be positive; expected > 0, got num_embeddings ", num_embeddings,
              " and embedding_dim ", embedding_dim);
  Tensor w = empty({num_embeddings, embedding_dim});
  init::normal_(w);
  w_ = register_parameter("weight", w);
}

Tensor Embedding::forward(const Tensor& indices) { return embedding(indices, w_); }

std::string Embedding::name() const { return detail::cat("Embedding(", num_, ", ", dim_, ")"); }

LayerNorm::LayerNorm(Shape normalized_shape, double eps, bool elementwise_affine)
    : shape_(normalized_shape), eps_(eps) {
  ANVIL_CHECK(normalized_shape.size() > 0 && normalized_shape.numel() > 0, ValueError,
              "LayerNorm: normalized_shape must be non-empty; expected sizes > 0, got ", normalized_shape);
  if (elementwise_affine) {
    w_ = register_parameter("weight", ones(normalized_shape));
    b_ = register_parameter("bias", zeros(normalized_shape));
  }
}

Tensor LayerNorm::forward(const Tensor& x) { return layer_norm(x, shape_, w_, b_, eps_); }

std::string LayerNorm::name() const {
  return detail::cat("LayerNorm(", shape_, ", eps=", eps_, ", elementwise_affine=", bool_text(w_.defined()), ")");
}

// --- RNN, GRU, LSTM ---------------------------------------------------------------------------
RecurrentBase::RecurrentBase(Cell cell, std::int64_t input_size, std::int64_t hidden_size, std::int64_t num_layers,
                             bool bias, bool batch_first, double dropout)
    : cell_(cell),
      input_(input_size),
      hidden_(hidden_size),
      layers_(num_layers),
      bias_(bias),
      batch_first_(batch_first),
      dropout_(dropout) {
  ANVIL_CHECK(input_size > 0 && hidden_size > 0 && num_layers > 0, ValueError,
              "RNN: sizes must be positive; expected > 0, got input_size ", input_size, ", hidden_size ", hidden_size,
              " and num_layers ", num_layers);
  ANVIL_CHECK(dropout >= 0.0 && dropout <= 1.0, ValueError, "RNN: dropout is a probability; expected [0, 1], got ",
              dropout);
  const std::int64_t gates = cell == Cell::GRU ? 3 : cell == Cell::LSTM ? 4 : 1;
  const double bound = 1.0 / std::sqrt(static_cast<double>(hidden_size));
  auto uniform = [&](const Shape& s) {
    Tensor t = empty(s);
    init::uniform_(t, -bound, bound);
    return t;
  };
  for (std::int64_t l = 0; l < num_layers; ++l) {
    const std::string sfx = detail::cat("_l", l);
    std::vector<Tensor> w;
    w.push_back(
        register_parameter("weight_ih" + sfx, uniform({gates * hidden_size, l == 0 ? input_size : hidden_size})));
    w.push_back(register_parameter("weight_hh" + sfx, uniform({gates * hidden_size, hidden_size})));
    if (bias) {
      w.push_back(register_parameter("bias_ih" + sfx, uniform({gates * hidden_size})));
      w.push_back(register_parameter("bias_hh" + sfx, uniform({gates * hidden_size})));
    }
    w_.push_back(std::move(w));
  }
}

RnnMode RecurrentBase::mode() const noexcept {
  switch (cell_) {
    case Cell::Tanh:
      return RnnMode::Tanh;
    case Cell::ReLU:
      return RnnMode::ReLU;
    case Cell::GRU:
      return RnnMode::GRU;
    case Cell::LSTM:
      break;
  }
  return RnnMode::LSTM;
}

std::vector<Tensor> RecurrentBase::run(const Tensor& x, const Tensor& h0, const Tensor& c0) {
  const char* op = cell_ == Cell::GRU ? "GRU" : cell_ == Cell::LSTM ? "LSTM" : "RNN";
  ANVIL_CHECK(x.defined() && (x.dim() == 2 || x.dim() == 3) && x.size(-1) == input_, ShapeError, op,
              ": input must be [T, N, input_size]", batch_first_ ? " (batch_first: [N, T, input_size])" : "",
              " or [T, input_size]; expected last dim ", input_, ", got ", x.defined() ? x.shape() : Shape{});
  const bool batched = x.dim() == 3;
  const std::int64_t n = !batched ? 1 : x.size(batch_first_ ? 0 : 1), H = hidden_;
  const Shape state_shape = batched ? Shape{layers_, n, H} : Shape{layers_, H};
  ANVIL_CHECK(cell_ != Cell::LSTM || h0.defined() == c0.defined(), ValueError, op,
              ": h0 and c0 come together; expected both or neither, got ", h0.defined() ? "h0 alone" : "c0 alone");
  auto initial = [&](const Tensor& s, const char* what) {
    ANVIL_CHECK(s.shape() == state_shape, ShapeError, op, ": ", what, " has the wrong shape; expected ", state_shape,
                ", got ", s.shape());
    return batched ? s : s.unsqueeze(1);
  };
  const Tensor h_init = h0.defined() ? initial(h0, "h0") : Tensor();
  const Tensor c_init = cell_ == Cell::LSTM && c0.defined() ? initial(c0, "c0") : Tensor();
  std::vector<Tensor> weights;
  for (const std::vector<Tensor>& w : w_) weights.insert(weights.end(), w.begin(), w.end());
  // Batch-first input goes to the op as it is: a fused recurrent layer
  // (cuDNN) reads it in that layout.
  const Tensor in = batched ? x : x.unsqueeze(1);
  const RnnResult r =
      rnn(mode(), in, h_init, c_init, weights, layers_, bias_, batched && batch_first_, dropout_, is_training());
  auto state_out = [&](const Tensor& t) { return batched ? t : t.squeeze(1); };
  std::vector<Tensor> out{batched ? r.output : r.output.squeeze(1), state_out(r.h_n)};
  if (cell_ == Cell::LSTM) out.push_back(state_out(r.c_n));
  return out;
}

std::string RecurrentBase::describe(const char* kind) const {
  std::string s = detail::cat(kind, "(", input_, ", ", hidden_);
  if (layers_ != 1) s += detail::cat(", num_layers=", layers_);
  if (cell_ == Cell::ReLU) s += ", nonlinearity=relu";
  if (!bias_) s += ", bias=false";
  if (batch_first_) s += ", batch_first=true";
  if (dropout_ != 0.0) s += detail::cat(", dropout=", dropout_);
  return s + ")";
}

RNN::RNN(std::int64_t input_size, std::int64_t hidden_size, std::int64_t num_layers, const std::string& nonlinearity,
         bool bias, bool batch_first, double dropout)
    : RecurrentBase(nonlinearity == "relu" ? Cell::ReLU : Cell::Tanh, input_size, hidden_size, num_layers, bias,
                    batch_first, dropout) {
  ANVIL_CHECK(nonlinearity == "tanh" || nonlinearity == "relu", ValueError,
              "RNN: unknown nonlinearity; expected \"tanh\" or \"relu\", got \"", nonlinearity, "\"");
}
RNNOutput RNN::forward(const Tensor& x, const Tensor& h0) {
  std::vector<Tensor> r = run(x, h0, Tensor());
  return {r[0], r[1]};
}

GRU::GRU(std::int64_t input_size, std::int64_t hidden_size, std::int64_t num_layers, bool bias, bool batch_first,
         double dropout)
    : RecurrentBase(Cell::GRU, input_size, hidden_size, num_layers, bias, batch_first, dropout) {}
RNNOutput GRU::forward(const Tensor& x, const Tensor& h0) {
  std::vector<Tensor> r = run(x, h0, Tensor());
  return {r[0], r[1]};
}

LSTM::LSTM(std::int64_t input_size, std::int64_t hidden_size, std::int64_t num_layers, bool bias, bool batch_first,
           double dropout)
    : RecurrentBase(Cell::LSTM, input_size, hidden_size, num_layers, bias, batch_first, dropout) {}
LSTMOutput LSTM::forward(const Tensor& x, const Tensor& h0, const Tensor& c0) {
  std::vector<Tensor> r = run(x, h0, c0);
  return {r[0], r[1], r[2]};
}

// --- MultiheadAttention -------------------------------------------------------------------------
MultiheadAttention::MultiheadAttention(std::int64_t embed_dim, std::int64_t num_heads, double dropout, bool bias,
                                       bool batch_first)
    : embed_(embed_dim), heads_(num_heads), dropout_(dropout), batch_first_(batch_first) {
  ANVIL_CHECK(embed_dim > 0 && num_heads > 0 && embed_dim % num_heads == 0, ValueError,
              "MultiheadAttention: embed_dim must be a positive multiple of num_heads; expected a multiple of ",
              num_heads, ", got ", embed_dim);
  Tensor w = empty({3 * embed_dim, embed_dim});
  init::xavier_uniform_(w);
  in_w_ = register_parameter("in_proj_weight", w);
  if (bias) in_b_ = register_parameter("in_proj_bias", zeros({3 * embed_dim}));
  out_proj_ = register_module("out_proj", Linear(embed_dim, embed_dim, bias));
  if (bias) {
    Tensor b = out_proj_->bias();
    init::zeros_(b);
  }
}

AttentionOutput MultiheadAttention::forward(const Tensor& query, const Tensor& key, const Tensor& value,
                                            const Tensor& key_padding_mask, bool need_weights, const Tensor& attn_mask,
                                            bool average_attn_weights) {
  const std::int64_t E = embed_, h = heads_, d = E / h;
  for (const Tensor* t : {&query, &key, &value})
    ANVIL_CHECK(t->defined() && t->dim() == 3 && t->size(-1) == E, ShapeError,
                "MultiheadAttention: query, key and value must be ",
                batch_first_ ? "[N, L, embed_dim]" : "[L, N, embed_dim]", "; expected 3 dims ending in ", E, ", got ",
                t->defined() ? t->shape() : Shape{});
  auto batch_major = [&](const Tensor& t) { return batch_first_ ? t : t.transpose(0, 1); };  // [N, L, E]
  const Tensor q = batch_major(query), k = batch_major(key), v = batch_major(value);
  const std::int64_t n = q.size(0), L = q.size(1), S = k.size(1);
  ANVIL_CHECK(k.size(0) == n && v.size(0) == n && v.size(1) == S, ShapeError,
              "MultiheadAttention: key and value must match the query's batch and each other's length; expected [", n,
              ", ", S, ", ", E, "], got ", k.shape(), " and ", v.shape());
  auto project = [&](const Tensor& t, std::int64_t part, std::int64_t len) {
    Tensor p = matmul(t, in_w_.narrow(0, part * E, E).t());
    if (in_b_.defined()) p = p + in_b_.narrow(0, part * E, E);
    return p.reshape({n, len, h, d}).transpose(1, 2);  // [N, heads, len, d]
  };
  const Tensor qh = project(q, 0, L), kh = project(k, 1, S), vh = project(v, 2, S);

  // One additive mask [.., L, S] from both masks (true = not allowed).
  auto additive = [&](const Tensor& m, const Shape& shape) {
    return m.dtype() == DType::Bool ? zeros(shape, m.device(), q.dtype()).masked_fill(m.reshape(shape), kNegInf)
                                    : m.reshape(shape);
  };
  Tensor mask;
  if (attn_mask.defined()) {
    const bool per_head = attn_mask.dim() == 3;
    const Shape want = per_head ? Shape{n * h, L, S} : Shape{L, S};
    ANVIL_CHECK(attn_mask.shape() == want, ShapeError, "MultiheadAttention: attn_mask has the wrong shape; expected ",
                Shape{L, S}, " or ", Shape{n * h, L, S}, ", got ", attn_mask.shape());
    mask = additive(attn_mask, per_head ? Shape{n, h, L, S} : Shape{L, S});
  }
  if (key_padding_mask.defined()) {
    ANVIL_CHECK(key_padding_mask.shape() == Shape({n, S}), ShapeError,
                "MultiheadAttention: key_padding_mask must be [N, S]; expected ", Shape{n, S}, ", got ",
                key_padding_mask.shape());
    const Tensor km = additive(key_padding_mask, {n, 1, 1, S});
    mask = mask.defined() ? mask + km : km;
  }
  const Tensor weights = attention_weights(qh, kh, mask);  // [N, heads, L, S]
  const Tensor heads = matmul(dropout(weights, dropout_, is_training()), vh);
  Tensor out = (*out_proj_)(heads.transpose(1, 2).reshape({n, L, E}));
  if (!batch_first_) out = out.transpose(0, 1);
  Tensor w;
  if (need_weights) w = average_attn_weights ? weights.mean(1) : weights;
  return {out, w};
}

std::string MultiheadAttention::name() const {
  return detail::cat("MultiheadAttention(embed_dim=", embed_, ", num_heads=", heads_, ")");
}

// --- TransformerEncoderLayer --------------------------------------------------------------------
TransformerEncoderLayer::TransformerEncoderLayer(std::int64_t d_model, std::int64_t nhead, std::int64_t dim_feedforward,
                                                 double dropout, const std::string& activation, double layer_norm_eps,
                                                 bool batch_first, bool norm_first)
    : d_model_(d_model),
      nhead_(nhead),
      ff_(dim_feedforward),
      gelu_(activation == "gelu"),
      norm_first_(norm_first),
      self_attn_(register_module("self_attn", MultiheadAttention(d_model, nhead, dropout, true, batch_first))),
      linear1_(register_module("linear1", Linear(d_model, dim_feedforward))),
      dropout_(register_module("dropout", Dropout(dropout))),
      linear2_(register_module("linear2", Linear(dim_feedforward, d_model))),
      norm1_(register_module("norm1", LayerNorm(d_model, layer_norm_eps))),
      norm2_(register_module("norm2", LayerNorm(d_model, layer_norm_eps))),
      dropout1_(register_module("dropout1", Dropout(dropout))),
      dropout2_(register_module("dropout2", Dropout(dropout))) {
  ANVIL_CHECK(activation == "relu" || activation == "gelu", ValueError,
              "TransformerEncoderLayer: unknown activation; expected \"relu\" or \"gelu\", got \"", activation, "\"");
}

Tensor TransformerEncoderLayer::self_attention(const Tensor& x, const Tensor& mask, const Tensor& padding) {
  return (*dropout1_)(self_attn_->forward(x, x, x, padding, false, mask).output);
}

Tensor TransformerEncoderLayer::feed_forward(const Tensor& x) {
  const Tensor a = (*linear1_)(x);
  return (*dropout2_)((*linear2_)((*dropout_)(gelu_ ? gelu(a) : relu(a))));
}

Tensor TransformerEncoderLayer::forward(const Tensor& src, const Tensor& src_mask, const Tensor& src_key_padding_mask) {
  Tensor x = src;
  if (norm_first_) {
    x = x + self_attention((*norm1_)(x), src_mask, src_key_padding_mask);
    return x + feed_forward((*norm2_)(x));
  }
  x = (*norm1_)(x + self_attention(x, src_mask, src_key_padding_mask));
  return (*norm2_)(x + feed_forward(x));
}

std::string TransformerEncoderLayer::name() const {
  return detail::cat("TransformerEncoderLayer(d_model=", d_model_, ", nhead=", nhead_, ", dim_feedforward=", ff_,
                     ", activation=", gelu_ ? "gelu" : "relu", ", norm_first=", bool_text(norm_first_), ")");
}

}  // namespace anvil::nn
