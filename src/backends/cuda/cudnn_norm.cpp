// The CUDA backend's fused batch norm (backend.h, Note [Fused batch norm])
// through cuDNN's spatial batch norm, in training; norm.kern runs the rest.
//
// Note [cuDNN batch norm]
// ~~~~~~~~~~~~~~~~~~~~~~~
// - Which: f32 in training with at least two values per channel, while cuDNN
//   is enabled (ANVIL_CUDNN_BATCH_NORM=0 keeps norm.kern). Evaluation and
//   16-bit inputs take norm.kern, whose training is one launch each way too.
// - One call each way (issue 38): the forward writes mean and invstd and
//   updates the running statistics itself (PyTorch's momentum, unbiased
//   variance); the backward's dscale is the weight's gradient and its dbias
//   sum_g. What one call cannot give (the biased variance, one running
//   statistic alone, sum_gxc) goes to norm.kern. Not the Ex form: without a
//   fused activation its workspace buys nothing. Compiled here, not run.
// - Layout: x [N, C, S] as a 4-d [N, C, S, 1] tensor, CUDNN_BATCHNORM_SPATIAL.
#include <climits>

#include "anvil/error.h"
#include "backends/common/scratch.h"
#include "backends/cuda/launch.h"
#include "backends/cuda/runtime.h"

namespace anvil::cuda {

namespace {

using detail::BatchNormArgs;
using detail::KernelOperand;
using device_common::Scratch;

float* at(const KernelOperand& o) noexcept { return static_cast<float*>(o.data) + o.offset; }

// Tensor descriptors destroyed at scope exit.
class TensorDesc {
 public:
  TensorDesc(const CudnnApi& api, const std::string& label, int n, int c, int h) : api_(api) {
    ANVIL_CUDNN_CHECK(label, api.cudnnCreateTensorDescriptor(&d_));
    const cudnnStatus_t st = api.cudnnSetTensor4dDescriptorEx(d_, CUDNN_DATA_FLOAT, n, c, h, 1, c * h, h, 1, 1);
    if (st != CUDNN_STATUS_SUCCESS) {
      api.cudnnDestroyTensorDescriptor(d_);
      throw_cudnn_error(st, "cudnnSetTensor4dDescriptorEx(d, CUDNN_DATA_FLOAT, n, c, s, 1, ...)", __FILE__, __LINE__,
                        label);
    }
  }
  ~TensorDesc() { api_.cudnnDestroyTensorDescriptor(d_); }
  TensorDesc(const TensorDesc&) = delete;
  TensorDesc& operator=(const TensorDesc&) = delete;
  operator cudnnTensorDescriptor_t() const noexcept { return d_; }

 private:
  const CudnnApi& api_;
  cudnnTensorDescriptor_t d_ = nullptr;
};

// A contiguous f32 operand over scratch memory (the shared kernels' input).
KernelOperand operand_of(const Scratch& block) noexcept {
  KernelOperand o;
  o.data = block.get();
  o.strides[0] = 1;
  return o;
}

}  // namespace

bool Runtime::batch_norm_dnn(Slot& s, const detail::BatchNormArgs& a, bool backward) {
  const CudnnApi* api = cudnn_if_enabled();
  if (api == nullptr || a.dtype != DType::F32 || !a.training || device_common::env_flag_off("ANVIL_CUDNN_BATCH_NORM"))
    return false;
  if (!backward && (a.var.data != nullptr || (a.running_mean.data == nullptr) != (a.running_var.data == nullptr)))
    return false;
  if (backward && a.sum_gxc.data != nullptr) return false;
  const std::int64_t m = a.n * a.s;
  if (m < 2 || a.c <= 0 || a.n > INT_MAX || a.c > INT_MAX || a.s > INT_MAX ||
      static_cast<double>(m) * static_cast<double>(a.c) >= static_cast<double>(INT_MAX))
    return false;
  const std::string& label = s.label();
  Queue& q = s.queue;
  cudnnHandle_t h = q.dnn(*api, s.allocator);
  const int n = static_cast<int>(a.n), c = static_cast<int>(a.c), sp = static_cast<int>(a.s);
  const TensorDesc x(*api, label, n, c, sp);
  const TensorDesc per_channel(*api, label, 1, c, 1);
  const float one = 1.0f, zero = 0.0f;
  const std::size_t cbytes = static_cast<std::size_t>(c) * sizeof(float);

  // cuDNN needs a scale (and, forward, a bias): ones and zeros when absent.
  std::unique_ptr<Scratch> ones;
  float* scale = a.weight.data != nullptr ? at(a.weight) : nullptr;
  if (scale == nullptr) {
    ones = std::make_unique<Scratch>(s.allocator, cbytes);
    device_common::fill(s, operand_of(*ones), c, Scalar(1.0f));
    scale = ones->as<float>();
  }

  if (!backward) {
    // Zeros for an absent bias; null running statistics are not updated.
    std::unique_ptr<Scratch> zeros;
    float* bias = a.bias.data != nullptr ? at(a.bias) : nullptr;
    if (bias == nullptr) {
      zeros = std::make_unique<Scratch>(s.allocator, cbytes);
      ANVIL_CUDA_CHECK(label, cudaMemsetAsync(zeros->as<float>(), 0, cbytes, q.stream));
      bias = zeros->as<float>();
    }
    const bool running = a.running_mean.data != nullptr;
    ANVIL_CUDNN_CHECK(label, api->cudnnBatchNormalizationForwardTraining(
                                 h, CUDNN_BATCHNORM_SPATIAL, &one, &zero, x, at(a.x), x, at(a.y), per_channel, scale,
                                 bias, a.momentum, running ? at(a.running_mean) : nullptr,
                                 running ? at(a.running_var) : nullptr, a.eps, at(a.mean), at(a.invstd)));
    return true;
  }

  // cuDNN always writes dx: a scratch one when the input's gradient is not wanted.
  std::unique_ptr<Scratch> dx_scratch;
  float* dx = a.grad_x.data != nullptr ? at(a.grad_x) : nullptr;
  if (dx == nullptr) {
    dx_scratch = std::make_unique<Scratch>(s.allocator, static_cast<std::size_t>(m) * cbytes);
    dx = dx_scratch->as<float>();
  }
  // dscale is the weight's gradient: scratch when it is not wanted.
  std::unique_ptr<Scratch> dscale_scratch;
  float* dscale = a.grad_weight.data != nullptr ? at(a.grad_weight) : nullptr;
  if (dscale == nullptr) {
    dscale_scratch = std::make_unique<Scratch>(s.allocator, cbytes);
    dscale = dscale_scratch->as<float>();
  }
  ANVIL_CUDNN_CHECK(label, api->cudnnBatchNormalizationBackward(h, CUDNN_BATCHNORM_SPATIAL, &one, &zero, &one, &zero, x,
                                                                at(a.x), x, at(a.grad), x, dx, per_channel, scale,
                                                                dscale, at(a.sum_g), a.eps, at(a.mean), at(a.invstd)));
  return true;
}

}  // namespace anvil::cuda
