// The OpenCL backend (DESIGN §2): discovery, memory, queues and the
// primitives of core/backend.h on any OpenCL 1.2 device.
//
// Note [Asynchronous OpenCL execution]
// Each opencl:N has one in-order queue. Every primitive and copy is enqueued
// without waiting and returns; the host waits only in copy_to_host,
// synchronize and (with ANVIL_SYNC=1) after every op. Errors the device
// raises surface at the next of those waits, naming the op (see
// DeviceState::finish_locked). Memory freed while a queued command still
// uses it is safe: a block is only handed out again on the same device, so
// its next user is queued behind every earlier user; and cross-device copies
// make the source queue wait for the copy (copy_device).
#pragma once

#include <memory>
#include <mutex>
#include <vector>

#include "backends/opencl/runtime.h"
#include "core/backend.h"

namespace anvil::detail {
// Registered by core/registry.cpp; a process-lifetime singleton whose
// construction never throws.
Backend* make_opencl_backend();
}  // namespace anvil::detail

namespace anvil::opencl {

class OpenCLBackend final : public detail::Backend {
 public:
  OpenCLBackend() noexcept = default;
  ~OpenCLBackend() override;

  DeviceType type() const noexcept override { return DeviceType::OpenCL; }
  int device_count() noexcept override;
  std::string unavailable_reason() noexcept override;
  bool is_accelerator(int index) noexcept override;
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
  bool has_device_clock(int index) noexcept override;
  void* record_timestamp(int index) override;
  double timestamp_elapsed(int index, void* start, void* end) override;
  void release_timestamp(int index, void* stamp) noexcept override;

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

  // The device's state, created on first use (context, queue, allocator).
  DeviceState& state(int index);

 private:
  const Discovery& discovery() noexcept;
  cl_context context_for_slot(int slot);
  void gemm_tiled(DeviceState& s, const detail::GemmArgs& args);
  bool gemm_clblast(DeviceState& s, const detail::GemmArgs& args);

  std::once_flag discovered_;
  Discovery discovery_;
  std::mutex contexts_mutex_;
  std::vector<cl_context> contexts_;  // per platform slot, null until used
  std::unique_ptr<std::once_flag[]> state_once_;
  std::vector<std::unique_ptr<DeviceState>> states_;
};

OpenCLBackend& backend();

}  // namespace anvil::opencl
