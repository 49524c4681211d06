// The CUDA runtime under the shared device backend (DESIGN §2, see
// backends/common/device_backend.h): discovery, peer access, and per device
// an in-order stream with its kernels compiled by NVRTC, cuBLAS handle and
// pinned staging buffers.
//
// Note [Asynchronous CUDA execution]
// Each cuda:N has one stream, created non-blocking so it never waits on the
// legacy default stream. Every primitive and copy is enqueued without
// waiting and returns; the host waits only in copy_to_host, synchronize,
// timestamp_elapsed and (with ANVIL_SYNC=1) after every op. A launch error
// (bad configuration) is raised by the launch itself; an error the device
// raises while running surfaces at the next wait, naming the ops enqueued
// since the previous one (ANVIL_SYNC=1 pins it to the op). Memory freed while
// a queued kernel still uses it is safe: a block is only handed out again on
// the same device, so its next user is queued behind every earlier user on
// the same stream; cross-device copies make the source stream wait for the
// copy (Queue::copy_between).
#pragma once

#include <cublas_v2.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "anvil/device.h"
#include "backends/common/device_backend.h"
#include "backends/common/env_flags.h"
#include "backends/common/kernel_specs.h"
#include "backends/cuda/cuda_api.h"
#include "backends/cuda/cudnn_api.h"
#include "backends/cuda/program_cache.h"
#include "core/caching_allocator.h"

namespace anvil::cuda {

struct DeviceEntry {
  DeviceProperties props;
  int ordinal = 0;           // the runtime's device number (cudaSetDevice)
  int major = 0, minor = 0;  // compute capability
  int max_threads_per_block = 1024;
};

using device_common::env_flag;

// Makes runtime device `ordinal` the calling thread's current device. anvil
// leaves it set (as PyTorch does); code of your own that uses the CUDA
// runtime on the same thread should set its device itself.
void set_device(int ordinal, const std::string& label);

class Launch;
class Queue;
class Runtime;
using Slot = device_common::DeviceSlot<Runtime>;

// What the shared backend needs of CUDA as a whole.
class Runtime {
 public:
  static constexpr DeviceType kType = DeviceType::CUDA;
  static constexpr const char* kName = "cuda";
  using Entry = DeviceEntry;
  using Queue = cuda::Queue;
  using Kernel = cudaKernel_t;
  using Launch = cuda::Launch;  // launch.h

  // cudaGetDeviceCount and the properties of each device (the runtime
  // honours CUDA_VISIBLE_DEVICES). A GPU older than this NVRTC can compile
  // for is left out (named in `reason`), so try_gpu() does not pick a device
  // whose first kernel would fail. Never throws: no driver is a reason, not
  // a crash.
  device_common::DeviceList<DeviceEntry> discover() noexcept;
  static bool is_accelerator(const DeviceEntry&) noexcept { return true; }
  // Peer access where the driver allows it (NVLink or PCIe P2P), enabled in
  // both directions on first ask; the frontend goes through the host otherwise.
  bool can_copy_direct(const std::vector<DeviceEntry>& devices, int dst, int src) noexcept;

  // The vendor-library hooks of the shared backend (device_backend.h,
  // DnnRuntime): cuDNN for the Conv2d family (cudnn_conv.cpp) and batch norm
  // (cudnn_norm.cpp). conv2d_dnn_takes says whether a convolution goes to
  // cuDNN (the frontend runs im2col otherwise); batch_norm_dnn returns false
  // where norm.kern runs instead.
  static bool conv2d_dnn_dtype(const DeviceEntry& e, DType t) noexcept;
  static bool conv2d_dnn_takes(const DeviceEntry& e, const detail::Conv2dArgs& shape) noexcept;
  static void conv2d_dnn(Slot& s, detail::FusedOp which, const detail::Conv2dArgs& a);
  static bool batch_norm_dnn(Slot& s, const detail::BatchNormArgs& a, bool backward);
  // The recurrent layers through cuDNN's RNN API (cudnn_rnn.cpp, Note
  // [cuDNN's recurrent layers]; DnnRnnRuntime in device_backend.h).
  static bool rnn_dnn_takes(const DeviceEntry& e, const detail::RnnArgs& shape) noexcept;
  static std::size_t rnn_dnn_reserve_bytes(Slot& s, const detail::RnnArgs& a);
  static void rnn_dnn_forward(Slot& s, const detail::RnnArgs& a);
  static void rnn_dnn_backward(Slot& s, const detail::RnnArgs& a);

 private:
  std::mutex peer_mutex_;
  std::vector<signed char> peer_;  // [dst * n + src]: -1 unknown, 0 no, 1 enabled
};

// One device's stream. Every member is called with the device's lock held
// (device_common::DeviceSlot::mutex) after make_current().
class Queue {
 public:
  Queue(Runtime& runtime, int index, const DeviceEntry& entry, const std::string& label);
  ~Queue();
  Queue(const Queue&) = delete;
  Queue& operator=(const Queue&) = delete;

  const std::string& label() const noexcept { return label_; }  // "cuda:0"
  const DeviceEntry& entry() const noexcept { return entry_; }
  // Makes this the calling thread's current device (every runtime call
  // below needs it).
  void make_current() const { set_device(entry_.ordinal, label_); }
  bool fp64() const noexcept { return true; }
  bool is_cpu() const noexcept { return false; }
  int compute_units() const noexcept { return entry_.props.compute_units; }
  std::size_t local_size() const noexcept { return 256; }
  std::size_t max_work_group() const noexcept { return static_cast<std::size_t>(entry_.max_threads_per_block); }
  // A device pointer's own alignment: cudaMalloc's blocks are 256-aligned,
  // but a tensor adopted through DLPack may start anywhere.
  static std::size_t base_alignment(const void* p) noexcept {
    const auto a = reinterpret_cast<std::uintptr_t>(p);
    return a == 0 ? 256 : static_cast<std::size_t>(a & (~a + 1));
  }
  // Free memory (cudaMemGetInfo).
  void update_properties(DeviceProperties& p) const noexcept;

  // cudaMalloc/cudaFree; a cached block is freed only after the device is idle.
  detail::CachingAllocator::Raw raw_allocator() const;
  // Through a pinned staging block, so the copy is truly asynchronous and the
  // caller's buffer may die on return; when the staging pool is full (a very
  // large copy) it returns true: the copy still reads `src`, wait for it.
  bool copy_from_host(void* dst, std::size_t dst_offset, const void* src, std::size_t bytes);
  void copy_to_host(void* dst, const void* src, std::size_t src_offset, std::size_t bytes);
  void copy_within(void* dst, std::size_t dst_byte, const void* src, std::size_t src_byte, std::size_t bytes,
                   const char* op);
  static void copy_between(Queue& dst_q, void* dst, std::size_t dst_offset, Queue& src_q, const void* src,
                           std::size_t src_offset, std::size_t bytes);
  void zero(void* block, std::size_t bytes);

  // cuBLAS for f32/f64 when the operands are BLAS-shaped (cublas.cpp).
  bool gemm_blas(const detail::GemmArgs& a, detail::CachingAllocator& allocator);

  // Waits for the stream; the error it reports, if any.
  device_common::DeviceFault wait();

  // Timestamps on the GPU's clock (cudaEventElapsedTime).
  static bool has_device_clock(const DeviceEntry&) noexcept { return true; }
  void* record_timestamp();
  double elapsed_seconds(void* start, void* end, const std::function<void()>& report_device_fault);
  static void release_timestamp(const DeviceEntry& e, void* stamp) noexcept;

  // cuDNN on this stream (cudnn_api.h), created on first use (after emptying
  // `allocator`'s cache if cuDNN finds no memory). Only where
  // cudnn_if_enabled() is not null.
  cudnnHandle_t dnn(const CudnnApi& api, detail::CachingAllocator& allocator);
  // State of the cuDNN paths kept per device, each created by its own file
  // on first use: descriptors and algorithms by geometry (cudnn_conv.cpp),
  // and the recurrent layers' (cudnn_rnn.cpp). Destroyed with the queue.
  std::shared_ptr<void> dnn_conv_state, dnn_rnn_state;

  // The stream, for NCCL (DeviceBackend::native_stream).
  void* native_stream() const noexcept { return stream; }
  cudaStream_t stream = nullptr;
  ProgramCache programs;

 private:
  struct Staging {
    void* data;
    std::size_t bytes;
    cudaEvent_t done;  // recorded after the copy that reads it
    bool busy;
  };
  // Pinned host memory for a host->device copy of `bytes`, reusable once the
  // copy enqueued after it has completed (see release_staging). Null when
  // the pool is full.
  void* acquire_staging(std::size_t bytes);
  // Marks `p` busy until the work enqueued so far on the stream completes.
  void release_staging(void* p);
  // cuBLAS on this device's stream, created on first use (after emptying
  // `allocator`'s cache if cuBLAS finds no memory).
  cublasHandle_t blas(detail::CachingAllocator& allocator);

  const std::string& label_;
  DeviceEntry entry_;
  cublasHandle_t blas_ = nullptr;
  bool blas_tf32_ = false;  // the math mode set on blas_ (set_float32_matmul_precision)
  cudnnHandle_t dnn_ = nullptr;
  std::vector<Staging> staging_;
  std::size_t staging_bytes_ = 0;
};

}  // namespace anvil::cuda

namespace anvil {
extern template class device_common::DeviceBackend<cuda::Runtime>;  // cuda_backend.cpp
}  // namespace anvil

namespace anvil::cuda {
// The CUDA backend: the shared device backend over this runtime.
inline device_common::DeviceBackend<Runtime>& backend() { return device_common::backend_instance<Runtime>(); }
}  // namespace anvil::cuda
