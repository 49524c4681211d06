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

ProgramCache::ProgramCache(cl_context context, cl_device_id device, std::string label, bool fp64)
    : context_(context), device_(device), label_(std::move(label)), fp64_(fp64) {
  cl_device_type type = 0;
  if (clGetDeviceInfo(device, CL_DEVICE_TYPE, sizeof type, &type, nullptr) == CL_SUCCESS)
    first_runs_wait_ = (type & CL_DEVICE_TYPE_CPU) != 0;
}

ProgramCache::~ProgramCache() {
  for (auto& [key, k] : kernels_) clReleaseKernel(k);
  for (auto& [key, p] : programs_) clReleaseProgram(p);
}

cl_program ProgramCache::program(const std::string& file, const std::string& defines) {
  std::string options = defines + " -cl-std=CL1.2";
  if (fp64_) options += " -DANVIL_HAS_FP64=1";
  const std::string key = file + '|' + options;
  auto it = programs_.find(key);
  if (it != programs_.end()) return it->second;

  const std::string source = kernels::assemble_source("prelude_opencl.h", file);
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
  programs_.emplace(key, program);
  return program;
}

cl_kernel ProgramCache::build(std::uint64_t key, const kernels::KernelSpec& spec) {
  cl_program p = program(spec.file, kernels::define_options(spec));
  cl_int err = CL_SUCCESS;
  cl_kernel k = nullptr;
  ANVIL_CL_CHECK(label_, (k = clCreateKernel(p, spec.name.c_str(), &err), err));
  kernels_.emplace(key, k);
  names_.push_back(spec.name);
  return k;
}

}  // namespace anvil::opencl
