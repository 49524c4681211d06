// The OpenCL side of the shared program cache (common/program_cache.h):
// programs built at run time, once per device, from the embedded sources of
// src/kernels with the OpenCL prelude. PoCL also caches the compiled
// binaries on disk (POCL_CACHE_DIR), which is what makes the second process
// start fast.
#pragma once

#include <string>

#include "backends/common/kernel_specs.h"
#include "backends/common/program_cache.h"
#include "backends/opencl/cl_api.h"

namespace anvil::opencl {

class ClCompiler {
 public:
  using Program = cl_program;
  using Kernel = cl_kernel;

  ClCompiler(cl_context context, cl_device_id device, std::string label, bool fp64)
      : context_(context), device_(device), label_(std::move(label)), fp64_(fp64) {}

  std::string options(const device_common::KernelSpec& spec) const;
  cl_program compile(const device_common::KernelSpec& spec, const std::string& options) const;
  cl_kernel kernel(cl_program program, const std::string& name) const;
  static void release_kernel(cl_kernel k) noexcept { clReleaseKernel(k); }
  static void release_program(cl_program p) noexcept { clReleaseProgram(p); }

 private:
  cl_context context_;
  cl_device_id device_;
  std::string label_;
  bool fp64_;
};

using ProgramCache = device_common::ProgramCache<ClCompiler>;

}  // namespace anvil::opencl
