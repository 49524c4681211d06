// The CUDA backend's fused batch norm (backend.h, Note [Fused batch norm])
// through cuDNN's spatial batch norm, in training; norm.kern runs the rest.
//
// Note [cuDNN batch norm]
// ~~~~~~~~~~~~~~~~~~~~~~~
// - Which: f32 in training, with at least two values per channel, while cuDNN
//   is loaded and enabled (ANVIL_CUDNN_BATCH_NORM=0 keeps norm.kern).
//   Evaluation takes norm.kern: the frontend hands over invstd, not the
//   variance cuDNN's inference call wants, and that pass is one elementwise.
// - The frontend's contract is kept: the forward writes the batch mean, the
//   biased variance and invstd (cuDNN's running variance is unbiased: taken
//   with factor 1 from zeroed scratch and scaled by (m - 1) / m); the backward
//   writes sum_g and sum_gxc (cuDNN's dscale divided by invstd).
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
    // [running mean | running var] with factor 1: the batch's mean and
    // unbiased variance (the scratch is zeroed: cuDNN reads the old values).
    Scratch running(s.allocator, 3 * cbytes);
    float* bias = a.bias.data != nullptr ? at(a.bias) : running.as<float>() + 2 * c;
    ANVIL_CUDA_CHECK(
        label, cudaMemsetAsync(running.as<float>(), 0, a.bias.data != nullptr ? 2 * cbytes : 3 * cbytes, q.stream));
    ANVIL_CUDNN_CHECK(
        label, api->cudnnBatchNormalizationForwardTraining(h, CUDNN_BATCHNORM_SPATIAL, &one, &zero, x, at(a.x), x,
                                                           at(a.y), per_channel, scale, bias, 1.0, running.as<float>(),
                                                           running.as<float>() + c, a.eps, at(a.mean), at(a.invstd)));
    // The biased variance the frontend's contract names.
    const float unbiased_to_biased = static_cast<float>(static_cast<double>(m - 1) / static_cast<double>(m));
    ANVIL_CUDNN_CHECK(label, api->cudnnTransformTensor(h, &unbiased_to_biased, per_channel, running.as<float>() + c,
                                                       &zero, per_channel, at(a.var)));
    return true;
  }

  // cuDNN always writes dx: a scratch one when the input's gradient is not wanted.
  std::unique_ptr<Scratch> dx_scratch;
  float* dx = a.grad_x.data != nullptr ? at(a.grad_x) : nullptr;
  if (dx == nullptr) {
    dx_scratch = std::make_unique<Scratch>(s.allocator, static_cast<std::size_t>(m) * cbytes);
    dx = dx_scratch->as<float>();
  }
  Scratch dscale(s.allocator, cbytes);
  ANVIL_CUDNN_CHECK(label, api->cudnnBatchNormalizationBackward(
                               h, CUDNN_BATCHNORM_SPATIAL, &one, &zero, &one, &zero, x, at(a.x), x, at(a.grad), x, dx,
                               per_channel, scale, dscale.as<float>(), at(a.sum_g), a.eps, at(a.mean), at(a.invstd)));
  // sum_gxc = dscale / invstd.
  detail::ElementwiseArgs e;
  e.ndim = 1;
  e.shape[0] = c;
  e.numel = c;
  e.out = a.sum_gxc;
  e.in[0] = operand_of(dscale);
  e.in[1] = a.invstd;
  e.nin = 2;
  device_common::binary(s, detail::BinaryOp::Div, e);
  return true;
}

}  // namespace anvil::cuda
