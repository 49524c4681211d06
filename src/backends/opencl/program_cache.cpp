#include "backends/opencl/program_cache.h"

#include <cstdio>
#include <set>
#include <sstream>
#include <vector>

#include "anvil/error.h"
#include "backends/opencl/kernels_embedded.h"
#include "backends/opencl/runtime.h"

namespace anvil::opencl {

namespace {

const char* embedded_text(const std::string& name) {
  for (std::size_t i = 0; i < kNumEmbeddedKernelSources; ++i)
    if (name == kEmbeddedKernelSources[i].name) return kEmbeddedKernelSources[i].text;
  return nullptr;
}

void append_resolved(const std::string& name, std::set<std::string>& seen, std::string& out) {
  if (!seen.insert(name).second) return;
  const char* text = embedded_text(name);
  ANVIL_ASSERT(text != nullptr, "kernel source ", name, " is not embedded; add it to src/kernels");
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    const std::string directive = "#include \"";
    if (line.rfind(directive, 0) == 0) {
      const std::size_t end = line.find('"', directive.size());
      append_resolved(line.substr(directive.size(), end - directive.size()), seen, out);
      continue;
    }
    out += line;
    out += '\n';
  }
}

std::string build_log(cl_program program, cl_device_id device) {
  std::size_t size = 0;
  if (clGetProgramBuildInfo(program, device, CL_PROGRAM_BUILD_LOG, 0, nullptr, &size) != CL_SUCCESS) return "";
  std::string log(size, '\0');
  if (clGetProgramBuildInfo(program, device, CL_PROGRAM_BUILD_LOG, size, log.data(), nullptr) != CL_SUCCESS)
    return "";
  while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
  constexpr std::size_t kMaxLog = 4000;
  if (log.size() > kMaxLog) log = log.substr(0, kMaxLog) + "\n...";
  return log;
}

}  // namespace

std::string assemble_source(const std::string& file) {
  std::set<std::string> seen;
  std::string out;
  append_resolved("prelude_opencl.h", seen, out);
  append_resolved(file, seen, out);
  return out;
}

ProgramCache::ProgramCache(cl_context context, cl_device_id device, std::string label, bool fp64)
    : context_(context), device_(device), label_(std::move(label)), fp64_(fp64) {}

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

  const std::string source = assemble_source(file);
  const char* text = source.c_str();
  const std::size_t length = source.size();
  cl_int err = CL_SUCCESS;
  cl_program program = nullptr;
  ANVIL_CL_CHECK(label_, (program = clCreateProgramWithSource(context_, 1, &text, &length, &err), err));
  const cl_int status = clBuildProgram(program, 1, &device_, options.c_str(), nullptr, nullptr);
  if (status != CL_SUCCESS) {
    const std::string log = build_log(program, device_);
    clReleaseProgram(program);
    throw CompileError(detail::cat(current_op(), ": building kernel source ", file, " for ", label_,
                                   " failed with ", status_name(status), "; options: ", options, "\n", log));
  }
  if (env_flag("ANVIL_OPENCL_BUILD_LOG")) {
    const std::string log = build_log(program, device_);
    if (!log.empty()) std::fprintf(stderr, "anvil: build log of %s (%s) on %s:\n%s\n", file.c_str(), options.c_str(),
                                   label_.c_str(), log.c_str());
  }
  programs_.emplace(key, program);
  return program;
}

cl_kernel ProgramCache::build(std::uint64_t key, const KernelSpec& spec) {
  cl_program p = program(spec.file, spec.defines);
  cl_int err = CL_SUCCESS;
  cl_kernel k = nullptr;
  ANVIL_CL_CHECK(label_, (k = clCreateKernel(p, spec.name.c_str(), &err), err));
  kernels_.emplace(key, k);
  return k;
}

}  // namespace anvil::opencl
