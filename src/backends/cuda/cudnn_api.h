// cuDNN 9, loaded at run time (dlopen "libcudnn.so.9"; never linked), for
// the CUDA backend's convolution, batch norm and recurrent layers (DESIGN §2
// "Vendor libraries behind the primitives"). Modelled on NCCL's loader
// (src/distributed/nccl.h): nothing here needs libcudnn, a driver or a GPU to build
// or to start. Without cuDNN load_cudnn() says why and the generic paths run
// (im2col + cuBLAS for conv2d, norm.kern for batch norm).
//
//   std::string why;
//   if (const CudnnApi* dnn = load_cudnn(&why))
//     ANVIL_CUDNN_CHECK(label, dnn->cudnnSetStream(handle, stream));
//
// Note [Finding cuDNN]
// ~~~~~~~~~~~~~~~~~~~~
// ANVIL_CUDNN_LIBRARY=/path/to/libcudnn.so.9 loads that file; otherwise the
// dynamic loader's own search for libcudnn.so.9 (LD_LIBRARY_PATH, then
// ld.so.cache: the CUDA toolkit's lib64 here). PyTorch's wheels carry cuDNN in
// <site-packages>/nvidia/cudnn/lib: put that directory on LD_LIBRARY_PATH
// (libcudnn.so.9 loads its sub-libraries, libcudnn_cnn.so.9 and the others,
// by the same search). ANVIL_CUDNN=0 (or off/false/no), or
// anvil::backends::cudnn::set_enabled(false), runs the generic paths instead.
// The headers of /usr/local/cuda/include give the types and enums only; each
// function is a pointer taken with dlsym from the loaded file.
#pragma once

#include <cudnn.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "anvil/dtype.h"

namespace anvil::cuda {

// The legacy cuDNN 9 API anvil calls, one pointer per function, named as
// cuDNN names it: dnn->cudnnConvolutionForward(...). A symbol missing from
// the loaded library makes load_cudnn() fail with its name.
#define ANVIL_CUDNN_CORE_FUNCTIONS(X)                   \
  X(cudnnGetVersion)                                    \
  X(cudnnGetErrorString)                                \
  X(cudnnCreate)                                        \
  X(cudnnDestroy)                                       \
  X(cudnnSetStream)                                     \
  X(cudnnCreateTensorDescriptor)                        \
  X(cudnnDestroyTensorDescriptor)                       \
  X(cudnnSetTensor4dDescriptorEx)                       \
  X(cudnnSetTensorNdDescriptor)                         \
  X(cudnnCreateFilterDescriptor)                        \
  X(cudnnDestroyFilterDescriptor)                       \
  X(cudnnSetFilter4dDescriptor)                         \
  X(cudnnSetFilterNdDescriptor)                         \
  X(cudnnAddTensor)                                     \
  X(cudnnTransformTensor)                               \
  X(cudnnScaleTensor)                                   \
  /* convolution */                                     \
  X(cudnnCreateConvolutionDescriptor)                   \
  X(cudnnDestroyConvolutionDescriptor)                  \
  X(cudnnSetConvolution2dDescriptor)                    \
  X(cudnnSetConvolutionMathType)                        \
  X(cudnnSetConvolutionGroupCount)                      \
  X(cudnnGetConvolutionForwardAlgorithmMaxCount)        \
  X(cudnnGetConvolutionBackwardDataAlgorithmMaxCount)   \
  X(cudnnGetConvolutionBackwardFilterAlgorithmMaxCount) \
  X(cudnnGetConvolutionForwardAlgorithm_v7)             \
  X(cudnnGetConvolutionBackwardDataAlgorithm_v7)        \
  X(cudnnGetConvolutionBackwardFilterAlgorithm_v7)      \
  X(cudnnFindConvolutionForwardAlgorithmEx)             \
  X(cudnnFindConvolutionBackwardDataAlgorithmEx)        \
  X(cudnnFindConvolutionBackwardFilterAlgorithmEx)      \
  X(cudnnGetConvolutionForwardWorkspaceSize)            \
  X(cudnnGetConvolutionBackwardDataWorkspaceSize)       \
  X(cudnnGetConvolutionBackwardFilterWorkspaceSize)     \
  X(cudnnConvolutionForward)                            \
  X(cudnnConvolutionBackwardData)                       \
  X(cudnnConvolutionBackwardFilter)                     \
  X(cudnnConvolutionBackwardBias)                       \
  /* batch norm */                                      \
  X(cudnnBatchNormalizationForwardTraining)             \
  X(cudnnBatchNormalizationForwardInference)            \
  X(cudnnBatchNormalizationBackward)

// The recurrent layers (cuDNN's v8 RNN API, unchanged in 9) and the dropout
// between their layers.
#define ANVIL_CUDNN_RNN_FUNCTIONS(X) \
  X(cudnnCreateRNNDescriptor)        \
  X(cudnnDestroyRNNDescriptor)       \
  X(cudnnSetRNNDescriptor_v8)        \
  X(cudnnGetRNNWeightSpaceSize)      \
  X(cudnnGetRNNWeightParams)         \
  X(cudnnGetRNNTempSpaceSizes)       \
  X(cudnnRNNForward)                 \
  X(cudnnRNNBackwardData_v8)         \
  X(cudnnRNNBackwardWeights_v8)      \
  X(cudnnCreateRNNDataDescriptor)    \
  X(cudnnDestroyRNNDataDescriptor)   \
  X(cudnnSetRNNDataDescriptor)       \
  X(cudnnCreateDropoutDescriptor)    \
  X(cudnnDestroyDropoutDescriptor)   \
  X(cudnnDropoutGetStatesSize)       \
  X(cudnnSetDropoutDescriptor)       \
  X(cudnnRestoreDropoutDescriptor)

#define ANVIL_CUDNN_FUNCTIONS(X) ANVIL_CUDNN_CORE_FUNCTIONS(X) ANVIL_CUDNN_RNN_FUNCTIONS(X)

struct CudnnApi {
#define ANVIL_CUDNN_MEMBER(name) decltype(&::name) name = nullptr;
  ANVIL_CUDNN_FUNCTIONS(ANVIL_CUDNN_MEMBER)
#undef ANVIL_CUDNN_MEMBER

  std::size_t version = 0;  // cudnnGetVersion(): 91900 for 9.19.0
  std::string path;         // the file that was loaded
};

// The loaded library, or null with the reason in `why` (ANVIL_CUDNN off, no
// library, a symbol missing, older than 9). Loaded once per process; never
// throws.
const CudnnApi* load_cudnn(std::string* why) noexcept;

// "cuDNN 9.19.0 (/usr/local/cuda/lib64/libcudnn.so.9)", or "not loaded: <why>".
std::string cudnn_status() noexcept;

// Whether the cuDNN paths are on now: the library loaded, and neither
// ANVIL_CUDNN=0 nor anvil::backends::cudnn::set_enabled(false). Cheap: asked
// before every convolution.
const CudnnApi* cudnn_if_enabled() noexcept;

// How many convolution plans (descriptors and a chosen algorithm) were made
// in this process, on every device: a test sees a cache hit as no change.
std::uint64_t cudnn_conv_plans_made() noexcept;

// The cuDNN data type of an anvil dtype the cuDNN paths take (f32, f64, f16,
// bf16); f32 for any other, which the paths' *_takes() turn away first.
inline cudnnDataType_t cudnn_data_type(DType t) noexcept {
  switch (t) {
    case DType::F64:
      return CUDNN_DATA_DOUBLE;
    case DType::F16:
      return CUDNN_DATA_HALF;
    case DType::BF16:
      return CUDNN_DATA_BFLOAT16;
    default:
      return CUDNN_DATA_FLOAT;
  }
}

// Throws BackendError: "<op>: <expr> failed with CUDNN_STATUS_… (<code>) on
// <device> at <file>:<line>".
[[noreturn]] void throw_cudnn_error(cudnnStatus_t status, const char* expr, const char* file, int line,
                                    const std::string& device);

}  // namespace anvil::cuda

// Every cuDNN call goes through this (STYLE "Errors"); `device` is what the
// message names ("cuda:0"), `expr` a call through a CudnnApi.
#define ANVIL_CUDNN_CHECK(device, expr)                                                         \
  do {                                                                                          \
    const cudnnStatus_t anvil_cudnn_status_ = (expr);                                           \
    if (anvil_cudnn_status_ != CUDNN_STATUS_SUCCESS)                                            \
      ::anvil::cuda::throw_cudnn_error(anvil_cudnn_status_, #expr, __FILE__, __LINE__, device); \
  } while (0)
