// The process-wide switches of include/anvil/backends.h as the backend
// modules read them (the CUDA module links libanvil, so it reads these
// atomics directly: a switch crosses into the module without a change to
// the backend interface), and the hook through which the CUDA module
// reports cuDNN's state to the core.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

namespace anvil::detail {

enum class MatmulPrecision : std::uint8_t { Highest, High, Medium };

struct VendorSettings {
  std::atomic<bool> cudnn_enabled{true};
  std::atomic<bool> cudnn_allow_tf32{true};
  std::atomic<bool> cudnn_benchmark{false};
  std::atomic<MatmulPrecision> matmul_precision{MatmulPrecision::Highest};
};
// Initialised from the environment on first use (ANVIL_CUDNN,
// ANVIL_CUDNN_ALLOW_TF32, ANVIL_CUDNN_BENCHMARK, ANVIL_FLOAT32_MATMUL_PRECISION).
VendorSettings& vendor_settings() noexcept;

// What the CUDA module knows of cuDNN (cudnn_api.cpp registers it when the
// module loads).
struct CudnnReport {
  bool available = false;
  int version = 0;
  std::string status;
};
using CudnnReportFn = CudnnReport (*)() noexcept;
void register_cudnn_report(CudnnReportFn fn) noexcept;

}  // namespace anvil::detail
