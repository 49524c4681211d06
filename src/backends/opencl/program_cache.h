// Kernel programs built at run time, once per device, from the embedded
// sources of src/kernels with the OpenCL prelude (see
// backends/common/kernel_specs.h, Note [Kernel cache keys]). PoCL also
// caches the compiled binaries on disk (POCL_CACHE_DIR), which is what makes
// the second process start fast.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "backends/common/kernel_specs.h"
#include "backends/opencl/cl_api.h"

namespace anvil::opencl {

class ProgramCache {
 public:
  ProgramCache(cl_context context, cl_device_id device, std::string label, bool fp64);
  ~ProgramCache();
  ProgramCache(const ProgramCache&) = delete;
  ProgramCache& operator=(const ProgramCache&) = delete;

  // Not thread-safe: the caller holds its device's lock.
  // `request` is one of the kernel requests of kernel_specs.h.
  template <typename Request>
  cl_kernel kernel(const Request& request) {
    const std::uint64_t key = request.key();
    auto it = kernels_.find(key);
    if (it != kernels_.end()) [[likely]]
      return it->second;
    return build(key, request.spec());
  }

  // What decides whether a launch makes the driver compile a work-group
  // function (see Note [A kernel's first run waits on CPU devices], launch.h).
  struct RunShape {
    cl_kernel kernel;
    cl_uint dims;
    std::size_t local[3];
    bool small_grid;
    bool operator==(const RunShape&) const = default;
  };
  // True on CPU devices, whose drivers compile at a kernel's first run.
  bool first_runs_wait() const noexcept { return first_runs_wait_; }
  // Whether a launch of this shape has completed before, and noting that one has.
  bool has_run(const RunShape& shape) const { return runs_.contains(shape); }
  void note_run(const RunShape& shape) { runs_.insert(shape); }
  // The same for a CLBlast GEMM, whose kernels are CLBlast's: its shape and
  // options decide which it compiles, so the whole call is the key.
  bool has_run_gemm(const std::string& call) const { return gemm_runs_.contains(call); }
  void note_run_gemm(std::string call) { gemm_runs_.insert(std::move(call)); }

  std::size_t program_count() const noexcept { return programs_.size(); }
  // The symbols of every kernel built so far (for the CUDA parity test).
  const std::vector<std::string>& kernel_names() const noexcept { return names_; }

 private:
  cl_kernel build(std::uint64_t key, const kernels::KernelSpec& spec);
  cl_program program(const std::string& file, const std::string& defines);

  struct RunShapeHash {
    std::size_t operator()(const RunShape& r) const noexcept {
      std::size_t h = std::hash<const void*>()(r.kernel);
      for (std::size_t v : {std::size_t{r.dims}, r.local[0], r.local[1], r.local[2], std::size_t{r.small_grid}})
        h = h * 1000003u ^ v;
      return h;
    }
  };

  cl_context context_;
  cl_device_id device_;
  std::string label_;
  bool fp64_;
  bool first_runs_wait_ = false;
  std::unordered_map<std::string, cl_program> programs_;
  std::unordered_map<std::uint64_t, cl_kernel> kernels_;
  std::vector<std::string> names_;
  std::unordered_set<RunShape, RunShapeHash> runs_;
  std::unordered_set<std::string> gemm_runs_;
};

}  // namespace anvil::opencl
