// One host side for every device backend (DESIGN §2 "One host side for
// device backends"). OpenCL and CUDA (and a later HIP or Level Zero) supply
// only a runtime R; DeviceBackend<R> implements the rest of detail::Backend
// once: discovery once, per-device state created on first use, the caching
// allocator, copies, synchronise-and-report, the index-error check,
// timestamps, capabilities and the forwarding of every primitive to the
// shared kernels of device_primitives.h.
//
//   class MyRuntime { ... };                      // see "What a runtime supplies"
//   template class device_common::DeviceBackend<MyRuntime>;  // in the backend's one .cpp
//   Backend* make_my_backend() { return &device_common::backend_instance<MyRuntime>(); }
//
// What a runtime supplies (R):
//   static constexpr DeviceType kType; static constexpr const char* kName;  // "opencl"
//   using Entry = ...;   // one discovered device; has `DeviceProperties props`
//   using Kernel = ...;  // a compiled kernel handle
//   class Queue;         // one device's in-order queue (below)
//   class Launch;        // Launch(Queue&, Kernel): .buffer .arg .scalar .run (device_primitives.h)
//   device_common::DeviceList<Entry> discover() noexcept;  // once; a reason when empty
//   static bool is_accelerator(const Entry&) noexcept;  // counts for gpu(i)
//   bool can_copy_direct(const std::vector<Entry>&, int dst, int src) noexcept;  // dst != src
// R::Queue, created on a device's first use as Queue(R&, index, entry, label),
// called with the device's lock held (see DeviceSlot::mutex):
//   void make_current();                        // before any other call (CUDA: cudaSetDevice)
//   detail::CachingAllocator::Raw raw_allocator();  // raw blocks for the caching allocator
//   bool copy_from_host(dst, dst_offset, src, bytes);  // true: still reads src, wait
//   void copy_to_host(dst, src, src_offset, bytes);     // waits
//   void copy_within(dst, dst_byte, src, src_byte, bytes, op);
//   static void copy_between(Queue& dst_q, dst, dst_offset, Queue& src_q, src, src_offset, bytes);
//   void zero(void* block, std::size_t bytes);
//   programs.kernel(request) -> Kernel;  // its program cache: compiled on first use
//   DeviceFault wait();     // wait for everything enqueued; the first failure
//   bool gemm_blas(const detail::GemmArgs&, CachingAllocator&);  // vendor BLAS (may empty
//                                       // the cache to make room); false: the tiled kernel runs
//   void* record_timestamp(); double elapsed_seconds(start, end, report);
//   static void release_timestamp(const Entry&, void*) noexcept;
//   static bool has_device_clock(const Entry&) noexcept;
//   void update_properties(DeviceProperties&);  // live values (free memory)
//   bool fp64(), is_cpu(); int compute_units(); size_t local_size(), max_work_group();
//
// Note [A template, not a virtual runtime]
// The runtime is a template argument, not an object behind virtual calls:
// device_primitives.h sets a kernel's arguments one call each, and through
// a virtual interface every argument of every launch would pay an indirect
// call. As a template the per-launch path is what each backend wrote by hand
// before, and the code still exists once: each backend instantiates it in
// one .cpp. Measured with anvil-opencl-bench launch (add_out of 16 f32 on
// PoCL, enqueue to return, 8 alternating runs on a loaded 2-core machine):
// best run 0.89 us before this base, 0.88-0.95 us after; median of the
// runs' best 1.25 vs 1.24 us.
#pragma once

#include <algorithm>
#include <atomic>
#include <concepts>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "anvil/error.h"
#include "backends/common/device_primitives.h"
#include "backends/common/device_slot.h"
#include "backends/common/env_flags.h"
#include "backends/common/op_scope.h"
#include "core/backend.h"
#include "core/caching_allocator.h"
#include "core/kernel_traffic.h"

namespace anvil::device_common {

// Whether a device with properties `p` runs a primitive in dtype `t`, and if
// not why (DESIGN §2 "Capabilities are asked once"). Every kernel family
// exists for every other dtype on every device, so today only f64 depends
// on the device; a capability that depends on the primitive goes here too.
inline detail::Support support_from(const DeviceProperties& p, detail::Primitive, DType t) noexcept {
  if (t == DType::F64 && !p.fp64) return {false, "the device has no fp64", DType::F32};
  return {};
}

// A runtime with a vendor library for convolution and batch norm (CUDA:
// cuDNN, runtime.h) supplies these static hooks; the others run the shared
// kernels (batch norm) and leave conv2d to the frontend's im2col path.
//   static bool conv2d_dnn_dtype(const Entry&, DType) noexcept;      // Conv2d family in this dtype?
//   static bool conv2d_dnn_takes(const Entry&, const Conv2dArgs&) noexcept;  // this geometry?
//   static void conv2d_dnn(DeviceSlot<R>&, FusedOp, const Conv2dArgs&);    // lock held
//   static bool batch_norm_dnn(DeviceSlot<R>&, const BatchNormArgs&, bool backward);  // false: norm.kern
template <class R>
concept DnnRuntime = requires(DeviceSlot<R>& s, const typename R::Entry& e, const detail::Conv2dArgs& c,
                              const detail::BatchNormArgs& b) {
  { R::conv2d_dnn_dtype(e, DType::F32) } -> std::same_as<bool>;
  { R::conv2d_dnn_takes(e, c) } -> std::same_as<bool>;
  R::conv2d_dnn(s, detail::FusedOp::Conv2d, c);
  { R::batch_norm_dnn(s, b, false) } -> std::same_as<bool>;
};

// A runtime with a vendor library for the recurrent layers (CUDA: cuDNN,
// cudnn_rnn.cpp; Note [Fused recurrent layers] in core/backend.h):
//   static bool rnn_dnn_takes(const Entry&, const RnnArgs&) noexcept;  // this shape and dtype?
//   static std::size_t rnn_dnn_reserve_bytes(DeviceSlot<R>&, const RnnArgs&);  // lock held
//   static void rnn_dnn_forward(DeviceSlot<R>&, const RnnArgs&);              // lock held
//   static void rnn_dnn_backward(DeviceSlot<R>&, const RnnArgs&);             // lock held
template <class R>
concept DnnRnnRuntime = requires(DeviceSlot<R>& s, const typename R::Entry& e, const detail::RnnArgs& a) {
  { R::rnn_dnn_takes(e, a) } -> std::same_as<bool>;
  { R::rnn_dnn_reserve_bytes(s, a) } -> std::same_as<std::size_t>;
  R::rnn_dnn_forward(s, a);
  R::rnn_dnn_backward(s, a);
};

template <class R>
class DeviceBackend final : public detail::Backend {
 public:
  using Entry = typename R::Entry;
  using Slot = DeviceSlot<R>;

  DeviceBackend() noexcept = default;

  DeviceType type() const noexcept override { return R::kType; }
  int device_count() noexcept override { return static_cast<int>(discovery().devices.size()); }
  std::string unavailable_reason() noexcept override {
    try {
      return discovery().reason;
    } catch (...) {
      return "out of memory";
    }
  }
  bool is_accelerator(int index) noexcept override { return exists(index) && R::is_accelerator(list_.devices[index]); }
  DeviceProperties properties(int index) override {
    if (!exists(index)) throw_no_device("properties", index);
    DeviceProperties p = list_.devices[index].props;
    // Live values need the device's state: only once anvil uses the device.
    if (slot_ready_[index].load(std::memory_order_acquire)) {
      Slot& s = *slots_[index];
      std::lock_guard lock(s.mutex);
      s.queue.make_current();
      s.queue.update_properties(p);
    }
    return p;
  }

  // ---- memory -----------------------------------------------------------------
  // A zero-byte tensor still gets a real (one-byte) block, so every storage
  // has a valid handle to pass to kernels.
  void* allocate(int index, std::size_t bytes) override {
    OpScope scope("allocate");
    return slot(index).allocator.allocate(bytes == 0 ? 1 : bytes);
  }
  void deallocate(int index, void* data, std::size_t bytes) noexcept override {
    if (data == nullptr || index < 0 || index >= static_cast<int>(slots_.size()) ||
        !slot_ready_[index].load(std::memory_order_acquire))
      return;
    slots_[index]->allocator.deallocate(data, bytes == 0 ? 1 : bytes);
  }
  MemoryStats memory_stats(int index) override { return slot(index).allocator.stats(); }
  void reset_peak_memory_stats(int index) override { slot(index).allocator.reset_peak(); }
  void empty_cache(int index) override {
    Slot& s = slot(index);
    std::lock_guard lock(s.mutex);
    s.queue.make_current();
    s.allocator.empty_cache();
  }
  void set_memory_limit(int index, std::uint64_t bytes) override { slot(index).allocator.set_limit(bytes); }

  // ---- movement ---------------------------------------------------------------
  void copy_from_host(int index, void* dst, std::size_t dst_offset, const void* src, std::size_t bytes) override {
    OpScope scope("copy_from_host");
    if (bytes == 0) return;
    Slot& s = slot(index);
    std::lock_guard lock(s.mutex);
    s.queue.make_current();
    const bool reads_src_later = s.queue.copy_from_host(dst, dst_offset, src, bytes);
    s.enqueued_locked("copy_from_host");
    if (reads_src_later) s.finish_locked();  // the caller's buffer may die on return
  }
  void copy_to_host(int index, void* dst, const void* src, std::size_t src_offset, std::size_t bytes) override {
    OpScope scope("copy_to_host");
    Slot& s = slot(index);
    std::lock_guard lock(s.mutex);
    s.queue.make_current();
    s.finish_locked();  // report earlier failures before reading what they wrote
    if (bytes == 0) return;
    s.queue.copy_to_host(dst, src, src_offset, bytes);
  }
  bool can_copy_direct(int dst_index, int src_index) noexcept override {
    if (!exists(dst_index) || !exists(src_index)) return false;
    return dst_index == src_index || runtime_.can_copy_direct(list_.devices, dst_index, src_index);
  }
  void copy_device(int dst_index, void* dst, std::size_t dst_offset, int src_index, const void* src,
                   std::size_t src_offset, std::size_t bytes) override {
    OpScope scope("copy_device");
    if (bytes == 0) return;
    ANVIL_ASSERT(can_copy_direct(dst_index, src_index), "copy_device from ", R::kName, ":", src_index, " to ", R::kName,
                 ":", dst_index, ", which cannot copy directly");
    Slot& d = slot(dst_index);
    if (dst_index == src_index) {
      std::lock_guard lock(d.mutex);
      d.queue.make_current();
      d.work.launch();
      d.work.traffic(bytes, bytes);
      d.queue.copy_within(dst, dst_offset, src, src_offset, bytes, "copy_device");
      d.enqueued_locked("copy_device");
      return;
    }
    // The copy runs after everything queued on the source so far, and the
    // source waits for it before it runs anything else (which may reuse the
    // block): the runtime orders the two queues.
    Slot& s = slot(src_index);
    std::scoped_lock lock(d.mutex, s.mutex);
    R::Queue::copy_between(d.queue, dst, dst_offset, s.queue, src, src_offset, bytes);
    d.enqueued_locked("copy_device");
    s.enqueued_locked("copy_device");
  }

  // ---- execution and timestamps (Note [Device clocks], core/timer.cpp) -------
  void synchronize(int index) override {
    OpScope scope("synchronize");
    Slot& s = slot(index);
    std::lock_guard lock(s.mutex);
    s.queue.make_current();
    s.finish_locked();
  }
  // For a library that enqueues on the device's own queue (NCCL in src/distributed):
  // a runtime whose Queue has native_stream() gives it, with the device made
  // the calling thread's current one.
  void* native_stream(int index) noexcept override {
    if constexpr (requires(typename R::Queue & q) { q.native_stream(); }) {
      try {
        Slot& s = slot(index);
        std::lock_guard lock(s.mutex);
        s.queue.make_current();
        return s.queue.native_stream();
      } catch (...) {
        return nullptr;
      }
    } else {
      (void)index;
      return nullptr;
    }
  }
  bool has_device_clock(int index) noexcept override {
    return exists(index) && R::Queue::has_device_clock(list_.devices[index]);
  }
  void* record_timestamp(int index) override {
    OpScope scope("record_timestamp");
    Slot& s = slot(index);
    std::lock_guard lock(s.mutex);
    s.queue.make_current();
    return s.queue.record_timestamp();
  }
  // Waits without the device's lock (other threads keep enqueueing); a
  // device fault before a stamp is reported as a sync reports it.
  double timestamp_elapsed(int index, void* start, void* end) override {
    OpScope scope("timestamp_elapsed");
    Slot& s = slot(index);
    return s.queue.elapsed_seconds(start, end, [&s] {
      std::lock_guard lock(s.mutex);
      s.queue.make_current();
      s.finish_locked();
    });
  }
  void release_timestamp(int index, void* stamp) noexcept override {
    if (stamp != nullptr && exists(index)) R::Queue::release_timestamp(list_.devices[index], stamp);
  }

  // ---- capabilities and primitives ---------------------------------------------
  detail::Support supports(int index, detail::Primitive p, DType t) noexcept override {
    if (!exists(index)) return {false, "the device does not exist", t};
    return support_from(list_.devices[index].props, p, t);
  }
  void fill(int index, const detail::KernelOperand& out, std::int64_t numel, const Scalar& value) override {
    run(index, "fill", {0, detail::dense_bytes(out, numel)},
        [&](Slot& s) { device_common::fill(s, out, numel, value); });
  }
  void arange(int index, const detail::KernelOperand& out, std::int64_t numel, double start, double step) override {
    run(index, "arange", {0, detail::dense_bytes(out, numel)},
        [&](Slot& s) { device_common::arange(s, out, numel, start, step); });
  }
  void copy(int index, const detail::ElementwiseArgs& a) override {
    run(index, "copy", detail::traffic(a), [&](Slot& s) { device_common::copy(s, a); });
  }
  void unary(int index, detail::UnaryOp op, const detail::UnaryParams& params,
             const detail::ElementwiseArgs& a) override {
    run(index, detail::name(op), detail::traffic(a), [&](Slot& s) { device_common::unary(s, op, params, a); });
  }
  void binary(int index, detail::BinaryOp op, const detail::ElementwiseArgs& a) override {
    run(index, detail::name(op), detail::traffic(a), [&](Slot& s) { device_common::binary(s, op, a); });
  }
  void where(int index, const detail::ElementwiseArgs& a) override {
    run(index, "where", detail::traffic(a), [&](Slot& s) { device_common::where(s, a); });
  }
  void reduce(int index, detail::ReduceOp op, const detail::ReduceArgs& a) override {
    run(index, detail::name(op), detail::traffic(a), [&](Slot& s) { device_common::reduce(s, op, a); });
  }
  // The runtime's BLAS where it takes the operands (f32/f64, and f16/bf16
  // with f32 compute on cuBLAS); the tiled kernel (src/kernels/gemm.kern,
  // f32 accumulation for the 16-bit floats) for the rest.
  void gemm(int index, const detail::GemmArgs& a) override {
    // supports_fused says no to FusedOp::GemmTwoLevelBatch: the frontend copies.
    ANVIL_ASSERT(!detail::is_two_level(a), "matmul: a two-level batch on ", R::kName);
    run(index, "matmul", detail::traffic(a), [&](Slot& s) {
      if (a.m <= 0 || a.n <= 0 || a.batch <= 0) return;
      // f16 and bf16: cuBLAS's GemmEx, or (OpenCL) the tiled kernel, both
      // accumulating in f32.
      if (is_floating(a.dtype) && a.k > 0 && s.queue.gemm_blas(a, s.allocator)) {
        s.work.launch();
        return;
      }
      device_common::gemm_tiled(s, a);
    });
  }
  void index(int index, const detail::IndexArgs& a) override {
    run(index, detail::name(a.op), detail::traffic(a), [&](Slot& s) { device_common::index(s, a); });
  }
  void random(int index, const detail::RandomArgs& a) override {
    run(index, detail::random_name(a.kind), {0, detail::dense_bytes(a.out, a.numel)},
        [&](Slot& s) { device_common::random(s, a); });
  }

  void scan(int index, const detail::ScanArgs& a) override {
    run(index, "cumsum", detail::traffic(a), [&](Slot& s) { device_common::scan(s, a); });
  }
  void argsort(int index, const detail::SortArgs& a) override {
    run(index, "sort", detail::traffic(a), [&](Slot& s) { device_common::argsort(s, a); });
  }

  // The fused window kernels, interpolate, unary-into-binary and batch norm
  // (the 16-bit floats with f32 per-channel operands), for the floating
  // dtypes the device has.
  bool supports_fused(detail::FusedOp op, DType t, int index) noexcept override {
    using detail::FusedOp;
    if (op == FusedOp::Conv2d || op == FusedOp::Conv2dBackwardData || op == FusedOp::Conv2dBackwardWeight) {
      if constexpr (DnnRuntime<R>)
        return exists(index) && R::conv2d_dnn_dtype(list_.devices[index], t) &&
               supports(index, detail::Primitive::Fused, t).ok;
      return false;
    }
    const bool takes = (detail::is_window_kernel(op) || op == FusedOp::UnaryBinary || op == FusedOp::Interpolate ||
                        op == FusedOp::InterpolateBackward || op == FusedOp::BatchNorm ||
                        op == FusedOp::BatchNormBackward || op == FusedOp::Softmax || op == FusedOp::SoftmaxBackward) &&
                       is_floating(t);
    const bool layer_norm =
        (op == FusedOp::LayerNorm || op == FusedOp::LayerNormBackward) && (t == DType::F32 || t == DType::F64);
    return (takes || layer_norm) && supports(index, detail::Primitive::Fused, t).ok;
  }
  // The Conv2d family where the runtime has a vendor library that takes the
  // convolution (DnnRuntime); the frontend's im2col path otherwise.
  bool supports_fused_conv2d(int index, const detail::Conv2dArgs& shape) noexcept override {
    if constexpr (DnnRuntime<R>)
      return exists(index) && R::conv2d_dnn_takes(list_.devices[index], shape);
    else
      return Backend::supports_fused_conv2d(index, shape);
  }
  void conv2d(int index, const detail::Conv2dArgs& a) override { conv2d_family(index, detail::FusedOp::Conv2d, a); }
  void conv2d_backward_data(int index, const detail::Conv2dArgs& a) override {
    conv2d_family(index, detail::FusedOp::Conv2dBackwardData, a);
  }
  void conv2d_backward_weight(int index, const detail::Conv2dArgs& a) override {
    conv2d_family(index, detail::FusedOp::Conv2dBackwardWeight, a);
  }
  void unary_binary(int index, detail::BinaryOp op, const detail::BinaryPrologue& prologue,
                    const detail::ElementwiseArgs& a) override {
    run(index, detail::name(op), detail::traffic(a), [&](Slot& s) { device_common::binary(s, op, a, prologue); });
  }
  void im2col(int index, const detail::Im2colArgs& a) override {
    run(index, "im2col", detail::traffic(a, false), [&](Slot& s) { device_common::im2col(s, a); });
  }
  void col2im(int index, const detail::Im2colArgs& a) override {
    run(index, "col2im", detail::traffic(a, true), [&](Slot& s) { device_common::col2im(s, a); });
  }
  void max_pool2d(int index, const detail::Pool2dArgs& a) override {
    run(index, "max_pool2d", detail::traffic(a, false), [&](Slot& s) { device_common::max_pool2d(s, a); });
  }
  void max_pool2d_backward(int index, const detail::Pool2dArgs& a) override {
    run(index, "max_pool2d_backward", detail::traffic(a, true),
        [&](Slot& s) { device_common::max_pool2d_backward(s, a); });
  }
  void interpolate(int index, const detail::InterpolateArgs& a) override {
    run(index, "interpolate", detail::traffic(a, false), [&](Slot& s) { device_common::interpolate(s, a, false); });
  }
  void interpolate_backward(int index, const detail::InterpolateArgs& a) override {
    run(index, "interpolate_backward", detail::traffic(a, true),
        [&](Slot& s) { device_common::interpolate(s, a, true); });
  }
  void softmax(int index, const detail::SoftmaxArgs& a) override {
    run(index, "softmax", detail::traffic(a, false), [&](Slot& s) { device_common::softmax(s, a, false); });
  }
  void softmax_backward(int index, const detail::SoftmaxArgs& a) override {
    run(index, "softmax_backward", detail::traffic(a, true), [&](Slot& s) { device_common::softmax(s, a, true); });
  }
  void layer_norm(int index, const detail::LayerNormArgs& a) override {
    run(index, "layer_norm", detail::traffic(a, false), [&](Slot& s) { device_common::layer_norm(s, a); });
  }
  void layer_norm_backward(int index, const detail::LayerNormArgs& a) override {
    run(index, "layer_norm_backward", detail::traffic(a, true),
        [&](Slot& s) { device_common::layer_norm_backward(s, a); });
  }
  void batch_norm(int index, const detail::BatchNormArgs& a) override {
    run(index, "batch_norm", detail::traffic(a, false), [&](Slot& s) {
      if constexpr (DnnRuntime<R>)
        if (R::batch_norm_dnn(s, a, false)) return s.work.launch();
      device_common::batch_norm(s, a);
    });
  }
  void batch_norm_backward(int index, const detail::BatchNormArgs& a) override {
    run(index, "batch_norm_backward", detail::traffic(a, true), [&](Slot& s) {
      if constexpr (DnnRuntime<R>)
        if (R::batch_norm_dnn(s, a, true)) return s.work.launch();
      device_common::batch_norm_backward(s, a);
    });
  }

  // The recurrent layers where the runtime's vendor library takes them
  // (DnnRnnRuntime); the frontend's per-step composite otherwise.
  bool supports_fused_rnn(int index, const detail::RnnArgs& shape) noexcept override {
    if constexpr (DnnRnnRuntime<R>)
      return exists(index) && R::rnn_dnn_takes(list_.devices[index], shape) &&
             supports(index, detail::Primitive::Fused, shape.dtype).ok;
    else
      return Backend::supports_fused_rnn(index, shape);
  }
  std::size_t rnn_reserve_bytes(int index, const detail::RnnArgs& a) override {
    if constexpr (DnnRnnRuntime<R>) {
      OpScope scope(detail::name(a.mode));
      Slot& s = slot(index);
      std::lock_guard lock(s.mutex);
      s.queue.make_current();
      return R::rnn_dnn_reserve_bytes(s, a);
    } else {
      return Backend::rnn_reserve_bytes(index, a);
    }
  }
  void rnn_forward(int index, const detail::RnnArgs& a) override {
    if constexpr (DnnRnnRuntime<R>)
      run(index, detail::name(a.mode), {}, [&](Slot& s) {
        s.work.launch();
        R::rnn_dnn_forward(s, a);
      });
    else
      Backend::rnn_forward(index, a);
  }
  void rnn_backward(int index, const detail::RnnArgs& a) override {
    if constexpr (DnnRnnRuntime<R>)
      run(index, "rnn_backward", {}, [&](Slot& s) {
        s.work.launch();
        R::rnn_dnn_backward(s, a);
      });
    else
      Backend::rnn_backward(index, a);
  }

  // The fused optimiser steps, f32 and f64 (where the device has it).
  bool supports_optimizer_step(detail::OptimizerKind, DType t, int index) noexcept override {
    return (t == DType::F32 || t == DType::F64) && supports(index, detail::Primitive::Fused, t).ok;
  }
  void optimizer_step(int index, const detail::OptimizerStepArgs& a) override {
    run(index, detail::name(a.kind), detail::traffic(a), [&](Slot& s) { device_common::optimizer_step(s, a); });
  }
  bool supports_optimizer_step_list(detail::OptimizerKind k, DType t, int index) noexcept override {
    return supports_optimizer_step(k, t, index);
  }
  void optimizer_step_list(int index, const detail::OptimizerStepListArgs& a) override {
    run(index, detail::name(a.step.kind), detail::traffic(a),
        [&](Slot& s) { device_common::optimizer_step_list(s, a); });
  }

  // The device's state, created on first use. Throws DeviceError naming the
  // running op when the device does not exist.
  Slot& slot(int index) {
    if (!exists(index)) [[unlikely]]
      throw_no_device(current_op_or(R::kName), index);
    if (slot_ready_[index].load(std::memory_order_acquire)) [[likely]]
      return *slots_[index];
    std::call_once(slot_once_[index], [&] {
      slots_[index] = std::make_unique<Slot>(runtime_, index, list_.devices[index]);
      slot_ready_[index].store(true, std::memory_order_release);
    });
    return *slots_[index];
  }

 private:
  // The flags are read first because libstdc++'s call_once goes through
  // thread-local storage even once done, and every op asks for its slot.
  const DeviceList<Entry>& discovery() noexcept {
    if (discovery_done_.load(std::memory_order_acquire)) [[likely]]
      return list_;
    std::call_once(discovered_, [this] {
      list_ = runtime_.discover();
      const std::size_t n = list_.devices.size();
      slot_once_ = std::make_unique<std::once_flag[]>(n);
      slot_ready_ = std::make_unique<std::atomic<bool>[]>(n);
      slots_.resize(n);
    });
    discovery_done_.store(true, std::memory_order_release);
    return list_;
  }
  bool exists(int index) noexcept { return index >= 0 && index < static_cast<int>(discovery().devices.size()); }
  void conv2d_family(int index, detail::FusedOp which, const detail::Conv2dArgs& a) {
    if constexpr (DnnRuntime<R>)
      run(index, detail::name(which), detail::traffic(a, which), [&](Slot& s) {
        s.work.launch();
        R::conv2d_dnn(s, which, a);
      });
    else if (which == detail::FusedOp::Conv2d)
      Backend::conv2d(index, a);
    else if (which == detail::FusedOp::Conv2dBackwardData)
      Backend::conv2d_backward_data(index, a);
    else
      Backend::conv2d_backward_weight(index, a);
  }
  [[noreturn]] void throw_no_device(const char* op, int index) {
    const DeviceList<Entry>& d = discovery();
    throw DeviceError(detail::cat(op, ": device ", R::kName, ":", index, " does not exist; expected an index below ",
                                  d.devices.size(), ", got ", index,
                                  d.devices.empty() ? " (" + d.reason + ")" : std::string()));
  }
  // Runs `body(slot)` as primitive `op` on device `index` with its lock held;
  // the ledger counts `traffic` (the launches count themselves).
  template <class Body>
  void run(int index, const char* op, detail::Traffic traffic, Body&& body) {
    OpScope scope(op);
    Slot& s = slot(index);
    s.work.traffic(traffic.read, traffic.written);
    std::lock_guard lock(s.mutex);
    s.queue.make_current();
    body(s);
    s.enqueued_locked(op);
  }

  R runtime_;
  std::once_flag discovered_;
  std::atomic<bool> discovery_done_{false};
  DeviceList<Entry> list_;
  std::unique_ptr<std::once_flag[]> slot_once_;
  std::unique_ptr<std::atomic<bool>[]> slot_ready_;  // slots_[i] may be read without the once_flag
  std::vector<std::unique_ptr<Slot>> slots_;
};

// The backend over runtime R: a process-lifetime singleton whose construction
// never throws. Leaked on purpose: tensors with static storage duration may
// be freed after any destructor of ours would run, and the driver may
// already be unloaded at exit.
template <class R>
DeviceBackend<R>& backend_instance() {
  static DeviceBackend<R>* instance = new DeviceBackend<R>();
  return *instance;
}

}  // namespace anvil::device_common
