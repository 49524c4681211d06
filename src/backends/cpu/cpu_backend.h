// The CPU backend: host memory through the caching allocator, kernels as
// vectorisable loops on the shared OpenMP pool, GEMM through OpenBLAS,
// convolution and recurrent layers through oneDNN.
// Everything runs synchronously on the calling thread (and the pool).
#pragma once

#include "core/backend.h"
#include "core/caching_allocator.h"
#include "core/kernel_traffic.h"

namespace anvil::cpu_backend {

// The ledger's count of one primitive (Note [What a launch is] in
// anvil/ledger.h): on the CPU each primitive is one launch.
inline void count(detail::Traffic t, std::uint64_t launches = 1) noexcept {
  static detail::WorkCounters& work = detail::work_counters(Device(DeviceType::CPU, 0));
  work.launch(launches);
  work.traffic(t.read, t.written);
}

class CpuBackend final : public detail::Backend {
 public:
  CpuBackend();
  DeviceType type() const noexcept override { return DeviceType::CPU; }
  int device_count() noexcept override { return 1; }
  std::string unavailable_reason() noexcept override { return ""; }
  bool is_accelerator(int) noexcept override { return false; }
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
  bool can_copy_direct(int, int) noexcept override { return true; }
  void synchronize(int) override {}
  // No device clock (Note [Device clocks]): ops run synchronously on the
  // calling thread, so anvil::Event's host clock is exact here.

  detail::Support supports(int, detail::Primitive, DType) noexcept override { return {}; }  // every dtype
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
  void scan(int index, const detail::ScanArgs& args) override;
  void argsort(int index, const detail::SortArgs& args) override;

  // Fused window kernels (cpu_window.cpp) and unary into binary, every
  // floating dtype, batch norm too.
  bool supports_fused(detail::FusedOp op, DType t, int index) noexcept override;
  void im2col(int index, const detail::Im2colArgs& args) override;
  void col2im(int index, const detail::Im2colArgs& args) override;
  void max_pool2d(int index, const detail::Pool2dArgs& args) override;
  void max_pool2d_backward(int index, const detail::Pool2dArgs& args) override;
  // Convolution through oneDNN (cpu_conv.cpp), f32 with enough channels.
  bool supports_fused_conv2d(int index, const detail::Conv2dArgs& shape) noexcept override;
  void conv2d(int index, const detail::Conv2dArgs& args) override;
  void conv2d_backward_data(int index, const detail::Conv2dArgs& args) override;
  void conv2d_backward_weight(int index, const detail::Conv2dArgs& args) override;
  void conv2d_backward(int index, const detail::Conv2dArgs& data, const detail::Conv2dArgs& weight) override;
  // Recurrent layers through oneDNN's RNN primitives (cpu_rnn.cpp), f32.
  bool supports_fused_rnn(int index, const detail::RnnArgs& shape) noexcept override;
  std::size_t rnn_reserve_bytes(int index, const detail::RnnArgs& args) override;
  void rnn_forward(int index, const detail::RnnArgs& args) override;
  void rnn_backward(int index, const detail::RnnArgs& args) override;
  // Unary into binary (cpu_elementwise.cpp), every floating dtype.
  void unary_binary(int index, detail::BinaryOp op, const detail::BinaryPrologue& prologue,
                    const detail::ElementwiseArgs& args) override;

  // interpolate and its adjoint (cpu_interpolate.cpp), every floating dtype.
  void interpolate(int index, const detail::InterpolateArgs& args) override;
  void interpolate_backward(int index, const detail::InterpolateArgs& args) override;

  // Fused batch norm (cpu_norm.cpp), every floating dtype.
  void batch_norm(int index, const detail::BatchNormArgs& args) override;
  void batch_norm_backward(int index, const detail::BatchNormArgs& args) override;
  void layer_norm(int index, const detail::LayerNormArgs& args) override;
  void layer_norm_backward(int index, const detail::LayerNormArgs& args) override;
  // softmax and log_softmax over rows (cpu_norm.cpp), every floating dtype.
  void softmax(int index, const detail::SoftmaxArgs& args) override;
  void softmax_backward(int index, const detail::SoftmaxArgs& args) override;

  // Fused SGD and Adam steps (cpu_optim.cpp), f32 and f64.
  bool supports_optimizer_step(detail::OptimizerKind kind, DType t, int index) noexcept override;
  void optimizer_step(int index, const detail::OptimizerStepArgs& args) override;
  // ...and over many tensors in one parallel region (cpu_optim.cpp).
  bool supports_optimizer_step_list(detail::OptimizerKind kind, DType t, int index) noexcept override;
  void optimizer_step_list(int index, const detail::OptimizerStepListArgs& args) override;

 private:
  detail::CachingAllocator allocator_;
};

}  // namespace anvil::cpu_backend
