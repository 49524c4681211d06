// Enumeration, memory, movement, synchronisation and timestamps of the CUDA
// backend; the primitives are in primitives.cpp.
#include "backends/cuda/cuda_backend.h"

#include <cstring>

#include "anvil/error.h"

namespace anvil::detail {
Backend* make_cuda_backend() { return &cuda::backend(); }
}  // namespace anvil::detail

namespace anvil::cuda {

CudaBackend& backend() {
  // Leaked on purpose, like the OpenCL backend: tensors with static storage
  // duration may be freed after our destructors, and the driver may be gone.
  static CudaBackend* instance = new CudaBackend();
  return *instance;
}

const Discovery& CudaBackend::discovery() noexcept {
  std::call_once(discovered_, [this] {
    discovery_ = discover();
    const std::size_t n = discovery_.devices.size();
    state_once_ = std::make_unique<std::once_flag[]>(n);
    state_ready_ = std::make_unique<std::atomic<bool>[]>(n);
    states_.resize(n);
    peer_.assign(n * n, -1);
  });
  return discovery_;
}

int CudaBackend::device_count() noexcept { return static_cast<int>(discovery().devices.size()); }

std::string CudaBackend::unavailable_reason() noexcept {
  try {
    return discovery().reason;
  } catch (...) {
    return "out of memory";
  }
}

DeviceProperties CudaBackend::properties(int index) {
  const Discovery& d = discovery();
  ANVIL_CHECK(index >= 0 && index < static_cast<int>(d.devices.size()), DeviceError, "properties: device cuda:",
              index, " does not exist; expected an index below ", d.devices.size(), ", got ", index,
              d.devices.empty() ? " (" + d.reason + ")" : std::string());
  DeviceProperties p = d.devices[index].props;
  // Free memory needs the device's context: only once anvil uses the device.
  if (state_ready_[index].load(std::memory_order_acquire)) {
    std::size_t free = 0, total = 0;
    std::lock_guard lock(states_[index]->mutex);
    states_[index]->make_current();
    if (cudaMemGetInfo(&free, &total) == cudaSuccess) p.memory_free = free;
    else cudaGetLastError();
  }
  return p;
}

DeviceState& CudaBackend::state(int index) {
  const Discovery& d = discovery();
  ANVIL_CHECK(index >= 0 && index < static_cast<int>(d.devices.size()), DeviceError, current_op(), ": device cuda:",
              index, " does not exist; expected an index below ", d.devices.size(), ", got ", index,
              d.devices.empty() ? " (" + d.reason + ")" : std::string());
  std::call_once(state_once_[index], [&] {
    states_[index] = std::make_unique<DeviceState>(index, d.devices[index]);
    state_ready_[index].store(true, std::memory_order_release);
  });
  return *states_[index];
}

// ---- memory -----------------------------------------------------------------------

// A zero-byte tensor still gets a real (one-byte) block, so every storage has
// a valid pointer to pass to kernels.
void* CudaBackend::allocate(int index, std::size_t bytes) {
  OpScope scope("allocate");
  return state(index).allocator.allocate(bytes == 0 ? 1 : bytes);
}

void CudaBackend::deallocate(int index, void* data, std::size_t bytes) noexcept {
  if (data == nullptr || index < 0 || index >= static_cast<int>(states_.size()) ||
      !state_ready_[index].load(std::memory_order_acquire))
    return;
  states_[index]->allocator.deallocate(data, bytes == 0 ? 1 : bytes);
}

MemoryStats CudaBackend::memory_stats(int index) { return state(index).allocator.stats(); }
void CudaBackend::reset_peak_memory_stats(int index) { state(index).allocator.reset_peak(); }
void CudaBackend::empty_cache(int index) {
  DeviceState& s = state(index);
  std::lock_guard lock(s.mutex);
  s.make_current();
  s.allocator.empty_cache();
}
void CudaBackend::set_memory_limit(int index, std::uint64_t bytes) { state(index).allocator.set_limit(bytes); }

// ---- movement ---------------------------------------------------------------------

namespace {
const std::byte* at(const void* p, std::size_t offset) { return static_cast<const std::byte*>(p) + offset; }
std::byte* at(void* p, std::size_t offset) { return static_cast<std::byte*>(p) + offset; }
}  // namespace

// Through a pinned staging block, so the copy is truly asynchronous and the
// caller's buffer may die on return; synchronous when the staging pool is
// full (a very large copy).
void CudaBackend::copy_from_host(int index, void* dst, std::size_t dst_offset, const void* src, std::size_t bytes) {
  OpScope scope("copy_from_host");
  if (bytes == 0) return;
  DeviceState& s = state(index);
  std::lock_guard lock(s.mutex);
  s.make_current();
  if (void* staging = s.acquire_staging_locked(bytes)) {
    std::memcpy(staging, src, bytes);
    ANVIL_CUDA_CHECK(s.label(),
                     cudaMemcpyAsync(at(dst, dst_offset), staging, bytes, cudaMemcpyHostToDevice, s.stream));
    s.release_staging_locked(staging);
    s.track_locked("copy_from_host");
    return;
  }
  ANVIL_CUDA_CHECK(s.label(), cudaMemcpyAsync(at(dst, dst_offset), src, bytes, cudaMemcpyHostToDevice, s.stream));
  s.track_locked("copy_from_host");
  s.finish_locked();
}

void CudaBackend::copy_to_host(int index, void* dst, const void* src, std::size_t src_offset, std::size_t bytes) {
  OpScope scope("copy_to_host");
  DeviceState& s = state(index);
  std::lock_guard lock(s.mutex);
  s.finish_locked();  // report earlier failures before reading what they wrote
  if (bytes == 0) return;
  ANVIL_CUDA_CHECK(s.label(), cudaMemcpyAsync(dst, at(src, src_offset), bytes, cudaMemcpyDeviceToHost, s.stream));
  ANVIL_CUDA_CHECK(s.label(), cudaStreamSynchronize(s.stream));
}

// Peer access where the driver allows it (NVLink or PCIe P2P); the frontend
// goes through the host otherwise.
bool CudaBackend::can_copy_direct(int dst_index, int src_index) noexcept {
  const int n = device_count();
  if (dst_index < 0 || src_index < 0 || dst_index >= n || src_index >= n) return false;
  if (dst_index == src_index) return true;
  std::lock_guard lock(peer_mutex_);
  signed char& p = peer_[static_cast<std::size_t>(dst_index * n + src_index)];
  if (p < 0) {
    const int dst = discovery_.devices[dst_index].ordinal, src = discovery_.devices[src_index].ordinal;
    int a = 0, b = 0;
    p = cudaDeviceCanAccessPeer(&a, dst, src) == cudaSuccess && cudaDeviceCanAccessPeer(&b, src, dst) == cudaSuccess &&
                a && b
            ? 1
            : 0;
    if (p == 1) {
      // Both directions, so either stream may run the copy.
      for (auto [from, to] : {std::pair{dst, src}, std::pair{src, dst}}) {
        if (cudaSetDevice(from) != cudaSuccess) p = 0;
        const cudaError_t e = cudaDeviceEnablePeerAccess(to, 0);
        if (e != cudaSuccess && e != cudaErrorPeerAccessAlreadyEnabled) p = 0;
      }
    }
    cudaGetLastError();
  }
  return p == 1;
}

void CudaBackend::copy_device(int dst_index, void* dst, std::size_t dst_offset, int src_index, const void* src,
                              std::size_t src_offset, std::size_t bytes) {
  OpScope scope("copy_device");
  if (bytes == 0) return;
  ANVIL_ASSERT(can_copy_direct(dst_index, src_index), "copy_device between cuda:", src_index, " and cuda:",
               dst_index, " without peer access");
  DeviceState& d = state(dst_index);
  if (dst_index == src_index) {
    std::lock_guard lock(d.mutex);
    d.make_current();
    ANVIL_CUDA_CHECK(d.label(),
                     cudaMemcpyAsync(at(dst, dst_offset), at(src, src_offset), bytes, cudaMemcpyDeviceToDevice, d.stream));
    d.track_locked("copy_device");
    return;
  }
  // The copy runs on the destination's stream after everything queued on the
  // source so far, and the source stream waits for the copy before it runs
  // anything else (which may reuse the block).
  DeviceState& s = state(src_index);
  std::scoped_lock lock(d.mutex, s.mutex);
  cudaEvent_t ready = nullptr, copied = nullptr;
  s.make_current();
  ANVIL_CUDA_CHECK(s.label(), cudaEventCreateWithFlags(&ready, cudaEventDisableTiming));
  ANVIL_CUDA_CHECK(s.label(), cudaEventRecord(ready, s.stream));
  d.make_current();
  ANVIL_CUDA_CHECK(d.label(), cudaEventCreateWithFlags(&copied, cudaEventDisableTiming));
  ANVIL_CUDA_CHECK(d.label(), cudaStreamWaitEvent(d.stream, ready, 0));
  ANVIL_CUDA_CHECK(d.label(), cudaMemcpyPeerAsync(at(dst, dst_offset), d.entry().ordinal, at(src, src_offset),
                                                  s.entry().ordinal, bytes, d.stream));
  ANVIL_CUDA_CHECK(d.label(), cudaEventRecord(copied, d.stream));
  d.track_locked("copy_device");
  s.make_current();
  ANVIL_CUDA_CHECK(s.label(), cudaStreamWaitEvent(s.stream, copied, 0));
  s.track_locked("copy_device");
  // Destroying an event that is still pending is allowed: the resources go
  // once it completes.
  cudaEventDestroy(ready);
  cudaEventDestroy(copied);
}

void CudaBackend::synchronize(int index) {
  OpScope scope("synchronize");
  DeviceState& s = state(index);
  std::lock_guard lock(s.mutex);
  s.finish_locked();
}

void* CudaBackend::native_stream(int index) noexcept {
  try {
    DeviceState& s = state(index);
    s.make_current();
    return s.stream;
  } catch (...) {
    return nullptr;
  }
}

bool CudaBackend::supports(const char*, DType, int index) noexcept {
  return index >= 0 && index < device_count();  // every dtype, f64 included
}

// ---- timestamps on the GPU's clock (cudaEventElapsedTime) ---------------------------

bool CudaBackend::has_device_clock(int index) noexcept { return index >= 0 && index < device_count(); }

void* CudaBackend::record_timestamp(int index) {
  OpScope scope("record_timestamp");
  DeviceState& s = state(index);
  std::lock_guard lock(s.mutex);
  s.make_current();
  cudaEvent_t e = nullptr;
  ANVIL_CUDA_CHECK(s.label(), cudaEventCreate(&e));
  const cudaError_t st = cudaEventRecord(e, s.stream);
  if (st != cudaSuccess) {
    cudaEventDestroy(e);
    throw_cuda_error(st, "cudaEventRecord(e, s.stream)", __FILE__, __LINE__, s.label());
  }
  return e;
}

// Waits for both events without holding the device's lock (other threads
// keep enqueueing); either may have been recorded first (the result is then
// negative). A device fault is reported as a sync reports it, naming the ops.
double CudaBackend::timestamp_elapsed(int index, void* start, void* end) {
  OpScope scope("timestamp_elapsed");
  DeviceState& s = state(index);
  s.make_current();
  const auto a = static_cast<cudaEvent_t>(start), b = static_cast<cudaEvent_t>(end);
  cudaError_t e = cudaEventSynchronize(a);
  if (e == cudaSuccess) e = cudaEventSynchronize(b);
  float ms = 0;
  if (e == cudaSuccess) e = cudaEventElapsedTime(&ms, a, b);
  if (e != cudaSuccess) {
    cudaGetLastError();
    std::lock_guard lock(s.mutex);
    s.finish_locked();  // throws when the device failed
    throw_cuda_error(e, "cudaEventElapsedTime(&ms, start, end)", __FILE__, __LINE__, s.label());
  }
  return static_cast<double>(ms) / 1e3;
}

void CudaBackend::release_timestamp(int index, void* stamp) noexcept {
  if (stamp == nullptr || index < 0 || index >= static_cast<int>(discovery_.devices.size())) return;
  cudaSetDevice(discovery_.devices[index].ordinal);
  cudaEventDestroy(static_cast<cudaEvent_t>(stamp));
}

}  // namespace anvil::cuda
