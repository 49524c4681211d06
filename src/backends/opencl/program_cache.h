// Kernel programs built at run time, once per device, from the embedded
// sources of src/kernels (see kernels_embedded.h).
//
// Note [Kernel cache keys]
// A launch looks its cl_kernel up by a 64-bit key packed from small
// integers (family, op, dtypes, variant), so the hot path builds no
// strings. Only a miss builds the program's source and options; programs
// are shared by every kernel built from the same (file, defines). PoCL also
// caches the compiled binaries on disk (POCL_CACHE_DIR), which is what makes
// the second process start fast.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>

#include "backends/opencl/cl_api.h"

namespace anvil::opencl {

struct KernelSpec {
  std::string file;     // "binary.kern"
  std::string defines;  // "-DTA=float -DTB=float ..." (no spaces inside a value)
  std::string name;     // "add_f32_c"
};

// The source a device compiles for `file`: the OpenCL prelude, then the
// file with its `#include "x"` lines replaced by the embedded x (once each).
std::string assemble_source(const std::string& file);

class ProgramCache {
 public:
  ProgramCache(cl_context context, cl_device_id device, std::string label, bool fp64);
  ~ProgramCache();
  ProgramCache(const ProgramCache&) = delete;
  ProgramCache& operator=(const ProgramCache&) = delete;

  // Not thread-safe: the caller holds its device's lock.
  template <typename MakeSpec>
  cl_kernel kernel(std::uint64_t key, MakeSpec&& make_spec) {
    auto it = kernels_.find(key);
    if (it != kernels_.end()) [[likely]] return it->second;
    return build(key, make_spec());
  }

  std::size_t program_count() const noexcept { return programs_.size(); }

 private:
  cl_kernel build(std::uint64_t key, const KernelSpec& spec);
  cl_program program(const std::string& file, const std::string& defines);

  cl_context context_;
  cl_device_id device_;
  std::string label_;
  bool fp64_;
  std::unordered_map<std::string, cl_program> programs_;
  std::unordered_map<std::uint64_t, cl_kernel> kernels_;
};

}  // namespace anvil::opencl
