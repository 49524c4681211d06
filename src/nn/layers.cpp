// The layers of anvil/nn.h and the initialisers.
#include <cmath>
#include <utility>

#include "anvil/autograd.h"
#include "anvil/nn.h"
#include "nn/repr.h"

namespace anvil::nn {

// --- Linear -----------------------------------------------------------------------------
Linear::Linear(std::int64_t in_features, std::int64_t out_features, bool bias) : in_(in_features), out_(out_features) {
  ANVIL_CHECK(in_features > 0 && out_features > 0, ValueError,
              "Linear: feature counts must be positive; expected > 0, got in ", in_features, " and out ", out_features);
  const double bound = 1.0 / std::sqrt(static_cast<double>(in_features));
  Tensor w = empty({out_features, in_features});
  init::uniform_(w, -bound, bound);
  w_ = register_parameter("weight", w);
  if (bias) {
    Tensor b = empty({out_features});
    init::uniform_(b, -bound, bound);
    b_ = register_parameter("bias", b);
  }
}

Tensor Linear::forward(const Tensor& x) {
  ANVIL_CHECK(x.dim() >= 1 && x.size(-1) == in_, ShapeError,
              "Linear: input has the wrong number of features; expected [..., ", in_, "], got ", x.shape());
  return linear(x, w_, b_);
}

std::string Linear::name() const {
  return detail::cat("Linear(in_features=", in_, ", out_features=", out_, ", bias=", bool_text(b_.defined()), ")");
}

// --- Sequential -------------------------------------------------------------------------
void Sequential::push_back(std::shared_ptr<Module> m) {
  register_module(std::to_string(layers_.size()), m);
  layers_.push_back(std::move(m));
}

Tensor Sequential::forward(const Tensor& x) {
  Tensor y = x;
  for (auto& m : layers_) y = m->forward(y);
  return y;
}

Sequential& Sequential::add(const std::string& lname, std::shared_ptr<Module> m) {
  register_module(lname, m);  // checks the name before the layer is kept
  layers_.push_back(std::move(m));
  return *this;
}

std::string Sequential::name() const { return "Sequential"; }

Module& Sequential::operator[](std::size_t i) const {
  ANVIL_CHECK(i < layers_.size(), IndexError, "Sequential: index ", i, " is out of range; expected an index in [0, ",
              layers_.size(), "), got ", i);
  return *layers_[i];
}

std::string Softmax::name() const { return detail::cat("Softmax(dim=", dim_, ")"); }
std::string Flatten::name() const { return detail::cat("Flatten(start_dim=", start_, ", end_dim=", end_, ")"); }

// --- Dropout ----------------------------------------------------------------------------
Dropout::Dropout(double p) : p_(p) {
  ANVIL_CHECK(p >= 0.0 && p <= 1.0, ValueError, "Dropout: probability out of range; expected p in [0, 1], got ", p);
}

Tensor Dropout::forward(const Tensor& x) { return dropout(x, p_, is_training()); }

std::string Dropout::name() const { return detail::cat("Dropout(p=", p_, ")"); }

// --- Conv2d and pools ---------------------------------------------------------------------
namespace {
// Shared by Conv1d and Conv2d.
void check_conv(const char* layer, std::int64_t in, std::int64_t out, std::int64_t k, std::int64_t stride,
                std::int64_t padding, std::int64_t dilation, std::int64_t groups) {
  ANVIL_CHECK(in > 0 && out > 0 && k > 0 && stride > 0 && padding >= 0 && dilation > 0 && groups > 0, ValueError, layer,
              ": channels, kernel size, stride, dilation and groups must be positive and padding >= 0; got in ", in,
              ", out ", out, ", kernel ", k, ", stride ", stride, ", padding ", padding, ", dilation ", dilation,
              ", groups ", groups);
  ANVIL_CHECK(in % groups == 0 && out % groups == 0, ValueError, layer,
              ": channels must be divisible by groups; expected in and out multiples of ", groups, ", got in ", in,
              " and out ", out);
}
// PyTorch's initialisation: uniform with bound 1 / sqrt(fan_in); bias
// undefined when not wanted.
std::pair<Tensor, Tensor> conv_params(const Shape& weight_shape, bool bias) {
  std::int64_t fan_in = 1;
  for (int i = 1; i < weight_shape.size(); ++i) fan_in *= weight_shape[i];
  const double bound = 1.0 / std::sqrt(static_cast<double>(fan_in));
  Tensor w = empty(weight_shape), b;
  init::uniform_(w, -bound, bound);
  if (bias) {
    b = empty({weight_shape[0]});
    init::uniform_(b, -bound, bound);
  }
  return {w, b};
}
// PyTorch's repr shows dilation and groups only when they are not 1.
std::string conv_extra(std::int64_t dilation, std::int64_t groups, bool one_d) {
  std::string s;
  if (dilation != 1)
    s += one_d ? detail::cat(", dilation=(", dilation, ",)")
               : detail::cat(", dilation=(", dilation, ", ", dilation, ")");
  if (groups != 1) s += detail::cat(", groups=", groups);
  return s;
}
}  // namespace

Conv2d::Conv2d(std::int64_t in_channels, std::int64_t out_channels, std::int64_t kernel_size, std::int64_t stride,
               std::int64_t padding, std::int64_t dilation, std::int64_t groups, bool bias)
    : in_(in_channels),
      out_(out_channels),
      k_(kernel_size),
      stride_(stride),
      padding_(padding),
      dilation_(dilation),
      groups_(groups) {
  check_conv("Conv2d", in_channels, out_channels, kernel_size, stride, padding, dilation, groups);
  auto [w, b] = conv_params({out_channels, in_channels / groups, kernel_size, kernel_size}, bias);
  w_ = register_parameter("weight", w);
  if (b.defined()) b_ = register_parameter("bias", b);
}

Tensor Conv2d::forward(const Tensor& x) {
  return conv2d(x, w_, b_, {stride_, stride_}, {padding_, padding_}, {dilation_, dilation_}, groups_);
}

std::string Conv2d::name() const {
  return detail::cat("Conv2d(", in_, ", ", out_, ", kernel_size=(", k_, ", ", k_, "), stride=(", stride_, ", ", stride_,
                     "), padding=(", padding_, ", ", padding_, ")", conv_extra(dilation_, groups_, false),
                     ", bias=", bool_text(b_.defined()), ")");
}

Conv1d::Conv1d(std::int64_t in_channels, std::int64_t out_channels, std::int64_t kernel_size, std::int64_t stride,
               std::int64_t padding, std::int64_t dilation, std::int64_t groups, bool bias)
    : in_(in_channels),
      out_(out_channels),
      k_(kernel_size),
      stride_(stride),
      padding_(padding),
      dilation_(dilation),
      groups_(groups) {
  check_conv("Conv1d", in_channels, out_channels, kernel_size, stride, padding, dilation, groups);
  auto [w, b] = conv_params({out_channels, in_channels / groups, kernel_size}, bias);
  w_ = register_parameter("weight", w);
  if (b.defined()) b_ = register_parameter("bias", b);
}

Tensor Conv1d::forward(const Tensor& x) { return conv1d(x, w_, b_, stride_, padding_, dilation_, groups_); }

std::string Conv1d::name() const {
  return detail::cat("Conv1d(", in_, ", ", out_, ", kernel_size=(", k_, ",), stride=(", stride_, ",), padding=(",
                     padding_, ",)", conv_extra(dilation_, groups_, true), ", bias=", bool_text(b_.defined()), ")");
}

MaxPool2d::MaxPool2d(std::int64_t kernel_size, std::int64_t stride, std::int64_t padding)
    : k_(kernel_size), stride_(stride == 0 ? kernel_size : stride), padding_(padding) {}
Tensor MaxPool2d::forward(const Tensor& x) { return max_pool2d(x, {k_, k_}, {stride_, stride_}, {padding_, padding_}); }
std::string MaxPool2d::name() const {
  return detail::cat("MaxPool2d(kernel_size=", k_, ", stride=", stride_, ", padding=", padding_, ")");
}

AvgPool2d::AvgPool2d(std::int64_t kernel_size, std::int64_t stride, std::int64_t padding)
    : k_(kernel_size), stride_(stride == 0 ? kernel_size : stride), padding_(padding) {}
Tensor AvgPool2d::forward(const Tensor& x) { return avg_pool2d(x, {k_, k_}, {stride_, stride_}, {padding_, padding_}); }
std::string AvgPool2d::name() const {
  return detail::cat("AvgPool2d(kernel_size=", k_, ", stride=", stride_, ", padding=", padding_, ")");
}

AdaptiveAvgPool2d::AdaptiveAvgPool2d(std::array<std::int64_t, 2> output_size) : size_(output_size) {
  ANVIL_CHECK(size_[0] > 0 && size_[1] > 0, ValueError,
              "AdaptiveAvgPool2d: output size must be positive; expected e.g. {1, 1}, got {", size_[0], ", ", size_[1],
              "}");
}
Tensor AdaptiveAvgPool2d::forward(const Tensor& x) { return adaptive_avg_pool2d(x, size_); }
std::string AdaptiveAvgPool2d::name() const {
  return detail::cat("AdaptiveAvgPool2d(output_size=(", size_[0], ", ", size_[1], "))");
}

AdaptiveMaxPool2d::AdaptiveMaxPool2d(std::array<std::int64_t, 2> output_size) : size_(output_size) {
  ANVIL_CHECK(size_[0] > 0 && size_[1] > 0, ValueError,
              "AdaptiveMaxPool2d: output size must be positive; expected e.g. {1, 1}, got {", size_[0], ", ", size_[1],
              "}");
}
Tensor AdaptiveMaxPool2d::forward(const Tensor& x) { return adaptive_max_pool2d(x, size_); }
std::string AdaptiveMaxPool2d::name() const {
  return detail::cat("AdaptiveMaxPool2d(output_size=(", size_[0], ", ", size_[1], "))");
}

Upsample::Upsample(InterpolateOptions options) : options_(std::move(options)) {}
Tensor Upsample::forward(const Tensor& x) { return interpolate(x, options_); }
std::string Upsample::name() const {
  // PyTorch's repr: what was given, one number when both dims agree, floats as Python prints them.
  const auto real = [](double v) {
    std::string s = detail::cat(v);
    return s.find_first_of(".einf") == std::string::npos ? s + ".0" : s;
  };
  const auto [h, w] = options_.size;
  const auto [sh, sw] = options_.scale_factor;
  std::string info;
  if (sh != 0 || sw != 0)
    info = sh == sw ? "scale_factor=" + real(sh) : detail::cat("scale_factor=(", real(sh), ", ", real(sw), ")");
  else
    info = h == w ? detail::cat("size=", h) : detail::cat("size=(", h, ", ", w, ")");
  return detail::cat("Upsample(", info, ", mode=", options_.mode, ")");
}

// --- BatchNorm ----------------------------------------------------------------------------
BatchNorm::BatchNorm(std::int64_t num_features, double eps, double momentum, std::vector<int> allowed_dims,
                     Activation activation)
    : features_(num_features),
      eps_(eps),
      momentum_(momentum),
      allowed_dims_(std::move(allowed_dims)),
      activation_(activation) {
  ANVIL_CHECK(num_features > 0, ValueError, "BatchNorm: num_features must be positive; expected > 0, got ",
              num_features);
  w_ = register_parameter("weight", ones({num_features}));
  b_ = register_parameter("bias", zeros({num_features}));
  register_buffer("running_mean", zeros({num_features}));
  register_buffer("running_var", ones({num_features}));
  register_buffer("num_batches_tracked", zeros({}, i64));
}

Tensor BatchNorm::forward(const Tensor& x) { return forward(x, Tensor{}); }

Tensor BatchNorm::forward(const Tensor& x, const Tensor& residual) {
  bool ok = false;
  for (int d : allowed_dims_) ok = ok || x.dim() == d;
  ANVIL_CHECK(ok && x.size(1) == features_, ShapeError, name(), ": input has the wrong shape; expected [N, ", features_,
              allowed_dims_[0] == 4 ? ", H, W]" : "] or [N, C, L]", ", got ", x.shape());
  const Tensor out = batch_norm(x, buffer_ref("running_mean"), buffer_ref("running_var"), w_, b_, is_training(),
                                momentum_, eps_, residual, activation_);
  if (is_training()) {
    NoGradGuard no_grad;
    buffer_ref("num_batches_tracked").add_(1);
  }
  return out;
}

std::string BatchNorm1d::name() const {
  return detail::cat("BatchNorm1d(", features_, ", eps=", eps_, ", momentum=", momentum_, ")");
}
std::string BatchNorm2d::name() const {
  return detail::cat("BatchNorm2d(", features_, ", eps=", eps_, ", momentum=", momentum_,
                     activation_ == Activation::ReLU ? ", activation=relu)" : ")");
}

// --- init -----------------------------------------------------------------------------------
namespace init {

namespace {
Tensor& fill_from(Tensor& t, const Tensor& values) {
  NoGradGuard no_grad;
  t.copy_(values);
  return t;
}
}  // namespace

Tensor& normal_(Tensor& t, double mean, double std) {
  return fill_from(t, randn(t.shape(), t.device(), t.dtype()) * std + mean);
}
Tensor& uniform_(Tensor& t, double a, double b) {
  return fill_from(t, rand(t.shape(), t.device(), t.dtype()) * (b - a) + a);
}
Tensor& constant_(Tensor& t, double value) {
  NoGradGuard no_grad;
  t.fill_(value);
  return t;
}
Tensor& zeros_(Tensor& t) { return constant_(t, 0.0); }
Tensor& ones_(Tensor& t) { return constant_(t, 1.0); }

std::pair<std::int64_t, std::int64_t> fans(const Tensor& t) {
  ANVIL_CHECK(t.dim() >= 2, ShapeError,
              "init: fan in and fan out need a weight with >= 2 dims; expected [out, in, ...], got ", t.shape());
  std::int64_t receptive = 1;
  for (int i = 2; i < t.dim(); ++i) receptive *= t.size(i);
  return {t.size(1) * receptive, t.size(0) * receptive};
}

Tensor& xavier_uniform_(Tensor& t, double gain) {
  const auto [fi, fo] = fans(t);
  const double a = gain * std::sqrt(6.0 / static_cast<double>(fi + fo));
  return uniform_(t, -a, a);
}
Tensor& xavier_normal_(Tensor& t, double gain) {
  const auto [fi, fo] = fans(t);
  return normal_(t, 0.0, gain * std::sqrt(2.0 / static_cast<double>(fi + fo)));
}
Tensor& kaiming_uniform_(Tensor& t, double a) {
  const double gain = std::sqrt(2.0 / (1.0 + a * a));
  const double bound = gain * std::sqrt(3.0 / static_cast<double>(fans(t).first));
  return uniform_(t, -bound, bound);
}
Tensor& kaiming_normal_(Tensor& t, double a) {
  const double gain = std::sqrt(2.0 / (1.0 + a * a));
  return normal_(t, 0.0, gain / std::sqrt(static_cast<double>(fans(t).first)));
}

}  // namespace init
}  // namespace anvil::nn
