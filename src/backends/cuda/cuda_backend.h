// The CUDA backend (DESIGN §2): discovery, memory, streams and the
// primitives of core/backend.h on NVIDIA GPUs. The kernels are the shared
// ones of src/kernels, compiled by NVRTC (nvrtc_compile.h); GEMM is cuBLAS.
// See Note [CUDA without a driver] and Note [Asynchronous CUDA execution].
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <vector>

#include "backends/cuda/runtime.h"
#include "core/backend.h"

namespace anvil::detail {
// Registered by core/registry.cpp; a process-lifetime singleton whose
// construction never throws.
Backend* make_cuda_backend();
}  // namespace anvil::detail

namespace anvil::cuda {

class CudaBackend final : public detail::Backend {
 public:
  CudaBackend() noexcept = default;

  DeviceType type() const noexcept override { return DeviceType::CUDA; }
  int device_count() noexcept override;
  std::string unavailable_reason() noexcept override;
  bool is_accelerator(int) noexcept override { return true; }
  DeviceProperties properties(int index) override;

  void* allocate(int index, std::size_t bytes) override;
  void deallocate(int index, void* data, std::size_t bytes) noexcept override;
  MemoryStats memory_stats(int index) override;
  void reset_peak_memory_stats(int index) override;
  void empty_cache(int index) override;
  void set_memory_limit(int index, std::uint64_t bytes) override;

  void copy_from_host(int index, void* dst, std::size_t dst_offset, const void* src, std::size_t bytes) override;
  void copy_to_host(int index, void* dst, const void* src, std::size_t src_offset, std::size_t bytes) override;
  void copy_device(int dst_index, void* dst, std::size_t dst_offset, int src_index, const void* src,
                   std::size_t src_offset, std::size_t bytes) override;
  bool can_copy_direct(int dst_index, int src_index) noexcept override;

  void synchronize(int index) override;
  void* native_stream(int index) noexcept override;

  bool supports(const char* op, DType t, int index) noexcept override;
  void fill(int index, const detail::KernelOperand& out, std::int64_t numel, const Scalar& value) override;
  void arange(int index, const detail::KernelOperand& out, std::int64_t numel, double start, double step) override;
  void copy(int index, const detail::ElementwiseArgs& args) override;
  void unary(int index, detail::UnaryOp op, const detail::UnaryParams& params,
             const detail::ElementwiseArgs& args) override;
  void binary(int index, detail::BinaryOp op, const detail::ElementwiseArgs& args) override;
  void where(int index, const detail::ElementwiseArgs& args) override;
  void reduce(int index, detail::ReduceOp op, const detail::ReduceArgs& args) override;
  void gemm(int index, const detail::GemmArgs& args) override;
  void index(int index, const detail::IndexArgs& args) override;
  void random(int index, const detail::RandomArgs& args) override;

  bool supports_fused(detail::FusedOp op, DType t, int index) noexcept override;
  void im2col(int index, const detail::Im2colArgs& args) override;
  void col2im(int index, const detail::Im2colArgs& args) override;
  void max_pool2d(int index, const detail::Pool2dArgs& args) override;
  void max_pool2d_backward(int index, const detail::Pool2dArgs& args) override;

  bool has_device_clock(int index) noexcept override;
  void* record_timestamp(int index) override;
  double timestamp_elapsed(int index, void* start, void* end) override;
  void release_timestamp(int index, void* stamp) noexcept override;

  // The device's state, created on first use (stream, allocator, programs).
  DeviceState& state(int index);

 private:
  const Discovery& discovery() noexcept;
  bool gemm_cublas(DeviceState& s, const detail::GemmArgs& args);

  std::once_flag discovered_;
  Discovery discovery_;
  std::unique_ptr<std::once_flag[]> state_once_;
  std::vector<std::unique_ptr<DeviceState>> states_;
  std::unique_ptr<std::atomic<bool>[]> state_ready_;  // states_[i] may be read without the once_flag
  std::mutex peer_mutex_;
  std::vector<signed char> peer_;  // [dst * n + src]: -1 unknown, 0 no, 1 enabled
};

CudaBackend& backend();

}  // namespace anvil::cuda
