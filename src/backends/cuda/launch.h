// Collecting a kernel's arguments and launching it on the device's stream
// (the caller holds the device's lock; see device_common::DeviceSlot::mutex).
#pragma once

#include <climits>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "anvil/error.h"
#include "backends/common/kernel_specs.h"
#include "backends/cuda/runtime.h"

namespace anvil::cuda {

// Each argument is copied, so temporaries may die before the launch.
class Launch {
 public:
  // What one launch carries: each argument at an 8-byte boundary in a buffer
  // of kMaxArgBytes, at most kMaxArgs of them. test_cuda checks every kernel
  // of src/kernels fits (the multi-tensor optimiser steps take up to 80,
  // Note [Multi-tensor optimiser steps]; CUDA allows 4 KiB of parameters).
  static constexpr int kMaxArgs = 96;
  static constexpr std::size_t kMaxArgBytes = 1024;
  // Where an argument of the buffer so far starts: 8-aligned, enough for any of ours.
  static constexpr std::size_t aligned(std::size_t used) noexcept { return (used + 7) / 8 * 8; }

  Launch(Queue& q, cudaKernel_t k) noexcept : q_(q), k_(k) {}
  // args_ points into storage_: a copy would point into the original.
  Launch(const Launch&) = delete;
  Launch& operator=(const Launch&) = delete;
  template <typename T>
  Launch& arg(const T& value) {
    return bytes(&value, sizeof(T));
  }
  Launch& buffer(const void* handle) { return arg(handle); }  // a device pointer, or null
  Launch& scalar(const device_common::ScalarArg& a) { return bytes(a.bytes, a.size); }
  Launch& bytes(const void* p, std::size_t n) {
    used_ = aligned(used_);
    ANVIL_ASSERT(used_ + n <= sizeof storage_ && count_ < kMaxArgs, "cuda: too many kernel arguments");
    std::memcpy(storage_ + used_, p, n);
    args_[count_++] = storage_ + used_;
    used_ += n;
    return *this;
  }
  // 1-D over n threads.
  void run(std::int64_t n, const char* op) {
    if (n <= 0) return;
    std::size_t block = 256;
    if (n < 256) {  // one block sized to the work, at least a warp
      block = 32;
      while (block < static_cast<std::size_t>(n)) block <<= 1;
    }
    const std::size_t global = (static_cast<std::size_t>(n) + block - 1) / block * block;
    run(1, &global, &block, op);
  }
  // OpenCL's geometry: `global` counts threads in each dimension.
  void run(unsigned dims, const std::size_t* global, const std::size_t* local, const char* op) {
    std::size_t g[3] = {1, 1, 1}, l[3] = {1, 1, 1};
    for (unsigned d = 0; d < dims; ++d) {
      l[d] = local[d];
      g[d] = global[d] / local[d];
    }
    ANVIL_CHECK(g[0] <= INT_MAX && g[1] <= 65535 && g[2] <= 65535, NotSupported, op, ": launch of [", g[0], ", ", g[1],
                ", ", g[2], "] blocks on ", q_.label(),
                "; expected at most [2^31-1, 65535, 65535] (CUDA's grid limits)");
    const dim3 grid(static_cast<unsigned>(g[0]), static_cast<unsigned>(g[1]), static_cast<unsigned>(g[2]));
    const dim3 block(static_cast<unsigned>(l[0]), static_cast<unsigned>(l[1]), static_cast<unsigned>(l[2]));
    ANVIL_CUDA_CHECK(q_.label(), cudaLaunchKernel(reinterpret_cast<const void*>(k_), grid, block, args_, 0, q_.stream));
  }

 private:
  Queue& q_;
  cudaKernel_t k_;
  alignas(16) unsigned char storage_[kMaxArgBytes];
  std::size_t used_ = 0;
  void* args_[kMaxArgs] = {};
  int count_ = 0;
};

}  // namespace anvil::cuda
