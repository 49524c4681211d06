// The CUDA backend's fused batch norm (backend.h, Note [Fused batch norm])
// through cuDNN's spatial batch norm, in training; norm.kern runs the rest.
//
// Note [cuDNN batch norm]
// ~~~~~~~~~~~~~~~~~~~~~~~
// - Which: asked for (ANVIL_CUDNN_BATCH_NORM=1): norm.kern, splitting large
//   channels, was faster on an H200 (bf16 ResNet-18 at 96x96: 0.56 against
//   0.72 s an epoch). Then f32, f16 and bf16 inputs (f32 statistics and
//   parameters) in training, at least two values per channel; a 16-bit
//   type cuDNN refuses goes to norm.kern from then on.
// - One call each way (issue 38): the forward writes mean and invstd and
//   updates the running statistics itself (PyTorch's momentum, unbiased
//   variance); the backward's dscale is the weight's gradient and its dbias
//   sum_g. What one call cannot give (the biased variance, one running
//   statistic alone, sum_gxc) goes to norm.kern. Not the Ex form: without a
//   fused activation its workspace buys nothing. Run on an H200 (f32).
// - Layout: x [N, C, S] as a 4-d [N, C, S, 1] tensor, CUDNN_BATCHNORM_SPATIAL.
#include <atomic>
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
// An x-shaped operand (x, y and their gradients), of the input's dtype.
void* at(const KernelOperand& o, DType t) noexcept {
  return static_cast<char*>(o.data) + o.offset * static_cast<std::int64_t>(element_size(t));
}

// Whether cuDNN refused batch norm on f16 or bf16 inputs (then norm.kern).
std::atomic<bool> g_refused[2];
std::atomic<bool>& refused(DType t) noexcept { return g_refused[t == DType::BF16 ? 1 : 0]; }

// A call's status: true when it ran; false when cuDNN does not support the
// 16-bit type (remembered); otherwise the error.
bool ran(cudnnStatus_t st, DType t, const char* call, const std::string& label) {
  if (st == CUDNN_STATUS_SUCCESS) return true;
  if (t != DType::F32 && (st == CUDNN_STATUS_NOT_SUPPORTED || st == CUDNN_STATUS_BAD_PARAM)) {
    refused(t).store(true, std::memory_order_relaxed);
    return false;
  }
  throw_cudnn_error(st, call, __FILE__, __LINE__, label);
}

// Tensor descriptors destroyed at scope exit.
class TensorDesc {
 public:
  TensorDesc(const CudnnApi& api, const std::string& label, cudnnDataType_t type, int n, int c, int h) : api_(api) {
    ANVIL_CUDNN_CHECK(label, api.cudnnCreateTensorDescriptor(&d_));
    const cudnnStatus_t st = api.cudnnSetTensor4dDescriptorEx(d_, type, n, c, h, 1, c * h, h, 1, 1);
    if (st != CUDNN_STATUS_SUCCESS) {
      api.cudnnDestroyTensorDescriptor(d_);
      throw_cudnn_error(st, "cudnnSetTensor4dDescriptorEx(d, type, n, c, s, 1, ...)", __FILE__, __LINE__, label);
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
  const bool half = a.dtype == DType::F16 || a.dtype == DType::BF16;
  if (api == nullptr || (a.dtype != DType::F32 && !half) || !a.training ||
      !device_common::env_flag("ANVIL_CUDNN_BATCH_NORM") || (half && refused(a.dtype).load(std::memory_order_relaxed)))
    return false;
  if (!backward && (a.var.data != nullptr || (a.running_mean.data == nullptr) != (a.running_var.data == nullptr)))
    return false;
  if (backward && a.sum_gxc.data != nullptr) return false;
  // The fused epilogue (residual add, ReLU) stays on norm.kern: cuDNN's
  // BatchNormalization*Ex with CUDNN_BATCHNORM_OPS_BN_ADD_ACTIVATION or
  // BN_ACTIVATION runs only in CUDNN_BATCHNORM_SPATIAL_PERSISTENT mode on NHWC
  // CUDNN_DATA_HALF tensors with C a multiple of 4 (cuDNN 8 API reference), and
  // its backward needs the forward's reserve space; anvil's x here is NCHW.
  if (a.residual.data != nullptr || a.relu || a.grad_residual.data != nullptr) return false;
  const std::int64_t m = a.n * a.s;
  if (m < 2 || a.c <= 0 || a.n > INT_MAX || a.c > INT_MAX || a.s > INT_MAX ||
      static_cast<double>(m) * static_cast<double>(a.c) >= static_cast<double>(INT_MAX))
    return false;
  const std::string& label = s.label();
  Queue& q = s.queue;
  cudnnHandle_t h = q.dnn(*api, s.allocator);
  const int n = static_cast<int>(a.n), c = static_cast<int>(a.c), sp = static_cast<int>(a.s);
  const TensorDesc x(*api, label, cudnn_data_type(a.dtype), n, c, sp);
  const TensorDesc per_channel(*api, label, CUDNN_DATA_FLOAT, 1, c, 1);
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
    return ran(api->cudnnBatchNormalizationForwardTraining(
                   h, CUDNN_BATCHNORM_SPATIAL, &one, &zero, x, at(a.x, a.dtype), x, at(a.y, a.dtype), per_channel,
                   scale, bias, a.momentum, running ? at(a.running_mean) : nullptr,
                   running ? at(a.running_var) : nullptr, a.eps, at(a.mean), at(a.invstd)),
               a.dtype, "cudnnBatchNormalizationForwardTraining", label);
  }

  // cuDNN always writes dx: a scratch one when the input's gradient is not wanted.
  std::unique_ptr<Scratch> dx_scratch;
  void* dx = a.grad_x.data != nullptr ? at(a.grad_x, a.dtype) : nullptr;
  if (dx == nullptr) {
    dx_scratch = std::make_unique<Scratch>(s.allocator, static_cast<std::size_t>(m) * c * element_size(a.dtype));
    dx = dx_scratch->get();
  }
  // dscale is the weight's gradient: scratch when it is not wanted.
  std::unique_ptr<Scratch> dscale_scratch;
  float* dscale = a.grad_weight.data != nullptr ? at(a.grad_weight) : nullptr;
  if (dscale == nullptr) {
    dscale_scratch = std::make_unique<Scratch>(s.allocator, cbytes);
    dscale = dscale_scratch->as<float>();
  }
  return ran(api->cudnnBatchNormalizationBackward(h, CUDNN_BATCHNORM_SPATIAL, &one, &zero, &one, &zero, x,
                                                  at(a.x, a.dtype), x, at(a.grad, a.dtype), x, dx, per_channel, scale,
                                                  dscale, at(a.sum_g), a.eps, at(a.mean), at(a.invstd)),
             a.dtype, "cudnnBatchNormalizationBackward", label);
}

}  // namespace anvil::cuda
