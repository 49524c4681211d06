// Discovery of CUDA devices and the state anvil keeps per device: its
// in-order stream, caching allocator, kernels compiled by NVRTC, cuBLAS
// handle and pinned staging buffers.
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
// copy (CudaBackend::copy_device).
#pragma once

#include <cublas_v2.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "anvil/device.h"
#include "backends/common/env_flags.h"
#include "backends/common/kernel_specs.h"
#include "backends/cuda/cuda_api.h"
#include "core/caching_allocator.h"

namespace anvil::cuda {

struct DeviceEntry {
  DeviceProperties props;
  int ordinal = 0;           // the runtime's device number (cudaSetDevice)
  int major = 0, minor = 0;  // compute capability
  int max_threads_per_block = 1024;
};

struct Discovery {
  std::vector<DeviceEntry> devices;
  std::string reason;  // why `devices` is empty
};

// cudaGetDeviceCount and the properties of each device (the runtime honours
// CUDA_VISIBLE_DEVICES). A GPU older than this NVRTC can compile for is
// left out (named in `reason`), so try_gpu() does not pick a device whose
// first kernel would fail. Never throws: no driver is a reason, not a crash.
Discovery discover() noexcept;

using kernels::env_flag;

// Makes runtime device `ordinal` the calling thread's current device. anvil
// leaves it set (as PyTorch does); code of your own that uses the CUDA
// runtime on the same thread should set its device itself.
void set_device(int ordinal, const std::string& label);

// Kernels of src/kernels compiled for one device (NVRTC, then
// cudaLibraryLoadData), looked up by request (Note [Kernel cache keys]).
class ProgramCache {
 public:
  ProgramCache(std::string label, int major, int minor) : label_(std::move(label)), major_(major), minor_(minor) {}
  ~ProgramCache();
  ProgramCache(const ProgramCache&) = delete;
  ProgramCache& operator=(const ProgramCache&) = delete;

  template <typename Request>
  cudaKernel_t kernel(const Request& request) {
    const std::uint64_t key = request.key();
    auto it = kernels_.find(key);
    if (it != kernels_.end()) [[likely]] return it->second;
    return build(key, request.spec());
  }

 private:
  cudaKernel_t build(std::uint64_t key, const kernels::KernelSpec& spec);

  std::string label_;
  int major_, minor_;
  std::unordered_map<std::string, cudaLibrary_t> programs_;
  std::unordered_map<std::uint64_t, cudaKernel_t> kernels_;
};

class DeviceState {
 public:
  DeviceState(int index, const DeviceEntry& entry);
  ~DeviceState();
  DeviceState(const DeviceState&) = delete;
  DeviceState& operator=(const DeviceState&) = delete;

  int index() const noexcept { return index_; }
  const std::string& label() const noexcept { return label_; }  // "cuda:0"
  const DeviceEntry& entry() const noexcept { return entry_; }
  // Makes this the calling thread's current device (every runtime call
  // below needs it).
  void make_current() const { set_device(entry_.ordinal, label_); }

  // Held while enqueueing and while touching the bookkeeping below.
  std::mutex mutex;
  cudaStream_t stream = nullptr;
  ProgramCache programs;
  detail::CachingAllocator allocator;

  // cuBLAS on this device's stream, created on first use. Lock held.
  cublasHandle_t blas_locked();

  // Notes that `op` was enqueued (lock held); with ANVIL_SYNC=1 waits for it.
  void track_locked(const char* op);
  // Waits for the stream, then reports a device error (BackendError naming
  // the ops since the last wait) or an out-of-range index seen by an index
  // kernel (IndexError). Lock held.
  void finish_locked();
  // The device buffer index kernels flag out-of-range indices in ({flag,
  // index} as two i64), and a note that op `op` used it. Lock held.
  void* index_error_buffer_locked(const char* op, std::int64_t dim_size);

  // Pinned host memory for a host->device copy of `bytes`, reusable once the
  // copy enqueued after it has completed (see release_staging_locked). Null
  // when the pool is full: the caller copies synchronously.
  void* acquire_staging_locked(std::size_t bytes);
  // Marks `p` busy until the work enqueued so far on the stream completes.
  void release_staging_locked(void* p);

 private:
  struct Staging {
    void* data;
    std::size_t bytes;
    cudaEvent_t done;  // recorded after the copy that reads it
    bool busy;
  };

  int index_;
  std::string label_;
  DeviceEntry entry_;
  bool sync_every_op_ = false;
  cublasHandle_t blas_ = nullptr;
  std::vector<std::string> recent_ops_;  // since the last wait, for error messages
  std::uint64_t ops_since_wait_ = 0;
  void* index_error_ = nullptr;
  struct IndexUse {
    const char* op;
    std::int64_t dim_size;
  };
  std::vector<IndexUse> index_uses_;
  std::vector<Staging> staging_;
  std::size_t staging_bytes_ = 0;
};

}  // namespace anvil::cuda
