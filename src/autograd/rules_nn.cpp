// Gradient rules of the fused neural-network ops (src/ops/nn_ops.cpp).
// Window gradients are scattered back with one strided add_ per kernel
// offset (taps DH×DW apart): each offset's windows never overlap one another, so every add_ is
// a plain elementwise op that any backend runs.
#include <tuple>

#include "anvil/autograd.h"
#include "autograd/graph.h"
#include "ops/op_common.h"

namespace anvil::detail {

namespace {
using Grads = std::vector<Tensor>;

// dx of a padded [N, C, H, W] input from per-offset contributions:
// contribution(kh, kw) is [N, C, OH, OW] (any strides).
template <typename F>
Tensor scatter_windows(const Window2d& w, Device d, DType t, F contribution) {
  const std::int64_t hp = w.h + 2 * w.ph, wp = w.w + 2 * w.pw;
  Tensor gxp = zeros({w.n, w.c, hp, wp}, d, t);
  for (std::int64_t i = 0; i < w.kh; ++i)
    for (std::int64_t j = 0; j < w.kw; ++j) {
      Tensor view =
          as_strided(gxp, {w.n, w.c, w.oh, w.ow}, {w.c * hp * wp, hp * wp, w.sh * wp, w.sw}, i * w.dh * wp + j * w.dw);
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
    if (n[1]) gw = matmul(g2.t(), sc).reshape(sw.shape());
    if (n[2]) gb = sum(g2, {0});
    if (n[0]) {
      const Tensor gcols = matmul(g2, sw.reshape({o, ckk})).view({win.n, win.oh, win.ow, win.c, win.kh, win.kw});
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
           Tensor gx, gw, gb;
           if (n[0]) gx = conv2d_backward_data(g, sw, shape);
           if (n[1]) {
             std::tie(gw, gb) = conv2d_backward_weight(g, sx, sw.shape(), shape, n[2]);
           } else if (n[2]) {
             gb = sum(g, {0, 2, 3});
           }
           return Grads{gx, gw, gb};
         });
}

void record_max_pool2d(const Tensor& out, const Tensor& x, const Tensor& windows, const Window2d& win) {
  if (!should_record({&x})) return;
  const Tensor sw = saved(windows), so = saved(out);
  record("MaxPool2DBackward", out, {&x}, [sw, so, win](const Tensor& g, const std::vector<bool>&) {
    // Ties share the gradient evenly (as max's rule does).
    const Tensor mask = (sw == so.unsqueeze(-1).unsqueeze(-1)).to(g.dtype());
    const Tensor share = mask * (g / sum(mask, {4, 5})).unsqueeze(-1).unsqueeze(-1);
    return Grads{scatter_windows(win, g.device(), g.dtype(),
                                 [&](std::int64_t i, std::int64_t j) { return share.select(5, j).select(4, i); })};
  });
}

void record_im2col(const Tensor& out, const Tensor& x, const Window2d& win) {
  if (!should_record({&x})) return;
  record("Im2ColBackward", out, {&x},
         [win](const Tensor& g, const std::vector<bool>&) { return Grads{col2im(g.contiguous(), win)}; });
}

void record_max_pool2d_indices(const Tensor& out, const Tensor& x, const Tensor& indices, const Window2d& win) {
  if (!should_record({&x})) return;
  const Tensor si = saved(indices);
  // The first maximum of a window takes its whole gradient (PyTorch's rule);
  // the composite path shares it among ties instead. Both are subgradients.
  record("MaxPool2DBackward", out, {&x}, [si, win](const Tensor& g, const std::vector<bool>&) {
    return Grads{max_pool2d_backward(g.contiguous(), si, win)};
  });
}

void record_avg_pool2d(const Tensor& out, const Tensor& x, const Window2d& win) {
  if (!should_record({&x})) return;
  record("AvgPool2DBackward", out, {&x}, [win](const Tensor& g, const std::vector<bool>&) {
    const Tensor share = g / static_cast<double>(win.kh * win.kw);
    return Grads{scatter_windows(win, g.device(), g.dtype(), [&](std::int64_t, std::int64_t) { return share; })};
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

}  // namespace anvil::detail
