// The CUDA backend (DESIGN §2): the shared device backend
// (backends/common/device_backend.h) over the CUDA runtime of runtime.h, on
// NVIDIA GPUs. The kernels are the shared ones of src/kernels, compiled by
// NVRTC (nvrtc_compile.h); GEMM is cuBLAS (cublas.cpp). See Note [CUDA
// without a driver] and Note [Asynchronous CUDA execution].
#include "backends/cuda/launch.h"
#include "backends/cuda/runtime.h"

namespace anvil {
// cuDNN's convolution and batch norm (cudnn_conv.cpp, cudnn_norm.cpp) are wired in.
static_assert(device_common::DnnRuntime<cuda::Runtime>);
template class device_common::DeviceBackend<cuda::Runtime>;
}  // namespace anvil

namespace anvil::detail {
// Returned by the module's entry point (module.cpp), which the registry calls.
Backend* make_cuda_backend() { return &cuda::backend(); }
}  // namespace anvil::detail
