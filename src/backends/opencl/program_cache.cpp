#include "backends/opencl/program_cache.h"

#include <cstdio>

#include "anvil/error.h"
#include "backends/common/kernel_sources.h"
#include "backends/opencl/runtime.h"

namespace anvil::opencl {

namespace {

std::string build_log(cl_program program, cl_device_id device) {
  std::size_t size = 0;
  if (clGetProgramBuildInfo(program, device, CL_PROGRAM_BUILD_LOG, 0, nullptr, &size) != CL_SUCCESS) return "";
  std::string log(size, '\0');
  if (clGetProgramBuildInfo(program, device, CL_PROGRAM_BUILD_LOG, size, log.data(), nullptr) != CL_SUCCESS) return "";
  while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
  constexpr std::size_t kMaxLog = 4000;
  if (log.size() > kMaxLog) log = log.substr(0, kMaxLog) + "\n...";
  return log;
}

}  // namespace

std::string ClCompiler::options(const device_common::KernelSpec& spec) const {
  std::string options = device_common::define_options(spec) + " -cl-std=CL1.2";
  if (fp64_) options += " -DANVIL_HAS_FP64=1";
  return options;
}

cl_program ClCompiler::compile(const device_common::KernelSpec& spec, const std::string& options) const {
  const std::string& file = spec.file;
  const std::string source = device_common::assemble_source("prelude_opencl.h", file);
  const char* text = source.c_str();
  const std::size_t length = source.size();
  cl_int err = CL_SUCCESS;
  cl_program program = nullptr;
  ANVIL_CL_CHECK(label_, (program = clCreateProgramWithSource(context_, 1, &text, &length, &err), err));
  const cl_int status = clBuildProgram(program, 1, &device_, options.c_str(), nullptr, nullptr);
  if (status != CL_SUCCESS) {
    const std::string log = build_log(program, device_);
    clReleaseProgram(program);
    throw CompileError(detail::cat(current_op(), ": building kernel source ", file, " for ", label_, " failed with ",
                                   status_name(status), "; options: ", options, "\n", log));
  }
  if (env_flag("ANVIL_OPENCL_BUILD_LOG")) {
    const std::string log = build_log(program, device_);
    if (!log.empty())
      std::fprintf(stderr, "anvil: build log of %s (%s) on %s:\n%s\n", file.c_str(), options.c_str(), label_.c_str(),
                   log.c_str());
  }
  return program;
}

cl_kernel ClCompiler::kernel(cl_program program, const std::string& name) const {
  cl_int err = CL_SUCCESS;
  cl_kernel k = nullptr;
  ANVIL_CL_CHECK(label_, (k = clCreateKernel(program, name.c_str(), &err), err));
  return k;
}

}  // namespace anvil::opencl
