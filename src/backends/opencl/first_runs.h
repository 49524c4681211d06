// Which kernel launches have run to completion once on this device, for
// Note [A kernel's first run waits on CPU devices] (launch.h).
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <unordered_set>

#include "backends/opencl/cl_api.h"

namespace anvil::opencl {

class FirstRuns {
 public:
  // What decides whether a launch makes the driver compile a work-group
  // function.
  struct RunShape {
    cl_kernel kernel;
    cl_uint dims;
    std::size_t local[3];
    bool small_grid;
    bool operator==(const RunShape&) const = default;
  };

  explicit FirstRuns(cl_device_id device) {
    cl_device_type type = 0;
    if (clGetDeviceInfo(device, CL_DEVICE_TYPE, sizeof type, &type, nullptr) == CL_SUCCESS)
      wait_ = (type & CL_DEVICE_TYPE_CPU) != 0;
  }

  // True on CPU devices, whose drivers compile at a kernel's first run.
  bool wait() const noexcept { return wait_; }
  // Whether a launch of this shape has completed before, and noting that one has.
  bool has_run(const RunShape& shape) const { return runs_.contains(shape); }
  void note_run(const RunShape& shape) { runs_.insert(shape); }
  // The same for a CLBlast GEMM, whose kernels are CLBlast's: its shape and
  // options decide which it compiles, so the whole call is the key.
  bool has_run_gemm(const std::string& call) const { return gemm_runs_.contains(call); }
  void note_run_gemm(std::string call) { gemm_runs_.insert(std::move(call)); }

 private:
  struct RunShapeHash {
    std::size_t operator()(const RunShape& r) const noexcept {
      std::size_t h = std::hash<const void*>()(r.kernel);
      for (std::size_t v : {std::size_t{r.dims}, r.local[0], r.local[1], r.local[2], std::size_t{r.small_grid}})
        h = h * 1000003u ^ v;
      return h;
    }
  };

  bool wait_ = false;
  std::unordered_set<RunShape, RunShapeHash> runs_;
  std::unordered_set<std::string> gemm_runs_;
};

}  // namespace anvil::opencl
