// The primitives on an OpenCL device: the shared implementations of
// backends/common/device_primitives.h over this backend's queue.
#include "backends/common/device_primitives.h"

#include "backends/opencl/launch.h"
#include "backends/opencl/opencl_backend.h"

namespace anvil::opencl {

namespace {

// What device_primitives.h needs of a device, over a DeviceState whose lock
// the caller holds.
struct Queue {
  DeviceState& s;
  detail::CachingAllocator& allocator;

  explicit Queue(DeviceState& state) noexcept : s(state), allocator(state.allocator) {}
  template <typename Request>
  cl_kernel kernel(const Request& r) {
    return s.programs.kernel(r);
  }
  Launch launch(cl_kernel k) { return Launch(s, k); }
  void copy_within(void* dst, std::size_t dst_byte, const void* src, std::size_t src_byte, std::size_t bytes,
                   const char* op) {
    cl_event ev = nullptr;
    ANVIL_CL_CHECK(s.label(), clEnqueueCopyBuffer(s.queue, static_cast<cl_mem>(const_cast<void*>(src)),
                                                  static_cast<cl_mem>(dst), src_byte, dst_byte, bytes, 0, nullptr,
                                                  &ev));
    s.track_locked(ev, op);
  }
  void* index_error_buffer_locked(const char* op, std::int64_t dim_size) {
    return s.index_error_buffer_locked(op, dim_size);
  }
  bool fp64() const noexcept { return s.fp64(); }
  bool is_cpu() const noexcept { return s.is_cpu(); }
  int compute_units() const noexcept { return s.entry().props.compute_units; }
  std::size_t local_size() const noexcept { return s.local_size(); }
  std::size_t max_work_group() const noexcept { return s.entry().max_work_group; }
  const std::string& label() const noexcept { return s.label(); }
};

// Runs `body(queue)` as primitive `op` on opencl:index with its lock held.
template <typename Body>
void on_device(OpenCLBackend& b, int index, const char* op, Body&& body) {
  OpScope scope(op);
  DeviceState& s = b.state(index);
  std::lock_guard lock(s.mutex);
  Queue q(s);
  body(q);
}

}  // namespace

void OpenCLBackend::fill(int index, const detail::KernelOperand& out, std::int64_t numel, const Scalar& value) {
  on_device(*this, index, "fill", [&](Queue& q) { kernels::fill(q, out, numel, value); });
}

void OpenCLBackend::arange(int index, const detail::KernelOperand& out, std::int64_t numel, double start,
                           double step) {
  on_device(*this, index, "arange", [&](Queue& q) { kernels::arange(q, out, numel, start, step); });
}

void OpenCLBackend::copy(int index, const detail::ElementwiseArgs& a) {
  on_device(*this, index, "copy", [&](Queue& q) { kernels::copy(q, a); });
}

void OpenCLBackend::unary(int index, detail::UnaryOp op, const detail::UnaryParams& params,
                          const detail::ElementwiseArgs& a) {
  on_device(*this, index, detail::name(op), [&](Queue& q) { kernels::unary(q, op, params, a); });
}

void OpenCLBackend::binary(int index, detail::BinaryOp op, const detail::ElementwiseArgs& a) {
  on_device(*this, index, detail::name(op), [&](Queue& q) { kernels::binary(q, op, a); });
}

void OpenCLBackend::where(int index, const detail::ElementwiseArgs& a) {
  on_device(*this, index, "where", [&](Queue& q) { kernels::where(q, a); });
}

void OpenCLBackend::reduce(int index, detail::ReduceOp op, const detail::ReduceArgs& a) {
  on_device(*this, index, detail::name(op), [&](Queue& q) { kernels::reduce(q, op, a); });
}

void OpenCLBackend::index(int index, const detail::IndexArgs& a) {
  const char* op = a.op == detail::IndexOp::IndexSelect ? "index_select" : "gather";
  on_device(*this, index, op, [&](Queue& q) { kernels::index(q, a); });
}

void OpenCLBackend::random(int index, const detail::RandomArgs& a) {
  static constexpr const char* kNames[] = {"rand", "randn", "randint"};
  on_device(*this, index, kNames[static_cast<int>(a.kind)], [&](Queue& q) { kernels::random(q, a); });
}

void OpenCLBackend::gemm_tiled(DeviceState& s, const detail::GemmArgs& a) {
  Queue q(s);
  kernels::gemm_tiled(q, a);
}

// ---- the optional fused window kernels (f32, and f64 where the device has it) ----

bool OpenCLBackend::supports_fused(detail::FusedOp, DType t, int index) noexcept {
  return t == DType::F32 || (t == DType::F64 && supports("fused", t, index));
}

void OpenCLBackend::im2col(int index, const detail::Im2colArgs& a) {
  on_device(*this, index, "im2col", [&](Queue& q) { kernels::im2col(q, a); });
}

void OpenCLBackend::col2im(int index, const detail::Im2colArgs& a) {
  on_device(*this, index, "col2im", [&](Queue& q) { kernels::col2im(q, a); });
}

void OpenCLBackend::max_pool2d(int index, const detail::Pool2dArgs& a) {
  on_device(*this, index, "max_pool2d", [&](Queue& q) { kernels::max_pool2d(q, a); });
}

void OpenCLBackend::max_pool2d_backward(int index, const detail::Pool2dArgs& a) {
  on_device(*this, index, "max_pool2d_backward", [&](Queue& q) { kernels::max_pool2d_backward(q, a); });
}

}  // namespace anvil::opencl
