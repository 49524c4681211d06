// The recurrent layers' op (anvil::rnn, the body of nn::RNN, GRU and LSTM):
// validated once here, then either the backend's fused recurrent layer
// (Note [Fused recurrent layers], backend.h: cuDNN on CUDA, oneDNN on the
// CPU), one op forward and one gradient rule backward, or the composite every
// backend runs, one time step at a time from matmul and elementwise ops.
#include <utility>
#include <vector>

#include "anvil/autograd.h"
#include "autograd/graph.h"
#include "core/env_flag.h"
#include "core/observer.h"
#include "ops/autocast.h"
#include "ops/op_common.h"

namespace anvil {

namespace {

detail::RnnMode backend_mode(RnnMode m) noexcept {
  switch (m) {
    case RnnMode::Tanh:
      return detail::RnnMode::Tanh;
    case RnnMode::ReLU:
      return detail::RnnMode::Relu;
    case RnnMode::GRU:
      return detail::RnnMode::Gru;
    case RnnMode::LSTM:
      break;
  }
  return detail::RnnMode::Lstm;
}

// The composite: per layer the input's share of every step's gates in one
// GEMM, then a loop over the steps with only h @ W_hh^T and the cell's
// elementwise ops inside. seq is [T, N, in]; h_init and c_init [L, N, H].
std::vector<Tensor> rnn_composite(RnnMode mode, const Tensor& seq, const Tensor& h_init, const Tensor& c_init,
                                  const std::vector<Tensor>& weights, std::int64_t layers, bool has_bias,
                                  double dropout_p, bool training) {
  const std::int64_t steps = seq.size(0), n = seq.size(1), H = weights[1].size(1);
  const std::size_t per_layer = has_bias ? 4 : 2;
  Tensor layer_in = seq;
  std::vector<Tensor> h_last, c_last;
  for (std::int64_t l = 0; l < layers; ++l) {
    const Tensor* w = &weights[static_cast<std::size_t>(l) * per_layer];
    // addmm writes the bias first and the GEMM adds to it: one pass over
    // the gates fewer than matmul, then +.
    const Tensor gx =
        has_bias ? addmm(w[2], layer_in.reshape({-1, layer_in.size(2)}), w[0].t()).reshape({steps, n, w[0].size(0)})
                 : matmul(layer_in, w[0].t());
    // One transposed view for all steps: its gradient is summed over the
    // steps in W_hh^T's own (contiguous) layout and transposed once; a view
    // per step would sum one transposed gradient per step, a cache-hostile walk.
    const Tensor w_hh_t = w[1].t();
    Tensor h = h_init[l], c = mode == RnnMode::LSTM ? c_init[l] : Tensor();
    std::vector<Tensor> outs;
    outs.reserve(static_cast<std::size_t>(steps));
    for (std::int64_t t = 0; t < steps; ++t) {
      const Tensor gh = has_bias ? addmm(w[3], h, w_hh_t) : matmul(h, w_hh_t);
      const Tensor gxt = gx[t];
      switch (mode) {
        case RnnMode::Tanh:
          h = tanh(gxt + gh);
          break;
        case RnnMode::ReLU:
          h = relu(gxt + gh);
          break;
        case RnnMode::GRU: {
          // PyTorch's (and cuDNN's) n: r multiplies W_hn h + b_hn.
          const std::vector<Tensor> a = gxt.chunk(3, 1), b = gh.chunk(3, 1);
          const Tensor r = sigmoid(a[0] + b[0]), z = sigmoid(a[1] + b[1]);
          const Tensor nn = tanh(a[2] + r * b[2]);
          h = nn + z * (h - nn);  // (1 - z) * n + z * h
          break;
        }
        case RnnMode::LSTM: {
          const std::vector<Tensor> g = (gxt + gh).chunk(4, 1);
          c = sigmoid(g[1]) * c + sigmoid(g[0]) * tanh(g[2]);
          h = sigmoid(g[3]) * tanh(c);
          break;
        }
      }
      outs.push_back(h);
    }
    layer_in = steps > 0 ? stack(outs, 0) : zeros({0, n, H}, seq.device(), seq.dtype());
    if (l + 1 < layers) layer_in = dropout(layer_in, dropout_p, training);
    h_last.push_back(h);
    if (mode == RnnMode::LSTM) c_last.push_back(c);
  }
  std::vector<Tensor> r{layer_in, stack(h_last, 0)};
  if (mode == RnnMode::LSTM) r.push_back(stack(c_last, 0));
  return r;
}

// Whether the backend's fused recurrent layer takes this one: every tensor
// of one floating dtype, a non-empty sequence, no autocast to apply (the
// composite casts its GEMMs as before). ANVIL_FUSED_RNN=0 (or
// ANVIL_NO_FUSED=1) runs the composite instead; tests compare the two.
bool fused_rnn_applies(const Tensor& x, const Tensor& h0, const Tensor& c0, const std::vector<Tensor>& weights,
                       const detail::RnnArgs& shape) {
  if (detail::env_flag("ANVIL_NO_FUSED") || detail::env_flag_off("ANVIL_FUSED_RNN")) return false;
  if (shape.seq_len == 0 || shape.batch == 0 || !is_floating(x.dtype())) return false;
  for (const Tensor* t : {&h0, &c0})
    if (t->defined() && t->dtype() != x.dtype()) return false;
  for (const Tensor& w : weights)
    if (w.dtype() != x.dtype()) return false;
  if (detail::autocast_inputs(detail::AutocastList::LowerPrecision, {&x})) return false;
  return detail::dispatch::supports_fused_rnn(x.device(), shape);
}

}  // namespace

namespace detail {

namespace {
// The operand of the part of `t` (contiguous) that starts `at` elements in.
KernelOperand part(const Tensor& t, std::int64_t at) {
  KernelOperand o = operand(t);
  o.offset += at;
  return o;
}
std::int64_t state_numel(const RnnArgs& a) { return a.layers * a.batch * a.hidden_size; }
std::int64_t output_numel(const RnnArgs& a) { return a.seq_len * a.batch * a.hidden_size; }

// Every pointer the backend gets starts a multiple of kAlign elements into
// its storage, as a fresh allocation does (a vendor library may load it in
// vectors): the parts of the packed outputs below, and x, h0, c0 and the
// gradient, copied where a view starts elsewhere.
constexpr std::int64_t kAlign = 64;
std::int64_t round_up(std::int64_t n) { return (n + kAlign - 1) / kAlign * kAlign; }
Tensor aligned(const Tensor& t) {
  if (!t.defined()) return t;
  const Tensor c = t.contiguous();
  return c.offset() % kAlign == 0 ? c : c.clone();
}
// Where y, hy and cy lie in the packed outputs (Note [One tensor for the
// fused RNN's outputs]), and its length.
struct Parts {
  std::int64_t y = 0, hy = 0, cy = 0, total = 0;
};
Parts parts_of(const RnnArgs& a) {
  Parts p;
  p.hy = round_up(output_numel(a));
  p.cy = p.hy + round_up(state_numel(a));
  p.total = (a.mode == RnnMode::Lstm ? p.cy : p.hy) + state_numel(a);
  return p;
}
// Points `a` at the layer's inputs, weights and its packed outputs (y, hy and
// for an LSTM cy in one buffer), as the forward writes them and the backward
// reads them back.
void bind_operands(RnnArgs& a, const Tensor& x, const Tensor& h0, const Tensor& c0, const std::vector<Tensor>& weights,
                   const Tensor& packed) {
  const Parts at = parts_of(a);
  a.x = operand(x);
  if (h0.defined()) a.h0 = operand(h0);
  if (c0.defined()) a.c0 = operand(c0);
  for (const Tensor& w : weights) a.weights.push_back(operand(w));
  a.y = part(packed, at.y);
  a.hy = part(packed, at.hy);
  if (a.mode == RnnMode::Lstm) a.cy = part(packed, at.cy);
}

}  // namespace

// Note [One tensor for the fused RNN's outputs]
// An autograd node has one output, so the fused forward writes y, hy (and
// cy) one after the other (Parts) into one flat tensor, records its node on that
// tensor, and returns views of it: the views' gradients land in one
// gradient of the whole (zeros where an output was not used), which is what
// rnn_backward takes.
std::vector<Tensor> rnn_fused(const RnnArgs& shape, const Tensor& x, const Tensor& h0, const Tensor& c0,
                              const std::vector<Tensor>& weights) {
  RnnArgs a = shape;
  const Tensor xd = aligned(x), h0d = aligned(h0), c0d = aligned(c0);
  std::vector<Tensor> wd;
  wd.reserve(weights.size());
  for (const Tensor& w : weights) wd.push_back(w.contiguous());
  const bool lstm = a.mode == RnnMode::Lstm;
  const std::int64_t ny = output_numel(a), ns = state_numel(a);
  const Parts at = parts_of(a);
  Tensor packed = make_empty({at.total}, a.dtype, x.device());
  bind_operands(a, xd, h0d, c0d, wd, packed);

  bool record = false;
  if (grad_mode_enabled()) {
    record = requires_grad(xd) || requires_grad(h0d) || requires_grad(c0d);
    for (const Tensor& w : wd) record = record || requires_grad(w);
  }
  // Training mode keeps what the backward needs, and is the mode that drops out.
  a.training = record || a.dropout > 0.0;
  Tensor reserve;
  if (a.training) {
    a.reserve_bytes = dispatch::rnn_reserve_bytes(x.device(), a);
    reserve = make_empty({static_cast<std::int64_t>(a.reserve_bytes)}, DType::U8, x.device());
    a.reserve = operand(reserve);
  }
  dispatch::rnn_forward(x.device(), a);
  if (record) record_rnn_fused(packed, shape, xd, h0d, c0d, wd, reserve);

  const Shape y_shape =
      a.batch_first ? Shape{a.batch, a.seq_len, a.hidden_size} : Shape{a.seq_len, a.batch, a.hidden_size};
  const Shape s_shape{a.layers, a.batch, a.hidden_size};
  std::vector<Tensor> r{packed.narrow(0, at.y, ny).view(y_shape), packed.narrow(0, at.hy, ns).view(s_shape)};
  if (lstm) r.push_back(packed.narrow(0, at.cy, ns).view(s_shape));
  return r;
}

RnnGrads rnn_backward(const Tensor& grad, const RnnArgs& shape, const Tensor& x, const Tensor& h0, const Tensor& c0,
                      const std::vector<Tensor>& weights, const Tensor& packed, const Tensor& reserve, bool want_h0,
                      bool want_c0, bool want_weights) {
  RnnArgs a = shape;
  ANVIL_PROFILE_OP("rnn_backward", &grad);
  const bool lstm = a.mode == RnnMode::Lstm;
  const Parts at = parts_of(a);
  const Tensor g = aligned(grad.to(a.dtype));
  a.training = true;
  bind_operands(a, x, h0, c0, weights, packed);
  a.reserve = operand(reserve);
  a.reserve_bytes = static_cast<std::size_t>(reserve.numel());
  a.dy = part(g, at.y);
  a.dhy = part(g, at.hy);
  if (lstm) a.dcy = part(g, at.cy);

  RnnGrads out;
  out.x = make_empty(x.shape(), a.dtype, x.device());
  a.dx = operand(out.x);
  const Shape s_shape{a.layers, a.batch, a.hidden_size};
  if (want_h0) {
    out.h0 = make_empty(s_shape, a.dtype, x.device());
    a.dh0 = operand(out.h0);
  }
  if (want_c0 && lstm) {
    out.c0 = make_empty(s_shape, a.dtype, x.device());
    a.dc0 = operand(out.c0);
  }
  if (want_weights)
    for (const Tensor& w : weights) {
      out.weights.push_back(make_empty(w.shape(), a.dtype, x.device()));
      a.dweights.push_back(operand(out.weights.back()));
    }
  dispatch::rnn_backward(x.device(), a);
  return out;
}

}  // namespace detail

RnnResult rnn(RnnMode mode, const Tensor& x, const Tensor& h0, const Tensor& c0, const std::vector<Tensor>& weights,
              std::int64_t num_layers, bool has_bias, bool batch_first, double dropout_p, bool training) {
  const detail::RnnMode bmode = backend_mode(mode);
  const char* op = detail::name(bmode);
  const bool lstm = mode == RnnMode::LSTM;
  ANVIL_PROFILE_OP(op, &x, &h0, &c0);
  detail::check_defined(op, x);
  ANVIL_CHECK(x.dim() == 3, ShapeError, op, ": input must be ",
              batch_first ? "[N, T, input_size]" : "[T, N, input_size]", "; expected 3 dims, got ", x.shape());
  ANVIL_CHECK(is_floating(x.dtype()), DTypeError, op, ": input must be floating; expected f16, bf16, f32 or f64, got ",
              x.dtype());
  ANVIL_CHECK(num_layers > 0, ValueError, op, ": num_layers must be positive; expected >= 1, got ", num_layers);
  ANVIL_CHECK(dropout_p >= 0.0 && dropout_p <= 1.0, ValueError, op, ": dropout is a probability; expected [0, 1], got ",
              dropout_p);
  const std::size_t per_layer = has_bias ? 4 : 2;
  ANVIL_CHECK(weights.size() == per_layer * static_cast<std::size_t>(num_layers), ValueError, op, ": expected ",
              per_layer, " weights per layer (",
              has_bias ? "weight_ih, weight_hh, bias_ih, bias_hh" : "weight_ih, weight_hh", ") for ", num_layers,
              " layers, got ", weights.size());
  ANVIL_CHECK(!lstm || h0.defined() == c0.defined(), ValueError, op,
              ": h0 and c0 come together; expected both or neither, got ", h0.defined() ? "h0 alone" : "c0 alone");
  ANVIL_CHECK(lstm || !c0.defined(), ValueError, op, ": only LSTM has a cell state; expected no c0, got ", c0.shape());
  {
    std::vector<Tensor> all{x};
    for (const Tensor* t : {&h0, &c0})
      if (t->defined()) all.push_back(*t);
    for (std::size_t i = 0; i < weights.size(); ++i) {
      detail::check_defined(op, weights[i], static_cast<int>(i) + 3);
      all.push_back(weights[i]);
    }
    detail::check_same_device(op, all);
  }
  const std::int64_t gates = detail::rnn_gates(bmode);
  ANVIL_CHECK(weights[1].dim() == 2, ShapeError, op, ": weight_hh_l0 must be [G*H, H]; expected 2 dims, got ",
              weights[1].shape());
  const std::int64_t H = weights[1].size(1), in = x.size(2);
  for (std::int64_t l = 0; l < num_layers; ++l) {
    const Tensor* w = &weights[static_cast<std::size_t>(l) * per_layer];
    const std::int64_t in_l = l == 0 ? in : H;
    auto check = [&](const Tensor& t, const Shape& want, const char* what) {
      ANVIL_CHECK(t.shape() == want, ShapeError, op, ": ", what, "_l", l, " has the wrong shape; expected ", want,
                  ", got ", t.shape());
    };
    check(w[0], {gates * H, in_l}, "weight_ih");
    check(w[1], {gates * H, H}, "weight_hh");
    if (has_bias) {
      check(w[2], {gates * H}, "bias_ih");
      check(w[3], {gates * H}, "bias_hh");
    }
  }
  const Tensor seq = batch_first ? x.transpose(0, 1) : x;  // [T, N, in]
  const std::int64_t steps = seq.size(0), n = seq.size(1);
  const Shape state_shape{num_layers, n, H};
  for (const auto& [t, what] : {std::pair{&h0, "h0"}, std::pair{&c0, "c0"}})
    ANVIL_CHECK(!t->defined() || t->shape() == state_shape, ShapeError, op, ": ", what,
                " has the wrong shape; expected ", state_shape, ", got ", t->shape());

  detail::RnnArgs shape;
  shape.mode = bmode;
  shape.dtype = x.dtype();
  shape.layers = num_layers;
  shape.input_size = in;
  shape.hidden_size = H;
  shape.seq_len = steps;
  shape.batch = n;
  shape.batch_first = batch_first;
  shape.has_bias = has_bias;
  shape.dropout = training && num_layers > 1 ? dropout_p : 0.0;
  if (fused_rnn_applies(x, h0, c0, weights, shape)) {
    if (shape.dropout > 0.0)  // a seed from anvil's generator for the backend's own dropout
      shape.dropout_seed =
          static_cast<std::uint64_t>(randint(0, 1LL << 62, {1}, cpu(), DType::I64).item<std::int64_t>());
    const std::vector<Tensor> r = detail::rnn_fused(shape, x, h0, c0, weights);
    return {r[0], r[1], lstm ? r[2] : Tensor()};
  }
  auto initial = [&](const Tensor& s) { return s.defined() ? s : zeros(state_shape, x.device(), x.dtype()); };
  const std::vector<Tensor> r = rnn_composite(mode, seq, initial(h0), lstm ? initial(c0) : Tensor(), weights,
                                              num_layers, has_bias, dropout_p, training);
  return {batch_first ? r[0].transpose(0, 1) : r[0], r[1], lstm ? r[2] : Tensor()};
}

}  // namespace anvil
