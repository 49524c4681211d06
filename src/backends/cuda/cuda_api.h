// The CUDA runtime API as anvil uses it, and ANVIL_CUDA_CHECK.
//
// Note [CUDA without a driver]
// anvil links the CUDA runtime statically (cudart_static), which loads the
// driver (libcuda.so.1) itself at first use. A binary built with CUDA
// therefore starts on a machine without an NVIDIA driver: the first runtime
// call returns cudaErrorInsufficientDriver, cuda:N simply does not exist, and
// the CPU and OpenCL paths run. Never link libcuda directly: such a binary
// does not even start without the driver.
#pragma once

#include <cuda_runtime_api.h>

#include <string>

#include "backends/common/op_scope.h"

namespace anvil::cuda {

using device_common::OpScope;
inline const char* current_op() noexcept { return device_common::current_op_or("cuda"); }

// "cudaErrorMemoryAllocation (2): out of memory"
std::string error_text(cudaError_t e);

// Throws BackendError: "<op>: <expr> failed with <error> on <device> at <file>:<line>".
[[noreturn]] void throw_cuda_error(cudaError_t e, const char* expr, const char* file, int line,
                                   const std::string& device);

}  // namespace anvil::cuda

// Every runtime call goes through this (STYLE "Errors"). `device` is what
// the message names ("cuda:0").
#define ANVIL_CUDA_CHECK(device, expr)                                                        \
  do {                                                                                        \
    const cudaError_t anvil_cuda_status_ = (expr);                                            \
    if (anvil_cuda_status_ != cudaSuccess)                                                    \
      ::anvil::cuda::throw_cuda_error(anvil_cuda_status_, #expr, __FILE__, __LINE__, device); \
  } while (0)
