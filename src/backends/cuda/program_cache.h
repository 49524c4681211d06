// The CUDA side of the shared program cache (common/program_cache.h): a
// program is compiled by NVRTC (through its disk cache, nvrtc_compile.h) and
// loaded with cudaLibraryLoadData; its kernels are looked up by name.
#pragma once

#include <string>

#include "backends/common/kernel_specs.h"
#include "backends/common/program_cache.h"
#include "backends/cuda/cuda_api.h"

namespace anvil::cuda {

class CudaCompiler {
 public:
  using Program = cudaLibrary_t;
  using Kernel = cudaKernel_t;

  CudaCompiler(std::string label, int major, int minor) : label_(std::move(label)), major_(major), minor_(minor) {}

  std::string options(const device_common::KernelSpec& spec) const;
  cudaLibrary_t compile(const device_common::KernelSpec& spec, const std::string& options) const;
  cudaKernel_t kernel(cudaLibrary_t program, const std::string& name) const;
  static void release_kernel(cudaKernel_t) noexcept {}  // owned by its library
  static void release_program(cudaLibrary_t p) noexcept { cudaLibraryUnload(p); }

 private:
  std::string label_;
  int major_, minor_;
};

using ProgramCache = device_common::ProgramCache<CudaCompiler>;

}  // namespace anvil::cuda
