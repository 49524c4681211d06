// Neural-network ops written once from primitives (DESIGN §2: composites
// live in src/ops and so run on every backend). conv2d and the pools build
// their windows as strided views (im2col without a kernel); their gradient
// rules are in src/autograd/rules_nn.cpp. Where the backend has the fused
// kernels (backend.h, FusedOp: the CPU does), conv2d and max_pool2d use them
// instead; the composites stay the path for every other backend. conv2d
// asks first for the backend's direct convolution (the Conv2d family: the
// CPU's oneDNN), then for im2col, then builds it from primitives.
#include <algorithm>
#include <initializer_list>
#include <limits>

#include "anvil/autograd.h"
#include "autograd/graph.h"
#include "core/env_flag.h"
#include "core/observer.h"
#include "ops/autocast.h"
#include "ops/op_common.h"

namespace anvil {

Tensor as_strided(const Tensor& x, const Shape& shape, const Strides& strides, std::int64_t offset) {
  detail::check_defined("as_strided", x);
  ANVIL_CHECK(shape.size() == strides.size(), ShapeError, "as_strided: shape and strides differ in length; expected ",
              shape.size(), " strides, got ", strides);
  ANVIL_CHECK(!detail::should_record({&x}), NotSupported,
              "as_strided: not differentiable; expected a tensor without grad, got one that requires grad; use views "
              "such as slice/transpose, or detach()");
  std::int64_t last = offset;
  bool empty = false;
  for (int i = 0; i < shape.size(); ++i) {
    ANVIL_CHECK(shape[i] >= 0 && strides[i] >= 0, ShapeError,
                "as_strided: sizes and strides must be non-negative; expected >= 0, got shape ", shape, " and strides ",
                strides);
    if (shape[i] == 0)
      empty = true;
    else
      last += (shape[i] - 1) * strides[i];
  }
  const std::int64_t capacity = static_cast<std::int64_t>(x.impl_ref().storage()->nbytes() / element_size(x.dtype()));
  ANVIL_CHECK(offset >= 0 && (empty || last < capacity), IndexError,
              "as_strided: the view reaches outside the storage; expected elements in [0, ", capacity, "), got offset ",
              offset, " up to element ", last);
  return detail::make_view(x, shape, strides, offset);
}

namespace {

// Note [Fused softmax] (core/backend.h): one kernel over the rows of the last
// dim where the backend has it. Other dims, integer inputs and the backends
// without it take the composite, whose ops autograd differentiates.
bool softmax_fuses(const Tensor& x, int dim, const char* op) {
  return x.dim() > 0 && detail::wrap_dim(dim, x.dim(), op) == x.dim() - 1 && is_floating(x.dtype()) &&
         detail::has_fused(x, {detail::FusedOp::Softmax, detail::FusedOp::SoftmaxBackward});
}

// The composite's empty input: nothing to normalise (amax has no identity).
Tensor softmax_of_empty(const Tensor& x) { return clone(is_floating(x.dtype()) ? x : x.to(f32)); }

// The rows of `t`'s last dim, for a non-empty t; the operands are the caller's.
detail::SoftmaxArgs softmax_rows(const Tensor& t, bool log) {
  const std::int64_t len = t.size(t.dim() - 1);
  return {.dtype = t.dtype(), .rows = t.numel() / len, .len = len, .log = log};
}

Tensor softmax_fused(const Tensor& x, bool log) {
  const Tensor xc = x.contiguous();
  Tensor y = detail::make_empty(x.shape(), x.dtype(), x.device());
  if (y.numel() > 0) {
    detail::SoftmaxArgs a = softmax_rows(y, log);
    a.x = detail::operand(xc), a.y = detail::operand(y);
    detail::dispatch::softmax(x.device(), a);
  }
  detail::record_softmax(y, x, log);
  return y;
}

}  // namespace

namespace detail {
Tensor softmax_backward(const Tensor& grad, const Tensor& y, bool log) {
  const Tensor g = grad.contiguous();
  Tensor gx = make_empty(y.shape(), y.dtype(), y.device());
  if (gx.numel() > 0) {
    SoftmaxArgs a = softmax_rows(y, log);
    a.y = operand(y), a.grad = operand(g), a.grad_x = operand(gx);
    dispatch::softmax_backward(y.device(), a);
  }
  return gx;
}
}  // namespace detail

Tensor softmax(const Tensor& x, int dim) {
  ANVIL_PROFILE_OP("softmax", &x);
  detail::check_defined("softmax", x);
  if (auto c = detail::autocast_inputs(detail::AutocastList::Fp32, {&x})) return softmax((*c)[0], dim);
  if (softmax_fuses(x, dim, "softmax")) return softmax_fused(x, false);
  if (x.numel() == 0) return softmax_of_empty(x);
  const Tensor e = exp(x - amax(x, dim, true).detach());
  return e / sum(e, dim, true);
}

Tensor log_softmax(const Tensor& x, int dim) {
  ANVIL_PROFILE_OP("log_softmax", &x);
  detail::check_defined("log_softmax", x);
  if (auto c = detail::autocast_inputs(detail::AutocastList::Fp32, {&x})) return log_softmax((*c)[0], dim);
  if (softmax_fuses(x, dim, "log_softmax")) return softmax_fused(x, true);
  if (x.numel() == 0) return softmax_of_empty(x);
  return x - logsumexp(x, dim, true);
}

Tensor cross_entropy(const Tensor& logits, const Tensor& target) {
  ANVIL_PROFILE_OP("cross_entropy", &logits, &target);
  detail::check_same_device("cross_entropy", {&logits, &target});
  if (auto c = detail::autocast_inputs(detail::AutocastList::Fp32, {&logits})) return cross_entropy((*c)[0], target);
  ANVIL_CHECK(logits.dim() == 2, ShapeError, "cross_entropy: logits must be [N, C]; expected 2 dims, got ",
              logits.shape());
  ANVIL_CHECK(is_floating(logits.dtype()), DTypeError,
              "cross_entropy: logits must be floating; expected f16, bf16, f32 or f64, got ", logits.dtype());
  ANVIL_CHECK(is_integral(target.dtype()), DTypeError,
              "cross_entropy: target must hold integer class indices; expected i64, got ", target.dtype());
  ANVIL_CHECK(target.dim() == 1 && target.size(0) == logits.size(0), ShapeError,
              "cross_entropy: target must be [N] for logits [N, C]; expected [", logits.size(0), "], got ",
              target.shape());
  Tensor log_probs, loss;
  {
    NoGradGuard no_grad;
    log_probs = log_softmax(logits, 1);
    loss = -mean(gather(log_probs, 1, target.unsqueeze(1)));
  }
  detail::record_cross_entropy(loss, logits, log_probs, target);
  return loss;
}

Tensor mse_loss(const Tensor& input, const Tensor& target) {
  ANVIL_PROFILE_OP("mse_loss", &input, &target);
  detail::check_same_device("mse_loss", {&input, &target});
  if (auto c = detail::autocast_inputs(detail::AutocastList::Fp32, {&input, &target}))
    return mse_loss((*c)[0], (*c)[1]);
  return mean(square(input - target));
}

namespace {

void check_4d(const char* op, const Tensor& x) {
  ANVIL_CHECK(x.dim() == 4, ShapeError, op, ": input must be [N, C, H, W]; expected 4 dims, got ", x.shape());
  ANVIL_CHECK(is_floating(x.dtype()), DTypeError, op, ": input must be floating; expected f16, bf16, f32 or f64, got ",
              x.dtype());
}

detail::Window2d window(const char* op, const Tensor& x, std::array<std::int64_t, 2> kernel,
                        std::array<std::int64_t, 2> stride, std::array<std::int64_t, 2> padding,
                        std::array<std::int64_t, 2> dilation = {1, 1}) {
  detail::Window2d w;
  w.n = x.size(0), w.c = x.size(1), w.h = x.size(2), w.w = x.size(3);
  w.kh = kernel[0], w.kw = kernel[1], w.sh = stride[0], w.sw = stride[1], w.ph = padding[0], w.pw = padding[1];
  w.dh = dilation[0], w.dw = dilation[1];
  ANVIL_CHECK(
      w.kh > 0 && w.kw > 0 && w.sh > 0 && w.sw > 0 && w.ph >= 0 && w.pw >= 0, ValueError, op,
      ": kernel and stride must be positive and padding non-negative; expected e.g. kernel {2, 2}, got kernel {", w.kh,
      ", ", w.kw, "}, stride {", w.sh, ", ", w.sw, "}, padding {", w.ph, ", ", w.pw, "}");
  ANVIL_CHECK(w.dh > 0 && w.dw > 0, ValueError, op, ": dilation must be positive; expected e.g. {1, 1}, got {", w.dh,
              ", ", w.dw, "}");
  // The span a kernel covers, taps DH apart.
  const std::int64_t eh = w.dh * (w.kh - 1) + 1, ew = w.dw * (w.kw - 1) + 1;
  ANVIL_CHECK(w.h + 2 * w.ph >= eh && w.w + 2 * w.pw >= ew, ShapeError, op,
              ": the kernel is larger than the padded input; expected a (dilated) kernel within ", w.h + 2 * w.ph, "x",
              w.w + 2 * w.pw, ", got ", eh, "x", ew);
  w.oh = (w.h + 2 * w.ph - eh) / w.sh + 1;
  w.ow = (w.w + 2 * w.pw - ew) / w.sw + 1;
  return w;
}

// x padded with `value` (x itself without padding), in x's layout.
Tensor pad2d(const Tensor& x, const detail::Window2d& w, double value) {
  if (w.ph == 0 && w.pw == 0) return x;
  const Shape padded{w.n, w.c, w.h + 2 * w.ph, w.w + 2 * w.pw};
  Tensor p = x.suggest_memory_format() == MemoryFormat::ChannelsLast
                 ? detail::make_empty(padded, x.dtype(), x.device(), MemoryFormat::ChannelsLast).fill_(value)
                 : full(padded, value, x.device(), x.dtype());
  p.narrow(2, w.ph, w.h).narrow(3, w.pw, w.w).copy_(x);
  return p;
}

// [N, C, OH, OW, KH, KW] windows of a padded input.
Tensor windows_nc(const Tensor& xp, const detail::Window2d& w) {
  const Strides& s = xp.strides();
  return as_strided(xp, {w.n, w.c, w.oh, w.ow, w.kh, w.kw}, {s[0], s[1], s[2] * w.sh, s[3] * w.sw, s[2], s[3]},
                    xp.offset());
}

using detail::has_fused;
using detail::operand;

// Whether the backend's Conv2d family takes this convolution (backend.h,
// Conv2dArgs): the CPU's oneDNN path for f32 (and bf16 on CPUs with bf16
// instructions) with enough channels.
// ANVIL_CONV_IM2COL=1 turns it off so the im2col path runs instead (tests
// compare the two); ANVIL_NO_FUSED=1 turns off both.
bool has_fused_conv2d(const Tensor& x, const detail::Conv2dArgs& shape) {
  if (detail::env_flag("ANVIL_NO_FUSED") || detail::env_flag("ANVIL_CONV_IM2COL")) return false;
  if (!has_fused(x,
                 {detail::FusedOp::Conv2d, detail::FusedOp::Conv2dBackwardData, detail::FusedOp::Conv2dBackwardWeight}))
    return false;
  return detail::dispatch::supports_fused_conv2d(x.device(), shape);
}

// Note [Convolution algorithms]: the im2col and composite paths name
// themselves; their workspace is the column matrix they build.
void report_conv(const char* direction, const char* algorithm, const Tensor& columns) noexcept {
  detail::observe_conv_algorithm({.direction = direction,
                                  .algorithm = algorithm,
                                  .math = to_string(columns.dtype()),
                                  .workspace_bytes = static_cast<std::uint64_t>(columns.numel()) *
                                                     static_cast<std::uint64_t>(element_size(columns.dtype()))});
}

// How im2col lays out the window matrix (Im2colArgs in backend.h): for an
// NCHW input [N, C*KH*KW, OH*OW], a column per output pixel, so that
// out[n] = W @ cols[n] is NCHW; for a channels-last one [N*OH*OW, C*KH*KW], a
// row per output pixel, so that out = cols @ W^T is NHWC, with the taps
// ordered as the weight lies (KH*KW*C for a channels-last weight) so that W
// is a view.
enum class ColsLayout { Columns, RowsCKK, RowsKKC };

Shape cols_shape(const detail::Window2d& w, ColsLayout layout) {
  const std::int64_t k = w.c * w.kh * w.kw, p = w.oh * w.ow;
  return layout == ColsLayout::Columns ? Shape{w.n, k, p} : Shape{w.n * p, k};
}

// The strides of a contiguous matrix of cols_shape() over the six dims
// [N, C, KH, KW, OH, OW] the kernels index.
Strides cols_strides(const detail::Window2d& w, ColsLayout layout) {
  const std::int64_t kk = w.kh * w.kw, k = w.c * kk, p = w.oh * w.ow;
  switch (layout) {
    case ColsLayout::Columns:
      return {k * p, kk * p, w.kw * p, p, w.ow, 1};
    case ColsLayout::RowsCKK:
      return {p * k, kk, w.kw, 1, w.ow * k, k};
    case ColsLayout::RowsKKC:
      break;
  }
  return {p * k, 1, w.kw * w.c, w.c, w.ow * k, k};
}

Tensor im2col(const Tensor& x, const detail::Window2d& w, ColsLayout layout) {
  ANVIL_PROFILE_OP("im2col", &x);
  Tensor cols = detail::make_empty(cols_shape(w, layout), x.dtype(), x.device());
  const Strides strides = cols_strides(w, layout);
  if (cols.numel() > 0)
    detail::dispatch::im2col(x.device(),
                             {.dtype = x.dtype(), .g = w, .image = operand(x), .cols = detail::operand(cols, strides)});
  detail::record_im2col(cols, x, w, strides);
  return cols;
}
}  // namespace

namespace detail {

Tensor col2im(const Tensor& cols, const Window2d& w, const Strides& cols_strides, MemoryFormat format) {
  ANVIL_PROFILE_OP("col2im", &cols);
  ANVIL_ASSERT(cols.is_contiguous() && cols.numel() == w.n * w.c * w.kh * w.kw * w.oh * w.ow,
               "col2im: unexpected cols ", cols.shape());
  Tensor image = make_empty({w.n, w.c, w.h, w.w}, cols.dtype(), cols.device(), format);
  if (image.numel() > 0)
    dispatch::col2im(cols.device(),
                     {.dtype = cols.dtype(), .g = w, .image = operand(image), .cols = operand(cols, cols_strides)});
  // The im2col path's input gradient: matmul's backward made the column
  // gradient, scattered here (its weight gradient is that matmul's own).
  report_conv("backward_data", "gemm+col2im", cols);
  return image;
}

namespace {
// t itself when it holds each of its elements once, in any order of dims
// (contiguous, channels-last, …), else a contiguous copy: the Conv2d
// family's operands (backend.h).
Tensor dense(const Tensor& t) { return is_dense_non_overlapping(t) ? t : t.contiguous(); }
}  // namespace

Tensor conv2d_fused(const Tensor& x, const Tensor& weight, const Tensor& bias, const Conv2dArgs& shape) {
  const Window2d& w = shape.g;
  Conv2dArgs a = shape;
  Tensor out = make_empty({w.n, shape.out_channels, w.oh, w.ow}, x.dtype(), x.device(), x.suggest_memory_format());
  const Tensor xd = dense(x), wd = dense(weight), bd = bias.defined() ? dense(bias) : Tensor{};
  a.image = operand(xd), a.weight = operand(wd), a.out = operand(out);
  if (bd.defined()) a.bias = operand(bd);
  dispatch::conv2d(x.device(), a);
  record_conv2d_fused(out, x, weight, bias, shape);
  return out;
}

namespace {
// The Conv2dArgs of the input gradient, written into `image`, and of the
// weight (and bias) gradient, written into gw (and gb); `gd` is the output
// gradient, the other operands dense.
Conv2dArgs data_gradient(const Conv2dArgs& shape, const Tensor& gd, const Tensor& wd, const Tensor& image) {
  Conv2dArgs a = shape;
  a.image = operand(image), a.weight = operand(wd), a.out = operand(gd);
  return a;
}
Conv2dArgs weight_gradient(const Conv2dArgs& shape, const Tensor& gd, const Tensor& xd, const Tensor& gw,
                           const Tensor& gb) {
  Conv2dArgs a = shape;
  a.has_bias = gb.defined();
  a.image = operand(xd), a.weight = operand(gw), a.out = operand(gd);
  if (gb.defined()) a.bias = operand(gb);
  return a;
}
}  // namespace

Tensor conv2d_backward_data(const Tensor& grad, const Tensor& weight, const Conv2dArgs& shape) {
  ANVIL_PROFILE_OP("conv2d_backward_data", &grad, &weight);
  const Window2d& w = shape.g;
  Tensor image = make_empty({w.n, w.c, w.h, w.w}, grad.dtype(), grad.device(), grad.suggest_memory_format());
  dispatch::conv2d_backward_data(grad.device(), data_gradient(shape, dense(grad), dense(weight), image));
  return image;
}

std::pair<Tensor, Tensor> conv2d_backward_weight(const Tensor& grad, const Tensor& x, const Tensor& weight,
                                                 const Conv2dArgs& shape, bool want_bias) {
  ANVIL_PROFILE_OP("conv2d_backward_weight", &grad, &x);
  Tensor gw = make_empty(weight.shape(), grad.dtype(), grad.device(), weight.suggest_memory_format());
  Tensor gb = want_bias ? make_empty({shape.out_channels}, grad.dtype(), grad.device()) : Tensor{};
  dispatch::conv2d_backward_weight(grad.device(), weight_gradient(shape, dense(grad), dense(x), gw, gb));
  return {gw, gb};
}

ConvGrads conv2d_backward(const Tensor& grad, const Tensor& x, const Tensor& weight, const Conv2dArgs& shape,
                          bool want_bias) {
  ANVIL_PROFILE_OP("conv2d_backward", &grad, &x, &weight);
  const Window2d& w = shape.g;
  ConvGrads out;
  out.input = make_empty({w.n, w.c, w.h, w.w}, grad.dtype(), grad.device(), grad.suggest_memory_format());
  out.weight = make_empty(weight.shape(), grad.dtype(), grad.device(), weight.suggest_memory_format());
  if (want_bias) out.bias = make_empty({shape.out_channels}, grad.dtype(), grad.device());
  const Tensor gd = dense(grad);
  dispatch::conv2d_backward(grad.device(), data_gradient(shape, gd, dense(weight), out.input),
                            weight_gradient(shape, gd, dense(x), out.weight, out.bias));
  return out;
}

Tensor max_pool2d_backward(const Tensor& grad, const Tensor& indices, const Window2d& w, MemoryFormat format) {
  ANVIL_PROFILE_OP("max_pool2d_backward", &grad);
  ANVIL_ASSERT(grad.shape() == indices.shape(), "max_pool2d_backward: unexpected grad ", grad.shape());
  Tensor image = make_empty({w.n, w.c, w.h, w.w}, grad.dtype(), grad.device(), format);
  if (image.numel() > 0)
    dispatch::max_pool2d_backward(
        grad.device(),
        {.dtype = grad.dtype(), .g = w, .image = operand(image), .out = operand(grad), .indices = operand(indices)});
  return image;
}

}  // namespace detail

Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias, std::array<std::int64_t, 2> stride,
              std::array<std::int64_t, 2> padding, std::array<std::int64_t, 2> dilation, std::int64_t groups) {
  ANVIL_PROFILE_OP("conv2d", &x, &weight, &bias);
  detail::check_same_device("conv2d", {&x, &weight});
  if (bias.defined()) detail::check_same_device("conv2d", {&x, &bias});
  if (auto c = detail::autocast_inputs(detail::AutocastList::LowerPrecision, {&x, &weight, &bias}))
    return conv2d((*c)[0], (*c)[1], (*c)[2], stride, padding, dilation, groups);
  check_4d("conv2d", x);
  ANVIL_CHECK(groups > 0, ValueError, "conv2d: groups must be positive; expected >= 1, got ", groups);
  ANVIL_CHECK(x.size(1) % groups == 0, ValueError,
              "conv2d: input channels must be divisible by groups; expected a multiple of ", groups, ", got ",
              x.size(1), " channels");
  const std::int64_t cg = x.size(1) / groups;
  ANVIL_CHECK(weight.dim() == 4 && weight.size(1) == cg, ShapeError,
              "conv2d: weight must be [O, C / groups, KH, KW]; expected C / groups = ", cg, ", got weight ",
              weight.shape(), " for input ", x.shape(), " and groups ", groups);
  const std::int64_t o = weight.size(0);
  ANVIL_CHECK(o % groups == 0, ValueError,
              "conv2d: output channels must be divisible by groups; expected a multiple of ", groups, ", got ", o);
  ANVIL_CHECK(!bias.defined() || (bias.dim() == 1 && bias.size(0) == o), ShapeError,
              "conv2d: bias must be [O]; expected [", o, "], got ", bias.shape());
  const detail::Window2d w = window("conv2d", x, {weight.size(2), weight.size(3)}, stride, padding, dilation);
  if (weight.dtype() == x.dtype() && (!bias.defined() || bias.dtype() == x.dtype())) {
    // The image's layout too: a backend may take a convolution in one layout only.
    const detail::Conv2dArgs shape{.dtype = x.dtype(),
                                   .g = w,
                                   .out_channels = o,
                                   .groups = groups,
                                   .has_bias = bias.defined(),
                                   .image = detail::operand(x)};
    if (has_fused_conv2d(x, shape)) return detail::conv2d_fused(x, weight, bias, shape);
  }
  if (has_fused(x, {detail::FusedOp::Im2col, detail::FusedOp::Col2im}) && weight.dtype() == x.dtype()) {
    const std::int64_t kk = w.kh * w.kw;
    if (x.suggest_memory_format() == MemoryFormat::ChannelsLast && groups == 1) {
      // out = cols [N*OH*OW, C*KH*KW] @ W^T: [N*OH*OW, O] is the NHWC result
      // itself. The taps follow the weight's layout, so W is a view.
      const bool kkc = weight.suggest_memory_format() == MemoryFormat::ChannelsLast;
      const Tensor cols = im2col(x, w, kkc ? ColsLayout::RowsKKC : ColsLayout::RowsCKK);
      const Tensor w2 = (kkc ? weight.permute({0, 2, 3, 1}) : weight).reshape({o, w.c * kk});
      const Tensor out = bias.defined() ? addmm(bias, cols, w2.t()) : matmul(cols, w2.t());
      report_conv("forward", "im2col+gemm", cols);
      return out.view({w.n, w.oh, w.ow, o}).permute({0, 3, 1, 2});
    }
    // out[n] = W [O, C*KH*KW] @ cols[n]: NCHW directly, and autograd through
    // matmul and im2col (whose gradient is col2im). A group's input channels
    // are adjacent rows of cols, so groups are one broadcast batched matmul
    // [G, O/G, C/G*KH*KW] @ [N, G, C/G*KH*KW, OH*OW].
    const Tensor cols = im2col(x, w, ColsLayout::Columns);
    Tensor out = groups == 1 ? matmul(weight.reshape({o, w.c * kk}), cols)
                             : matmul(weight.reshape({groups, o / groups, cg * kk}),
                                      cols.view({w.n, groups, cg * kk, w.oh * w.ow}));
    out = out.view({w.n, o, w.oh, w.ow});
    if (bias.defined()) out = out + bias.reshape({o, 1, 1});
    report_conv("forward", "im2col+gemm", cols);
    return out.contiguous(x.suggest_memory_format());  // grouped channels-last input: a copy
  }
  if (groups > 1) {
    // Without the fused kernels: one ungrouped convolution per group, whose
    // gradients flow back through narrow and cat.
    const std::int64_t og = o / groups;
    std::vector<Tensor> parts;
    parts.reserve(static_cast<std::size_t>(groups));
    for (std::int64_t gi = 0; gi < groups; ++gi)
      parts.push_back(conv2d(x.narrow(1, gi * cg, cg), weight.narrow(0, gi * og, og),
                             bias.defined() ? bias.narrow(0, gi * og, og) : Tensor{}, stride, padding, dilation, 1));
    return cat(parts, 1);
  }
  Tensor cols, out;
  {
    NoGradGuard no_grad;
    const Tensor xp = pad2d(x, w, 0.0);
    const Strides& s = xp.strides();
    // [N, OH, OW, C, KH, KW]: each row of the im2col matrix is one window.
    const Tensor win = as_strided(xp, {w.n, w.oh, w.ow, w.c, w.kh, w.kw},
                                  {s[0], s[2] * w.sh, s[3] * w.sw, s[1], s[2] * w.dh, s[3] * w.dw}, xp.offset());
    cols = win.reshape({w.n * w.oh * w.ow, w.c * w.kh * w.kw});
    const Tensor w2 = weight.reshape({o, w.c * w.kh * w.kw}).t();
    const Tensor out2 = bias.defined() ? addmm(bias, cols, w2) : matmul(cols, w2);
    out = out2.view({w.n, w.oh, w.ow, o}).permute({0, 3, 1, 2});  // channels-last strides
  }
  detail::record_conv2d(out, x, weight, bias, cols, w);
  report_conv("forward", "strided-im2col+gemm", cols);
  return out.contiguous(x.suggest_memory_format());
}

Tensor conv1d(const Tensor& x, const Tensor& weight, const Tensor& bias, std::int64_t stride, std::int64_t padding,
              std::int64_t dilation, std::int64_t groups) {
  ANVIL_PROFILE_OP("conv1d", &x, &weight, &bias);
  detail::check_defined("conv1d", x);
  ANVIL_CHECK(x.dim() == 3, ShapeError, "conv1d: input must be [N, C, L]; expected 3 dims, got ", x.shape());
  ANVIL_CHECK(weight.defined() && weight.dim() == 3, ShapeError,
              "conv1d: weight must be [O, C / groups, K]; expected 3 dims, got ",
              weight.defined() ? weight.shape() : Shape{});
  // A 1-D convolution is a 2-D one over rows of height 1.
  return conv2d(x.unsqueeze(2), weight.unsqueeze(2), bias, {1, stride}, {0, padding}, {1, dilation}, groups).squeeze(2);
}

Tensor max_pool2d(const Tensor& x, std::array<std::int64_t, 2> kernel, std::array<std::int64_t, 2> stride,
                  std::array<std::int64_t, 2> padding) {
  ANVIL_PROFILE_OP("max_pool2d", &x);
  detail::check_defined("max_pool2d", x);
  check_4d("max_pool2d", x);
  const detail::Window2d w = window("max_pool2d", x, kernel, stride, padding);
  if (has_fused(x, {detail::FusedOp::MaxPool2d, detail::FusedOp::MaxPool2dBackward})) {
    // Output and indices in x's layout: the kernels write either.
    const MemoryFormat format = x.suggest_memory_format();
    Tensor out = detail::make_empty({w.n, w.c, w.oh, w.ow}, x.dtype(), x.device(), format);
    Tensor indices = detail::make_empty(out.shape(), DType::I64, x.device(), format);
    if (out.numel() > 0)
      detail::dispatch::max_pool2d(
          x.device(),
          {.dtype = x.dtype(), .g = w, .image = operand(x), .out = operand(out), .indices = operand(indices)});
    detail::record_max_pool2d_indices(out, x, indices, w);
    return out;
  }
  Tensor windows, out;
  {
    NoGradGuard no_grad;
    windows = windows_nc(pad2d(x, w, -std::numeric_limits<double>::infinity()), w);
    out = amax(windows, {4, 5});
  }
  detail::record_max_pool2d(out, x, windows, w);
  return out.contiguous(x.suggest_memory_format());
}

Tensor avg_pool2d(const Tensor& x, std::array<std::int64_t, 2> kernel, std::array<std::int64_t, 2> stride,
                  std::array<std::int64_t, 2> padding) {
  ANVIL_PROFILE_OP("avg_pool2d", &x);
  detail::check_defined("avg_pool2d", x);
  check_4d("avg_pool2d", x);
  const detail::Window2d w = window("avg_pool2d", x, kernel, stride, padding);
  Tensor out;
  {
    NoGradGuard no_grad;
    const Tensor windows = windows_nc(pad2d(x, w, 0.0), w);
    // Channels-last: the windows reduced in [N, OH, OW, C] order, whose
    // result is the NHWC output.
    out = x.suggest_memory_format() == MemoryFormat::ChannelsLast
              ? mean(windows.permute({0, 2, 3, 1, 4, 5}), {4, 5}).permute({0, 3, 1, 2})
              : mean(windows, {4, 5});
  }
  detail::record_avg_pool2d(out, x, w);
  return out;
}

namespace {
// [out, in]: row i averages input positions [floor(i*in/out), ceil((i+1)*in/out)),
// PyTorch's adaptive bins. Built on `d` from integer comparisons (exact, no
// host copy): floor(i*in/out) <= j  <=>  i*in < (j+1)*out, and
// j < ceil((i+1)*in/out)  <=>  j*out < (i+1)*in.
Tensor adaptive_bins(std::int64_t in, std::int64_t out, Device d, DType t) {
  const Tensor i = arange(0, out, 1, d, DType::I64).unsqueeze(1);
  const Tensor j = arange(0, in, 1, d, DType::I64).unsqueeze(0);
  const Tensor member = lt(i * in, (j + 1) * out).to(t) * lt(j * out, (i + 1) * in).to(t);
  return member / sum(member, {1}, true);
}
}  // namespace

namespace {
void check_adaptive(const char* op, const Tensor& x, std::array<std::int64_t, 2> output_size) {
  detail::check_defined(op, x);
  ANVIL_CHECK(x.dim() == 3 || x.dim() == 4, ShapeError, op,
              ": input must be [N, C, H, W] or [C, H, W]; expected 3 or 4 dims, got ", x.shape());
  ANVIL_CHECK(is_floating(x.dtype()), DTypeError, op, ": input must be floating; expected f16, bf16, f32 or f64, got ",
              x.dtype());
  const auto [oh, ow] = output_size;
  ANVIL_CHECK(oh > 0 && ow > 0, ValueError, op, ": output size must be positive; expected e.g. {1, 1}, got {", oh, ", ",
              ow, "}");
  ANVIL_CHECK(x.size(-2) > 0 && x.size(-1) > 0, ShapeError, op,
              ": input must have a non-empty H and W; expected H, W > 0, got ", x.shape());
}

// The max over each of PyTorch's adaptive bins along `dim`, one amax per bin.
Tensor adaptive_max_along(const Tensor& x, int dim, std::int64_t out) {
  const std::int64_t in = x.size(dim);
  std::vector<Tensor> bins;
  bins.reserve(static_cast<std::size_t>(out));
  for (std::int64_t i = 0; i < out; ++i) {
    const std::int64_t start = i * in / out, end = ((i + 1) * in + out - 1) / out;
    bins.push_back(amax(x.narrow(dim, start, end - start), {dim}, true));
  }
  return cat(bins, dim);
}
}  // namespace

Tensor adaptive_avg_pool2d(const Tensor& x, std::array<std::int64_t, 2> output_size) {
  ANVIL_PROFILE_OP("adaptive_avg_pool2d", &x);
  check_adaptive("adaptive_avg_pool2d", x, output_size);
  const auto [oh, ow] = output_size;
  const std::int64_t h = x.size(-2), w = x.size(-1);
  // Global average pooling (ResNet's head): one reduction, whose gradient is
  // one broadcast. Not mean(), which autocast widens to f32: pooling is on
  // no autocast list (PyTorch), so a 16-bit input stays 16-bit.
  if (oh == 1 && ow == 1)
    return detail::reduce_op(detail::ReduceOp::Sum, "adaptive_avg_pool2d", x, {-2, -1}, true, x.dtype(),
                             1.0 / static_cast<double>(h * w));
  if (oh == h && ow == w) return clone(x);
  // out = P_h @ x @ P_w^T: P_h [OH, H] broadcasts over the leading dims; the
  // gradient comes from matmul's rule (P_h and P_w need none).
  const Tensor ph = adaptive_bins(h, oh, x.device(), x.dtype());
  const Tensor pw = adaptive_bins(w, ow, x.device(), x.dtype());
  return matmul(matmul(ph, x), pw.t());
}

Tensor adaptive_max_pool2d(const Tensor& x, std::array<std::int64_t, 2> output_size) {
  ANVIL_PROFILE_OP("adaptive_max_pool2d", &x);
  check_adaptive("adaptive_max_pool2d", x, output_size);
  if (x.dim() == 3) return adaptive_max_pool2d(x.unsqueeze(0), output_size).squeeze(0);
  const auto [oh, ow] = output_size;
  const std::int64_t h = x.size(2), w = x.size(3);
  // Equal bins are a regular pool (the fused kernel where there is one).
  if (h % oh == 0 && w % ow == 0) return max_pool2d(x, {h / oh, w / ow}, {h / oh, w / ow});
  // A bin is a rectangle, so its max is the max over its rows of the max over
  // its columns: OH + OW reductions rather than OH * OW.
  return adaptive_max_along(adaptive_max_along(x, 2, oh), 3, ow);
}

namespace {

// Training's update of the running statistics from the batch's mean and
// (biased) variance [C] over `count` values per channel, in place; either
// may be undefined. The running variance is unbiased (PyTorch's rule); one
// value per channel has none.
void update_running_statistics(const Tensor& running_mean, const Tensor& running_var, const Tensor& mean,
                               const Tensor& var, std::int64_t count, double momentum) {
  const double unbias = count > 1 ? static_cast<double>(count) / static_cast<double>(count - 1) : 1.0;
  Tensor rm = running_mean, rv = running_var;
  if (rm.defined()) rm.mul_(1.0 - momentum).add_(mean * momentum);
  if (rv.defined()) rv.mul_(1.0 - momentum).add_(var * (momentum * unbias));
}

// Whether batch_norm takes the backend's fused kernels (Note [Fused batch
// norm]): weight, bias and the running statistics must be of the kernels'
// per-channel dtype (x's, f32 for 16-bit x: PyTorch's mixed batch norm) and
// the running statistics contiguous (the kernel updates them in place).
bool fused_batch_norm_applies(const Tensor& x, std::initializer_list<const Tensor*> per_channel) {
  if (x.numel() == 0 || !detail::has_fused(x, {detail::FusedOp::BatchNorm, detail::FusedOp::BatchNormBackward}))
    return false;
  const DType p = is_half(x.dtype()) ? f32 : x.dtype();
  for (const Tensor* t : per_channel)
    if (t->defined() && (t->dtype() != p || !t->is_contiguous())) return false;
  return true;
}

// x [N, C, S...] as the kernels see it, and the shared arguments. A
// channels-last x [N, C, H, W] is [N*H*W, C] in memory: the kernels' [N, C, S]
// with N*H*W rows and S = 1, so every backend normalises it as it is.
detail::BatchNormArgs batch_norm_args(const Tensor& x, bool training) {
  detail::BatchNormArgs a;
  a.dtype = x.dtype();
  a.n = x.size(0);
  a.c = x.size(1);
  a.s = x.numel() / (a.n * a.c);
  if (x.suggest_memory_format() == MemoryFormat::ChannelsLast) {
    a.n *= a.s;
    a.s = 1;
  }
  a.training = training;
  return a;
}

Tensor batch_norm_fused(const Tensor& input, const Tensor& running_mean, const Tensor& running_var,
                        const Tensor& weight, const Tensor& bias, bool training, double momentum, double eps,
                        const Tensor& residual_in, bool relu) {
  const MemoryFormat format = input.suggest_memory_format();  // channels-last kept, else contiguous
  const Tensor x = input.contiguous(format);
  const Tensor residual = residual_in.defined() ? residual_in.contiguous(format) : Tensor{};
  const std::int64_t c = x.size(1);
  detail::BatchNormArgs a = batch_norm_args(x, training);
  a.eps = eps;
  const DType p = a.param_dtype();
  Tensor out = detail::make_empty(x.shape(), x.dtype(), x.device(), format);
  Tensor mean, invstd;
  {
    NoGradGuard no_grad;
    if (training) {
      // The kernel updates the running statistics itself: one launch.
      mean = detail::make_empty({c}, p, x.device());
      invstd = detail::make_empty({c}, p, x.device());
      const std::int64_t count = a.n * a.s;
      a.momentum = momentum;
      a.unbias = count > 1 ? static_cast<double>(count) / static_cast<double>(count - 1) : 1.0;
      if (running_mean.defined()) a.running_mean = operand(running_mean);
      if (running_var.defined()) a.running_var = operand(running_var);
    } else {
      mean = running_mean.contiguous();
      invstd = rsqrt(running_var + eps);
    }
    const Tensor w = weight.defined() ? weight.contiguous() : Tensor{};
    const Tensor b = bias.defined() ? bias.contiguous() : Tensor{};
    a.x = operand(x), a.y = operand(out), a.mean = operand(mean), a.invstd = operand(invstd);
    if (w.defined()) a.weight = operand(w);
    if (b.defined()) a.bias = operand(b);
    if (residual.defined()) a.residual = operand(residual);
    a.relu = relu;
    detail::dispatch::batch_norm(x.device(), a);
  }
  detail::record_batch_norm_fused(out, x, weight, bias, mean, invstd, training, residual, relu);
  return out;
}

}  // namespace

namespace detail {

BatchNormGrads batch_norm_backward(const Tensor& grad, const Tensor& x, const Tensor& mean, const Tensor& invstd,
                                   const Tensor& weight, bool training, bool want_input, bool want_weight,
                                   const Tensor& relu_output, bool want_residual) {
  ANVIL_PROFILE_OP("batch_norm_backward", &grad, &x);
  const MemoryFormat format = x.suggest_memory_format();  // x as the forward saved it: dense in it
  const Tensor g = grad.to(x.dtype()).contiguous(format), w = weight.defined() ? weight.contiguous() : Tensor{};
  BatchNormArgs a = batch_norm_args(x, training);
  BatchNormGrads out;
  out.sum_g = make_empty(mean.shape(), mean.dtype(), x.device());
  if (want_weight) {
    out.weight = make_empty(mean.shape(), mean.dtype(), x.device());
    a.grad_weight = operand(out.weight);
  }
  if (want_input) {
    out.input = make_empty(x.shape(), x.dtype(), x.device(), format);
    a.grad_x = operand(out.input);
  }
  const Tensor y = relu_output.defined() ? relu_output.contiguous(format) : Tensor{};
  if (y.defined()) {
    a.relu = true;
    a.y = operand(y);
    if (want_residual) {
      out.residual = make_empty(x.shape(), x.dtype(), x.device(), format);
      a.grad_residual = operand(out.residual);
    }
  }
  a.grad = operand(g), a.x = operand(x), a.mean = operand(mean), a.invstd = operand(invstd);
  a.sum_g = operand(out.sum_g);
  if (w.defined()) a.weight = operand(w);
  dispatch::batch_norm_backward(x.device(), a);
  return out;
}

}  // namespace detail

Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var, const Tensor& weight,
                  const Tensor& bias, bool training, double momentum, double eps, const Tensor& residual,
                  Activation activation) {
  ANVIL_PROFILE_OP("batch_norm", &x);
  detail::check_defined("batch_norm", x);
  // Not on an autocast list, as in PyTorch: a 16-bit input stays 16-bit
  // (its statistics and arithmetic in f32, weight, bias and the running
  // statistics f32), so the ReLU and residual add after it stay 16-bit too.
  ANVIL_CHECK(x.dim() >= 2, ShapeError, "batch_norm: input must be [N, C, ...]; expected at least 2 dims, got ",
              x.shape());
  ANVIL_CHECK(is_floating(x.dtype()), DTypeError,
              "batch_norm: input must be floating; expected f32, f64, f16 or bf16, got ", x.dtype());
  std::vector<Tensor> on_device{x};
  const std::int64_t c = x.size(1);
  const std::pair<const char*, const Tensor*> per_channel[] = {
      {"running_mean", &running_mean}, {"running_var", &running_var}, {"weight", &weight}, {"bias", &bias}};
  for (const auto& [name, t] : per_channel) {
    if (!t->defined()) continue;
    on_device.push_back(*t);
    ANVIL_CHECK(t->shape() == Shape{c}, ShapeError, "batch_norm: ", name, " must be [C] for an input of ", c,
                " channels; expected [", c, "], got ", t->shape());
  }
  if (residual.defined()) {
    ANVIL_CHECK(residual.shape() == x.shape(), ShapeError,
                "batch_norm: residual must have the input's shape; expected ", x.shape(), ", got ", residual.shape());
    ANVIL_CHECK(residual.dtype() == x.dtype(), DTypeError,
                "batch_norm: residual must have the input's dtype; expected ", x.dtype(), ", got ", residual.dtype());
    on_device.push_back(residual);
  }
  ANVIL_CHECK(activation == Activation::None || activation == Activation::ReLU, ValueError,
              "batch_norm: unknown activation; expected None or ReLU, got ", static_cast<int>(activation));
  const bool relu = activation == Activation::ReLU;
  detail::check_same_device("batch_norm", on_device);
  ANVIL_CHECK(training || (running_mean.defined() && running_var.defined()), ValueError,
              "batch_norm: evaluation normalises with the running statistics; expected running_mean and running_var, "
              "got ",
              running_mean.defined() ? "no running_var" : "no running_mean");
  if (fused_batch_norm_applies(x, {&running_mean, &running_var, &weight, &bias}))
    return batch_norm_fused(x, running_mean, running_var, weight, bias, training, momentum, eps, residual, relu);
  std::vector<std::int64_t> dims{0};
  for (int i = 2; i < x.dim(); ++i) dims.push_back(i);
  Shape per_channel_shape = Shape::filled(x.dim(), 1);
  per_channel_shape[1] = c;
  // 16-bit inputs compute in f32 and round once, as PyTorch does.
  const DType compute = is_half(x.dtype()) ? f32 : x.dtype();
  const std::int64_t count = x.numel() / std::max<std::int64_t>(c, 1);
  Tensor out, xc, invstd;
  {
    NoGradGuard no_grad;
    const Tensor xf = x.to(compute);
    Tensor var;
    if (training) {
      const Tensor mu = mean(xf, dims, true);
      xc = xf - mu;
      var = detail::reduce_op(detail::ReduceOp::SumSquares, "batch_norm", xc, dims, true, compute,
                              1.0 / static_cast<double>(std::max<std::int64_t>(count, 1)));
      update_running_statistics(running_mean, running_var, mu.reshape({c}), var.reshape({c}), count, momentum);
    } else {
      xc = xf - running_mean.reshape(per_channel_shape).to(compute);
      var = running_var.reshape(per_channel_shape).to(compute);
    }
    invstd = rsqrt(var + eps);
    Tensor y = xc * (weight.defined() ? invstd * weight.reshape(per_channel_shape).to(compute) : invstd);
    if (bias.defined()) y.add_(bias.reshape(per_channel_shape).to(compute));
    out = y.to(x.dtype());
  }
  detail::record_batch_norm(out, x, weight, bias, xc, invstd, training);
  // The composite's epilogue: the unfused ops, recorded as they are.
  if (residual.defined()) out = out + residual;
  if (relu) out = anvil::relu(out);
  return out;
}

// --- Tensor members ---------------------------------------------------------------------
Tensor Tensor::softmax(int dim) const { return anvil::softmax(*this, dim); }
Tensor Tensor::log_softmax(int dim) const { return anvil::log_softmax(*this, dim); }
Tensor Tensor::as_strided(const Shape& shape, const Strides& strides, std::int64_t offset) const {
  return anvil::as_strided(*this, shape, strides, offset);
}

}  // namespace anvil
