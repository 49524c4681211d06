// Gradient rules of the fused neural-network ops (src/ops/nn_ops.cpp).
// Window gradients are scattered back with one strided add_ per kernel
// offset (taps DH×DW apart): each offset's windows never overlap one another, so every add_ is
// a plain elementwise op that any backend runs.
#include <tuple>

#include "anvil/autograd.h"
#include "autograd/graph.h"
#include "core/observer.h"
#include "ops/op_common.h"

namespace anvil::detail {

namespace {
using Grads = std::vector<Tensor>;

// dx of a padded [N, C, H, W] input from per-offset contributions, laid
// out in `format`: contribution(kh, kw) is [N, C, OH, OW] (any strides).
template <typename F>
Tensor scatter_windows(const Window2d& w, Device d, DType t, F contribution,
                       MemoryFormat format = MemoryFormat::Contiguous) {
  const std::int64_t hp = w.h + 2 * w.ph, wp = w.w + 2 * w.pw;
  Tensor gxp = make_empty({w.n, w.c, hp, wp}, t, d, format).zero_();
  const Strides& s = gxp.strides();
  for (std::int64_t i = 0; i < w.kh; ++i)
    for (std::int64_t j = 0; j < w.kw; ++j) {
      Tensor view = as_strided(gxp, {w.n, w.c, w.oh, w.ow}, {s[0], s[1], w.sh * s[2], w.sw * s[3]},
                               i * w.dh * s[2] + j * w.dw * s[3]);
      view.add_(contribution(i, j));
    }
  if (w.ph == 0 && w.pw == 0) return gxp;
  return gxp.narrow(2, w.ph, w.h).narrow(3, w.pw, w.w);
}
}  // namespace

void record_conv2d(const Tensor& out, const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& cols,
                   const Window2d& win) {
  if (!should_record({&x, &weight, &bias})) return;
  const Tensor sw = saved(weight), sc = saved(cols);
  record("ConvolutionBackward", out, {&x, &weight, &bias}, [sw, sc, win](const Tensor& g, const std::vector<bool>& n) {
    const std::int64_t o = sw.size(0), ckk = win.c * win.kh * win.kw;
    // [N, OH, OW, O]: a view when g has the channels-last layout of the forward result.
    const Tensor g2 = g.permute({0, 2, 3, 1}).reshape({win.n * win.oh * win.ow, o});
    Tensor gx, gw, gb;
    // Note [Convolution algorithms]: GEMMs over the saved column matrix (the
    // forward's workspace) and, for the input, a column gradient scattered back.
    const auto report = [&](const char* direction, const char* algorithm, std::uint64_t bytes) {
      observe_conv_algorithm(
          {.direction = direction, .algorithm = algorithm, .math = to_string(g.dtype()), .workspace_bytes = bytes});
    };
    if (n[1]) {
      gw = matmul(g2.t(), sc).reshape(sw.shape());
      report("backward_weight", "strided-gemm", 0);
    }
    if (n[2]) gb = sum(g2, {0});
    if (n[0]) {
      const Tensor gcols = matmul(g2, sw.reshape({o, ckk})).view({win.n, win.oh, win.ow, win.c, win.kh, win.kw});
      report("backward_data", "gemm+strided-col2im",
             static_cast<std::uint64_t>(gcols.numel()) * static_cast<std::uint64_t>(element_size(gcols.dtype())));
      gx = scatter_windows(win, g.device(), g.dtype(), [&](std::int64_t i, std::int64_t j) {
        return gcols.select(5, j).select(4, i).permute({0, 3, 1, 2});
      });
    }
    return Grads{gx, gw, gb};
  });
}

void record_conv2d_fused(const Tensor& out, const Tensor& x, const Tensor& weight, const Tensor& bias,
                         const Conv2dArgs& shape) {
  if (!should_record({&x, &weight, &bias})) return;
  const Tensor sx = saved(x), sw = saved(weight);
  record("ConvolutionBackward", out, {&x, &weight, &bias},
         [sx, sw, shape](const Tensor& g, const std::vector<bool>& n) {
           if (n[0] && n[1]) {
             const ConvGrads both = conv2d_backward(g, sx, sw, shape, n[2]);
             return Grads{both.input, both.weight, both.bias};
           }
           Tensor gx, gw, gb;
           if (n[0]) gx = conv2d_backward_data(g, sw, shape);
           if (n[1]) {
             std::tie(gw, gb) = conv2d_backward_weight(g, sx, sw, shape, n[2]);
           } else if (n[2]) {
             gb = sum(g, {0, 2, 3});
           }
           return Grads{gx, gw, gb};
         });
}

// Note [Batch norm's gradient]
// With y = xc * a + bias, a = invstd * weight per channel, and sums S over
// every dim but C (n elements each):
//   d bias = S(g),  d weight = S(g * xc) * invstd,
//   dx = a * (g - S(g) / n - xc * invstd^2 * S(g * xc) / n)   (training)
//   dx = a * g                                                (evaluation)
// Two reductions and, for dx, g * a - xc * k - c: three elementwise passes.
// The composite's chain of autograd nodes made about twice the passes and
// saved more tensors.
void record_batch_norm(const Tensor& out, const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& xc,
                       const Tensor& invstd, bool training) {
  if (!should_record({&x, &weight, &bias})) return;
  const Tensor sxc = saved(xc), sinv = saved(invstd), sw = weight.defined() ? saved(weight) : Tensor{};
  const DType x_dtype = x.dtype(), bias_dtype = bias.defined() ? bias.dtype() : x.dtype();
  record("NativeBatchNormBackward", out, {&x, &weight, &bias},
         [sxc, sinv, sw, x_dtype, bias_dtype, training](const Tensor& grad, const std::vector<bool>& n) {
           const std::int64_t c = sinv.numel();
           const Shape bshape = sinv.shape();
           std::vector<std::int64_t> dims{0};
           for (int i = 2; i < sxc.dim(); ++i) dims.push_back(i);
           const Tensor g = grad.to(sxc.dtype());
           const Tensor a = sw.defined() ? sinv * sw.reshape(bshape).to(sxc.dtype()) : sinv;
           const bool want_sums = n[1] || n[2] || (n[0] && training);
           const Tensor sum_g = want_sums ? sum(g, dims, true) : Tensor{};
           const Tensor sum_gxc = n[1] || (n[0] && training) ? sum(g * sxc, dims, true) : Tensor{};
           Tensor gx, gw, gb;
           if (n[0]) {
             gx = g * a;
             if (training) {
               const double count = static_cast<double>(sxc.numel() / c);
               gx.sub_(sxc * (a * square(sinv) * sum_gxc / count));
               gx.sub_(a * sum_g / count);
             }
             gx = gx.to(x_dtype);
           }
           if (n[1]) gw = (sum_gxc * sinv).reshape({c}).to(sw.dtype());
           if (n[2]) gb = sum_g.reshape({c}).to(bias_dtype);
           return Grads{gx, gw, gb};
         });
}

// The same gradient from the backend's fused kernel (Note [Fused batch
// norm]): both sums and dx in one pass over the channels.
// With the fused epilogue the node is relu(bn(x) + residual)'s: ReLU's
// mask comes from the saved output, and the residual's gradient is the
// masked grad from the same launch (grad itself without ReLU).
void record_batch_norm_fused(const Tensor& out, const Tensor& x, const Tensor& weight, const Tensor& bias,
                             const Tensor& mean, const Tensor& invstd, bool training, const Tensor& residual,
                             bool relu) {
  if (!should_record({&x, &weight, &bias, &residual})) return;
  const Tensor sx = saved(x), smean = saved(mean), sinv = saved(invstd),
               sw = weight.defined() ? saved(weight) : Tensor{}, sy = relu ? saved(out) : Tensor{};
  const bool has_residual = residual.defined();
  record(relu || has_residual ? "NativeBatchNormAddReluBackward" : "NativeBatchNormBackward", out,
         {&x, &weight, &bias, &residual},
         [sx, smean, sinv, sw, sy, training, has_residual](const Tensor& grad, const std::vector<bool>& n) {
           const bool want_residual = has_residual && n[3];
           const BatchNormGrads g =
               batch_norm_backward(grad, sx, smean, sinv, sw, training, n[0], n[1], sy, want_residual);
           Tensor gr;
           if (want_residual) gr = sy.defined() ? g.residual : grad;
           return Grads{g.input, g.weight, n[2] ? g.sum_g : Tensor{}, gr};
         });
}

// The fused recurrent layers' rule: one backend call for the data
// gradients and, where a parameter wants one, the weight gradients.
// Inputs: x, h0, c0, then the weights in RnnArgs' order.
void record_rnn_fused(const Tensor& packed, const RnnArgs& shape, const Tensor& x, const Tensor& h0, const Tensor& c0,
                      const std::vector<Tensor>& weights, const Tensor& reserve) {
  std::vector<const Tensor*> inputs{&x, &h0, &c0};
  std::vector<Tensor> sweights;
  sweights.reserve(weights.size());
  for (const Tensor& w : weights) {
    inputs.push_back(&w);
    sweights.push_back(saved(w));
  }
  const Tensor sx = saved(x), sh0 = h0.defined() ? saved(h0) : Tensor{}, sc0 = c0.defined() ? saved(c0) : Tensor{},
               sy = saved(packed), sres = saved(reserve);
  record("FusedRnnBackward", packed, inputs,
         [shape, sx, sh0, sc0, sweights, sy, sres](const Tensor& grad, const std::vector<bool>& n) {
           bool want_weights = false;
           for (std::size_t i = 3; i < n.size(); ++i) want_weights = want_weights || n[i];
           RnnGrads g = rnn_backward(grad, shape, sx, sh0, sc0, sweights, sy, sres, n[1], n[2], want_weights);
           Grads out{n[0] ? g.x : Tensor{}, g.h0, g.c0};
           for (std::size_t i = 0; i < sweights.size(); ++i)
             out.push_back(want_weights && n[3 + i] ? g.weights[i] : Tensor{});
           return out;
         });
}

void record_layer_norm_fused(const Tensor& out, const Tensor& x, const Tensor& weight, const Tensor& bias,
                             const Tensor& mean, const Tensor& invstd, const Shape& normalized) {
  if (!should_record({&x, &weight, &bias})) return;
  const Tensor sx = saved(x), smean = saved(mean), sinv = saved(invstd),
               sw = weight.defined() ? saved(weight) : Tensor{};
  record("NativeLayerNormBackward", out, {&x, &weight, &bias},
         [sx, smean, sinv, sw, normalized](const Tensor& grad, const std::vector<bool>& n) {
           const LayerNormGrads g = layer_norm_backward(grad, sx, sw, smean, sinv, normalized, n[0], n[1], n[2]);
           return Grads{g.input, g.weight, g.bias};
         });
}

// Note [Batch norm's gradient] for layer_norm: the statistics are per row
// (over the trailing dims) and weight is per column, so nothing folds into
// a per-channel coefficient; with gxhat = g * weight,
//   dx = invstd * (gxhat - mean(gxhat) - xhat * mean(gxhat * xhat)),
//   d weight = S(g * xhat), d bias = S(g), S over the leading dims.
void record_layer_norm(const Tensor& out, const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& xhat,
                       const Tensor& invstd, int k) {
  if (!should_record({&x, &weight, &bias})) return;
  const Tensor sxhat = saved(xhat), sinv = saved(invstd), sw = weight.defined() ? saved(weight) : Tensor{};
  const DType x_dtype = x.dtype(), w_dtype = weight.defined() ? weight.dtype() : x.dtype(),
              b_dtype = bias.defined() ? bias.dtype() : x.dtype();
  record("NativeLayerNormBackward", out, {&x, &weight, &bias},
         [sxhat, sinv, sw, x_dtype, w_dtype, b_dtype, k](const Tensor& grad, const std::vector<bool>& n) {
           std::vector<std::int64_t> rows, lead;  // the normalised dims and the others
           for (int i = 0; i < sxhat.dim(); ++i) (i >= sxhat.dim() - k ? rows : lead).push_back(i);
           const Tensor g = grad.to(sxhat.dtype());
           // An empty dim list would reduce every dim: with no leading dims there is nothing to sum.
           const auto sum_lead = [&](const Tensor& t) { return lead.empty() ? t : sum(t, lead); };
           Tensor gx, gw, gb;
           if (n[0]) {
             const Tensor gxhat = sw.defined() ? g * sw.to(sxhat.dtype()) : g;
             gx = gxhat - sxhat * mean(gxhat * sxhat, rows, true);
             gx.sub_(mean(gxhat, rows, true)).mul_(sinv);
             gx = gx.to(x_dtype);
           }
           if (n[1]) gw = sum_lead(g * sxhat).to(w_dtype);
           if (n[2]) gb = sum_lead(g).to(b_dtype);
           return Grads{gx, gw, gb};
         });
}

void record_max_pool2d(const Tensor& out, const Tensor& x, const Tensor& windows, const Window2d& win) {
  if (!should_record({&x})) return;
  const Tensor sw = saved(windows), so = saved(out);
  record("MaxPool2DBackward", out, {&x}, [sw, so, win](const Tensor& g, const std::vector<bool>&) {
    // Ties share the gradient evenly (as max's rule does); a window whose
    // maximum is NaN gives it to its NaNs, which == never matches.
    const Tensor max = so.unsqueeze(-1).unsqueeze(-1);
    const Tensor mask = (sw == max).to(g.dtype()) + (sw != sw).to(g.dtype()) * (max != max).to(g.dtype());
    const Tensor share = mask * (g / sum(mask, {4, 5})).unsqueeze(-1).unsqueeze(-1);
    return Grads{scatter_windows(win, g.device(), g.dtype(),
                                 [&](std::int64_t i, std::int64_t j) { return share.select(5, j).select(4, i); })};
  });
}

void record_im2col(const Tensor& out, const Tensor& x, const Window2d& win, const Strides& cols_strides) {
  if (!should_record({&x})) return;
  const MemoryFormat format = x.suggest_memory_format();
  record("Im2ColBackward", out, {&x}, [win, cols_strides, format](const Tensor& g, const std::vector<bool>&) {
    return Grads{col2im(g.contiguous(), win, cols_strides, format)};
  });
}

void record_max_pool2d_indices(const Tensor& out, const Tensor& x, const Tensor& indices, const Window2d& win) {
  if (!should_record({&x})) return;
  const Tensor si = saved(indices);
  // The first maximum of a window takes its whole gradient (PyTorch's rule);
  // the composite path shares it among ties instead. Both are subgradients.
  const MemoryFormat format = x.suggest_memory_format();
  record("MaxPool2DBackward", out, {&x}, [si, win, format](const Tensor& g, const std::vector<bool>&) {
    return Grads{max_pool2d_backward(g, si, win, format)};  // the kernels read g's strides
  });
}

void record_avg_pool2d(const Tensor& out, const Tensor& x, const Window2d& win) {
  if (!should_record({&x})) return;
  const MemoryFormat format = x.suggest_memory_format();
  record("AvgPool2DBackward", out, {&x}, [win, format](const Tensor& g, const std::vector<bool>&) {
    const Tensor share = g / static_cast<double>(win.kh * win.kw);
    return Grads{scatter_windows(
        win, g.device(), g.dtype(), [&](std::int64_t, std::int64_t) { return share; }, format)};
  });
}

void record_cross_entropy(const Tensor& out, const Tensor& logits, const Tensor& log_probs, const Tensor& target) {
  if (!should_record({&logits})) return;
  const Tensor lp = saved(log_probs), t = saved(target);
  record("NllLossBackward", out, {&logits}, [lp, t](const Tensor& g, const std::vector<bool>&) {
    const std::int64_t nc = lp.size(1);
    const Tensor onehot = t.to(DType::I64).unsqueeze(1) == arange(0, nc, 1, lp.device(), DType::I64);
    const Tensor p = exp(lp);
    return Grads{(p - onehot) * (g / static_cast<double>(lp.size(0)))};
  });
}

void record_softmax(const Tensor& out, const Tensor& x, bool log) {
  if (!should_record({&x})) return;
  const Tensor y = saved(out);
  record(log ? "LogSoftmaxBackward" : "SoftmaxBackward", out, {&x},
         [y, log](const Tensor& g, const std::vector<bool>&) { return Grads{softmax_backward(g, y, log)}; });
}

}  // namespace anvil::detail
