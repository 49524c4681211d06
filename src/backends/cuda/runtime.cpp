#include "backends/cuda/runtime.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "anvil/error.h"
#include "backends/cuda/nvrtc_compile.h"

namespace anvil::cuda {

void set_device(int ordinal, const std::string& label) {
  int current = -1;
  if (cudaGetDevice(&current) == cudaSuccess && current == ordinal) return;
  ANVIL_CUDA_CHECK(label, cudaSetDevice(ordinal));
}

namespace {

std::string version_text(int v) { return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10); }

std::string no_device_reason(cudaError_t e) {
  switch (e) {
    case cudaErrorInsufficientDriver:
      return "no usable NVIDIA driver (cudaErrorInsufficientDriver: the driver is missing or older than CUDA " + [] {
        int v = 0;
        cudaRuntimeGetVersion(&v);
        return version_text(v);
      }() + " needs)";
    case cudaErrorNoDevice:
      return "no CUDA-capable GPU is visible (cudaErrorNoDevice; check CUDA_VISIBLE_DEVICES)";
    default:
      return "the CUDA runtime failed to start: " + error_text(e);
  }
}

}  // namespace

device_common::DeviceList<DeviceEntry> Runtime::discover() noexcept {
  device_common::DeviceList<DeviceEntry> out;
  try {
    int count = 0;  // stays 0 when the call fails (it may not write it)
    const cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess) {
      cudaGetLastError();
      out.reason = no_device_reason(e);
      return out;
    }
    if (count <= 0) {
      out.reason = "no CUDA-capable GPU is visible (check CUDA_VISIBLE_DEVICES)";
      return out;
    }
    int driver = 0, runtime = 0;
    cudaDriverGetVersion(&driver);
    cudaRuntimeGetVersion(&runtime);
    const std::vector<int> archs = nvrtc_architectures();
    std::string skipped;
    for (int i = 0; i < count; ++i) {
      cudaDeviceProp p{};
      if (cudaGetDeviceProperties(&p, i) != cudaSuccess) {
        cudaGetLastError();
        skipped += detail::cat(skipped.empty() ? "" : "; ", "CUDA device ", i, ": cudaGetDeviceProperties failed");
        continue;
      }
      if (!archs.empty() && p.major * 10 + p.minor < archs.front()) {
        skipped += detail::cat(skipped.empty() ? "" : "; ", "CUDA device ", i, " (", p.name, ", sm ", p.major, ".",
                               p.minor, ") is older than CUDA ", version_text(runtime), " supports (sm ",
                               archs.front() / 10, ".", archs.front() % 10, "+)");
        continue;
      }
      DeviceEntry d;
      d.ordinal = i;
      d.major = p.major;
      d.minor = p.minor;
      d.max_threads_per_block = p.maxThreadsPerBlock;
      d.props.name = p.name;
      d.props.vendor = "NVIDIA";
      d.props.kind = "gpu";
      d.props.memory_total = p.totalGlobalMem;
      d.props.compute_units = p.multiProcessorCount;
      int khz = 0;
      if (cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, i) == cudaSuccess) d.props.clock_mhz = khz / 1000;
      d.props.driver_version = version_text(driver);
      d.props.runtime_version = "CUDA " + version_text(runtime) + ", NVRTC " + nvrtc_version();
      d.props.compute_capability = std::to_string(p.major) + "." + std::to_string(p.minor);
      d.props.l2_cache_bytes = static_cast<std::uint64_t>(p.l2CacheSize);
      char bus_id[32];
      std::snprintf(bus_id, sizeof bus_id, "%04x:%02x:%02x.0", p.pciDomainID, p.pciBusID, p.pciDeviceID);
      d.props.pci_bus_id = bus_id;
      d.props.fp64 = true;
      d.props.fp16 = p.major >= 6;
      out.devices.push_back(std::move(d));
    }
    if (out.devices.empty()) out.reason = skipped;
    peer_.assign(out.devices.size() * out.devices.size(), -1);
  } catch (const std::exception& e) {
    out.devices.clear();
    out.reason = std::string("CUDA discovery failed: ") + e.what();
  }
  return out;
}

bool Runtime::can_copy_direct(const std::vector<DeviceEntry>& devices, int dst_index, int src_index) noexcept {
  const int n = static_cast<int>(devices.size());
  std::lock_guard lock(peer_mutex_);
  signed char& p = peer_[static_cast<std::size_t>(dst_index * n + src_index)];
  if (p < 0) {
    const int dst = devices[dst_index].ordinal, src = devices[src_index].ordinal;
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

// ---- Queue ------------------------------------------------------------------------

namespace {
const std::byte* at(const void* p, std::size_t offset) { return static_cast<const std::byte*>(p) + offset; }
std::byte* at(void* p, std::size_t offset) { return static_cast<std::byte*>(p) + offset; }

// Pinned staging kept per device for host->device copies.
constexpr std::size_t kMaxStagingBytes = std::size_t{256} << 20;
constexpr std::size_t kMinStagingBlock = std::size_t{1} << 20;
}  // namespace

Queue::Queue(Runtime&, int, const DeviceEntry& entry, const std::string& label)
    : programs(CudaCompiler(label, entry.major, entry.minor)), label_(label), entry_(entry) {
  make_current();
  ANVIL_CUDA_CHECK(label_, cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
}

Queue::~Queue() {
  // Runs at most at exit (the backend is leaked on purpose); the driver may
  // be shutting down, so errors are ignored.
  cudaSetDevice(entry_.ordinal);
  if (stream != nullptr) cudaStreamSynchronize(stream);
  for (Staging& s : staging_) {
    cudaEventDestroy(s.done);
    cudaFreeHost(s.data);
  }
  if (blas_ != nullptr) cublasDestroy(blas_);
  dnn_conv_state.reset();
  dnn_rnn_state.reset();
  if (dnn_ != nullptr)
    if (const CudnnApi* api = load_cudnn(nullptr)) api->cudnnDestroy(dnn_);
  if (stream != nullptr) cudaStreamDestroy(stream);
}

void Queue::update_properties(DeviceProperties& p) const noexcept {
  std::size_t free = 0, total = 0;
  if (cudaMemGetInfo(&free, &total) == cudaSuccess)
    p.memory_free = free;
  else
    cudaGetLastError();
}

detail::CachingAllocator::Raw Queue::raw_allocator() const {
  const int ordinal = entry_.ordinal;
  return {[ordinal](std::size_t bytes) -> void* {
            void* p = nullptr;
            if (cudaSetDevice(ordinal) != cudaSuccess || cudaMalloc(&p, bytes) != cudaSuccess) {
              cudaGetLastError();  // out of memory is not sticky: clear it
              return nullptr;
            }
            return p;
          },
          [ordinal](void* p, std::size_t) {
            // Reached from empty_cache and the out-of-memory retry only. A
            // cached block may still be in use by queued kernels, and
            // cudaFree only *may* synchronise: wait for the device first
            // (cheap after the first block of a batch).
            cudaSetDevice(ordinal);
            cudaDeviceSynchronize();
            cudaGetLastError();  // a device fault is reported at the next sync, not here
            cudaFree(p);
          }};
}

bool Queue::copy_from_host(void* dst, std::size_t dst_offset, const void* src, std::size_t bytes) {
  if (void* staging = acquire_staging(bytes)) {
    std::memcpy(staging, src, bytes);
    ANVIL_CUDA_CHECK(label_, cudaMemcpyAsync(at(dst, dst_offset), staging, bytes, cudaMemcpyHostToDevice, stream));
    release_staging(staging);
    return false;
  }
  ANVIL_CUDA_CHECK(label_, cudaMemcpyAsync(at(dst, dst_offset), src, bytes, cudaMemcpyHostToDevice, stream));
  return true;
}

void Queue::copy_to_host(void* dst, const void* src, std::size_t src_offset, std::size_t bytes) {
  ANVIL_CUDA_CHECK(label_, cudaMemcpyAsync(dst, at(src, src_offset), bytes, cudaMemcpyDeviceToHost, stream));
  ANVIL_CUDA_CHECK(label_, cudaStreamSynchronize(stream));
}

void Queue::copy_within(void* dst, std::size_t dst_byte, const void* src, std::size_t src_byte, std::size_t bytes,
                        const char*) {
  ANVIL_CUDA_CHECK(label_,
                   cudaMemcpyAsync(at(dst, dst_byte), at(src, src_byte), bytes, cudaMemcpyDeviceToDevice, stream));
}

// The copy runs on the destination's stream after everything queued on the
// source so far, and the source stream waits for the copy before it runs
// anything else (which may reuse the block).
void Queue::copy_between(Queue& d, void* dst, std::size_t dst_offset, Queue& s, const void* src, std::size_t src_offset,
                         std::size_t bytes) {
  cudaEvent_t ready = nullptr, copied = nullptr;
  s.make_current();
  ANVIL_CUDA_CHECK(s.label_, cudaEventCreateWithFlags(&ready, cudaEventDisableTiming));
  ANVIL_CUDA_CHECK(s.label_, cudaEventRecord(ready, s.stream));
  d.make_current();
  ANVIL_CUDA_CHECK(d.label_, cudaEventCreateWithFlags(&copied, cudaEventDisableTiming));
  ANVIL_CUDA_CHECK(d.label_, cudaStreamWaitEvent(d.stream, ready, 0));
  ANVIL_CUDA_CHECK(d.label_, cudaMemcpyPeerAsync(at(dst, dst_offset), d.entry_.ordinal, at(src, src_offset),
                                                 s.entry_.ordinal, bytes, d.stream));
  ANVIL_CUDA_CHECK(d.label_, cudaEventRecord(copied, d.stream));
  s.make_current();
  ANVIL_CUDA_CHECK(s.label_, cudaStreamWaitEvent(s.stream, copied, 0));
  // Destroying an event that is still pending is allowed: the resources go
  // once it completes.
  cudaEventDestroy(ready);
  cudaEventDestroy(copied);
}

// On this stream: it is non-blocking, so the legacy-stream cudaMemset
// would not be ordered with the kernels that follow.
void Queue::zero(void* block, std::size_t bytes) { ANVIL_CUDA_CHECK(label_, cudaMemsetAsync(block, 0, bytes, stream)); }

cublasHandle_t Queue::blas(detail::CachingAllocator& allocator) {
  if (blas_ != nullptr) return blas_;
  cublasHandle_t h = nullptr;
  cublasStatus_t st = cublasCreate(&h);
  if (st == CUBLAS_STATUS_ALLOC_FAILED) {  // our cache may hold the memory cuBLAS needs
    allocator.empty_cache();
    make_current();
    st = cublasCreate(&h);
  }
  ANVIL_CHECK(st == CUBLAS_STATUS_SUCCESS, BackendError, current_op(), ": cublasCreate failed with ",
              cublasGetStatusName(st), " on ", label_);
  cublasSetStream(h, stream);
  blas_ = h;
  return blas_;
}

cudnnHandle_t Queue::dnn(const CudnnApi& api, detail::CachingAllocator& allocator) {
  if (dnn_ != nullptr) [[likely]]
    return dnn_;
  cudnnHandle_t h = nullptr;
  cudnnStatus_t st = api.cudnnCreate(&h);
  if (st == CUDNN_STATUS_ALLOC_FAILED) {  // our cache may hold the memory cuDNN needs
    allocator.empty_cache();
    make_current();
    st = api.cudnnCreate(&h);
  }
  if (st != CUDNN_STATUS_SUCCESS) throw_cudnn_error(st, "cudnnCreate(&handle)", __FILE__, __LINE__, label_);
  st = api.cudnnSetStream(h, stream);
  if (st != CUDNN_STATUS_SUCCESS) {
    api.cudnnDestroy(h);
    throw_cudnn_error(st, "cudnnSetStream(handle, stream)", __FILE__, __LINE__, label_);
  }
  dnn_ = h;
  return dnn_;
}

device_common::DeviceFault Queue::wait() {
  make_current();
  const cudaError_t e = cudaStreamSynchronize(stream);
  for (Staging& s : staging_) s.busy = false;
  device_common::DeviceFault fault;
  if (e != cudaSuccess) {
    cudaGetLastError();
    fault.status = error_text(e);
  }
  return fault;
}

void* Queue::acquire_staging(std::size_t bytes) {
  for (Staging& s : staging_) {
    if (s.busy && cudaEventQuery(s.done) == cudaSuccess) s.busy = false;
    if (!s.busy && s.bytes >= bytes) {
      s.busy = true;
      return s.data;
    }
  }
  std::size_t block = kMinStagingBlock;
  while (block < bytes) block *= 2;
  if (staging_bytes_ + block > kMaxStagingBytes) return nullptr;
  Staging s{nullptr, block, nullptr, true};
  if (cudaHostAlloc(&s.data, block, cudaHostAllocDefault) != cudaSuccess) {
    cudaGetLastError();
    return nullptr;
  }
  if (cudaEventCreateWithFlags(&s.done, cudaEventDisableTiming) != cudaSuccess) {
    cudaGetLastError();
    cudaFreeHost(s.data);
    return nullptr;
  }
  staging_bytes_ += block;
  staging_.push_back(s);
  return s.data;
}

void Queue::release_staging(void* p) {
  for (Staging& s : staging_)
    if (s.data == p) ANVIL_CUDA_CHECK(label_, cudaEventRecord(s.done, stream));
}

// ---- timestamps on the GPU's clock (cudaEventElapsedTime) ---------------------------

void* Queue::record_timestamp() {
  cudaEvent_t e = nullptr;
  ANVIL_CUDA_CHECK(label_, cudaEventCreate(&e));
  const cudaError_t st = cudaEventRecord(e, stream);
  if (st != cudaSuccess) {
    cudaEventDestroy(e);
    throw_cuda_error(st, "cudaEventRecord(e, stream)", __FILE__, __LINE__, label_);
  }
  return e;
}

// Either event may have been recorded first (the result is then negative).
double Queue::elapsed_seconds(void* start, void* end, const std::function<void()>& report_device_fault) {
  make_current();
  const auto a = static_cast<cudaEvent_t>(start), b = static_cast<cudaEvent_t>(end);
  cudaError_t e = cudaEventSynchronize(a);
  if (e == cudaSuccess) e = cudaEventSynchronize(b);
  float ms = 0;
  if (e == cudaSuccess) e = cudaEventElapsedTime(&ms, a, b);
  if (e != cudaSuccess) {
    cudaGetLastError();
    report_device_fault();  // throws when the device failed
    throw_cuda_error(e, "cudaEventElapsedTime(&ms, start, end)", __FILE__, __LINE__, label_);
  }
  return static_cast<double>(ms) / 1e3;
}

void Queue::release_timestamp(const DeviceEntry& e, void* stamp) noexcept {
  cudaSetDevice(e.ordinal);
  cudaEventDestroy(static_cast<cudaEvent_t>(stamp));
}

}  // namespace anvil::cuda
