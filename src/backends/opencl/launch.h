// Setting a kernel's arguments and enqueueing it (the caller holds the
// device's lock; see device_common::DeviceSlot::mutex).
//
// Rule: a kernel's first launch on a CPU device waits for it. Launch::run
// returns only once that command has completed, so a test that holds a
// queue closed (opencl::testing::QueueGate) must run the same ops once
// before closing the gate, or it waits forever. Later launches with the
// same kernel, local size and grid class return at once (a hash lookup).
//
// Note [A kernel's first run waits on CPU devices]
// PoCL compiles a kernel's work-group function on a device worker thread when
// a command of it first runs: one per local size and (PoCL 3.1) grid class,
// narrower than 65535 groups or not. If the process exits during that compile,
// exit() has already destroyed LLVM's statics and the worker crashes inside
// LLVM (SIGSEGV in TargetPassConfig::addPass, or an abort); it takes a cold
// POCL_CACHE_DIR. So on a CPU device the first launch of each (kernel, work
// dims, local size, grid class) waits until its command has completed (the
// FirstRuns of first_runs.h): every compile happens inside a call of ours,
// never at exit. The wait raises nothing; a failure surfaces at the next sync
// as for any command. PoCL serialises its compiles itself, so no lock of ours
// is taken. A CLBlast GEMM waits the same way the first time each (dtype,
// transposes, batching, shape, leading dims) runs (gemm.cpp).
#pragma once

#include <cstddef>
#include <cstdint>

#include "backends/common/kernel_specs.h"
#include "backends/opencl/runtime.h"

namespace anvil::opencl {

class Launch {
 public:
  Launch(Queue& q, cl_kernel k) noexcept : q_(q), k_(k) {}
  template <typename T>
  Launch& arg(const T& value) {
    return bytes(&value, sizeof(T));
  }
  Launch& buffer(const void* handle);  // a cl_mem, or null for an unused pointer argument
  Launch& scalar(const device_common::ScalarArg& a) { return bytes(a.bytes, a.size); }
  Launch& bytes(const void* p, std::size_t n);
  // 1-D over n work-items in groups of the device's local size.
  void run(std::int64_t n, const char* op);
  void run(cl_uint dims, const std::size_t* global, const std::size_t* local, const char* op);

 private:
  Queue& q_;
  cl_kernel k_;
  cl_uint next_ = 0;
};

}  // namespace anvil::opencl
