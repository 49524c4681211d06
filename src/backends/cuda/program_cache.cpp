#include "backends/cuda/program_cache.h"

#include "anvil/error.h"
#include "backends/cuda/nvrtc_compile.h"

namespace anvil::cuda {

std::string CudaCompiler::options(const device_common::KernelSpec& spec) const {
  return device_common::define_options(spec);
}

cudaLibrary_t CudaCompiler::compile(const device_common::KernelSpec& spec, const std::string&) const {
  CompiledProgram compiled = compile_program_cached(spec, major_, minor_);
  cudaLibrary_t lib = nullptr;
  if (compiled.from_cache &&
      cudaLibraryLoadData(&lib, compiled.image.data(), nullptr, nullptr, 0, nullptr, nullptr, 0) != cudaSuccess) {
    cudaGetLastError();  // a stale or damaged cache file: compile afresh
    lib = nullptr;
    compiled = compile_program(spec, major_, minor_);
  }
  if (lib == nullptr)
    ANVIL_CUDA_CHECK(label_,
                     cudaLibraryLoadData(&lib, compiled.image.data(), nullptr, nullptr, 0, nullptr, nullptr, 0));
  return lib;
}

cudaKernel_t CudaCompiler::kernel(cudaLibrary_t program, const std::string& name) const {
  cudaKernel_t k = nullptr;
  ANVIL_CUDA_CHECK(label_, cudaLibraryGetKernel(&k, program, name.c_str()));
  return k;
}

}  // namespace anvil::cuda
