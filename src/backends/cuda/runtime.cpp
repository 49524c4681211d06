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
      return "no usable NVIDIA driver (cudaErrorInsufficientDriver: the driver is missing or older than CUDA " +
             [] {
               int v = 0;
               cudaRuntimeGetVersion(&v);
               return version_text(v);
             }() +
             " needs)";
    case cudaErrorNoDevice: return "no CUDA-capable GPU is visible (cudaErrorNoDevice; check CUDA_VISIBLE_DEVICES)";
    default: return "the CUDA runtime failed to start: " + error_text(e);
  }
}

}  // namespace

Discovery discover() noexcept {
  Discovery out;
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
  } catch (const std::exception& e) {
    out.devices.clear();
    out.reason = std::string("CUDA discovery failed: ") + e.what();
  }
  return out;
}

// ---- ProgramCache -----------------------------------------------------------------

ProgramCache::~ProgramCache() {
  for (auto& [key, lib] : programs_) cudaLibraryUnload(lib);
}

cudaKernel_t ProgramCache::build(std::uint64_t key, const kernels::KernelSpec& spec) {
  const std::string program_key = spec.file + '|' + kernels::define_options(spec);
  auto it = programs_.find(program_key);
  if (it == programs_.end()) {
    CompiledProgram compiled = compile_program_cached(spec, major_, minor_);
    cudaLibrary_t lib = nullptr;
    if (compiled.from_cache &&
        cudaLibraryLoadData(&lib, compiled.image.data(), nullptr, nullptr, 0, nullptr, nullptr, 0) != cudaSuccess) {
      cudaGetLastError();  // a stale or damaged cache file: compile afresh
      lib = nullptr;
      compiled = compile_program(spec, major_, minor_);
    }
    if (lib == nullptr)
      ANVIL_CUDA_CHECK(label_,
                       cudaLibraryLoadData(&lib, compiled.image.data(), nullptr, nullptr, 0, nullptr, nullptr, 0));
    it = programs_.emplace(program_key, lib).first;
  }
  cudaKernel_t k = nullptr;
  ANVIL_CUDA_CHECK(label_, cudaLibraryGetKernel(&k, it->second, spec.name.c_str()));
  kernels_.emplace(key, k);
  return k;
}

// ---- DeviceState ------------------------------------------------------------------

namespace {
detail::CachingAllocator::Raw raw_allocator(int ordinal) {
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

// Pinned staging kept per device for host->device copies.
constexpr std::size_t kMaxStagingBytes = std::size_t{256} << 20;
constexpr std::size_t kMinStagingBlock = std::size_t{1} << 20;
}  // namespace

DeviceState::DeviceState(int index, const DeviceEntry& entry)
    : programs(Device(DeviceType::CUDA, index).str(), entry.major, entry.minor),
      allocator(Device(DeviceType::CUDA, index).str(), raw_allocator(entry.ordinal), entry.props.memory_total),
      index_(index),
      label_(Device(DeviceType::CUDA, index).str()),
      entry_(entry) {
  make_current();
  ANVIL_CUDA_CHECK(label_, cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  sync_every_op_ = env_flag("ANVIL_SYNC");
  allocator.set_limit(detail::memory_limit_from_env(Device(DeviceType::CUDA, index)));
}

DeviceState::~DeviceState() {
  // Runs at most at exit (the backend is leaked on purpose); the driver may
  // be shutting down, so errors are ignored.
  cudaSetDevice(entry_.ordinal);
  if (stream != nullptr) cudaStreamSynchronize(stream);
  for (Staging& s : staging_) {
    cudaEventDestroy(s.done);
    cudaFreeHost(s.data);
  }
  if (blas_ != nullptr) cublasDestroy(blas_);
  if (index_error_ != nullptr) cudaFree(index_error_);
  if (stream != nullptr) cudaStreamDestroy(stream);
}

cublasHandle_t DeviceState::blas_locked() {
  if (blas_ != nullptr) return blas_;
  make_current();
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

void DeviceState::track_locked(const char* op) {
  ++ops_since_wait_;
  if (recent_ops_.size() < 8 && std::find(recent_ops_.begin(), recent_ops_.end(), op) == recent_ops_.end())
    recent_ops_.emplace_back(op);
  if (sync_every_op_) finish_locked();
}

void DeviceState::finish_locked() {
  make_current();
  const cudaError_t e = cudaStreamSynchronize(stream);
  std::string ops;
  for (const std::string& op : recent_ops_) ops += (ops.empty() ? "" : ", ") + op;
  const std::uint64_t count = ops_since_wait_;
  recent_ops_.clear();
  ops_since_wait_ = 0;
  for (Staging& s : staging_) s.busy = false;
  if (e != cudaSuccess) {
    cudaGetLastError();
    throw BackendError(detail::cat(count == 1 ? ops : current_op(), ": the device reported ", error_text(e), " on ",
                                   label_, "; it surfaced at the next sync, after ", count, " op(s) [", ops,
                                   "]; run with ANVIL_SYNC=1 to stop at the failing op"));
  }
  if (!index_uses_.empty()) {
    // On this stream: it is non-blocking, so the legacy-stream cudaMemcpy
    // and cudaMemset would not be ordered with the kernels that follow.
    std::int64_t flag[2] = {0, 0};
    ANVIL_CUDA_CHECK(label_, cudaMemcpyAsync(flag, index_error_, sizeof flag, cudaMemcpyDeviceToHost, stream));
    ANVIL_CUDA_CHECK(label_, cudaStreamSynchronize(stream));
    const std::vector<IndexUse> uses = std::move(index_uses_);
    index_uses_.clear();
    if (flag[0] != 0) {
      ANVIL_CUDA_CHECK(label_, cudaMemsetAsync(index_error_, 0, sizeof flag, stream));
      std::string names;
      for (const IndexUse& x : uses)
        if (names.find(x.op) == std::string::npos) names += (names.empty() ? "" : " or ") + std::string(x.op);
      throw IndexError(detail::cat(names, ": index out of range on ", label_, "; expected 0 <= index < ",
                                   uses.front().dim_size, ", got ", flag[1],
                                   " (found by the device, reported at the next sync; the output holds 0 there)"));
    }
  }
}

void* DeviceState::index_error_buffer_locked(const char* op, std::int64_t dim_size) {
  if (index_error_ == nullptr) {
    make_current();
    ANVIL_CUDA_CHECK(label_, cudaMalloc(&index_error_, 2 * sizeof(std::int64_t)));
    ANVIL_CUDA_CHECK(label_, cudaMemsetAsync(index_error_, 0, 2 * sizeof(std::int64_t), stream));
  }
  // One entry per op name: a loop that never syncs must not grow this.
  if (std::none_of(index_uses_.begin(), index_uses_.end(), [&](const IndexUse& u) { return u.op == op; }))
    index_uses_.push_back({op, dim_size});
  return index_error_;
}

void* DeviceState::acquire_staging_locked(std::size_t bytes) {
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
  make_current();
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

void DeviceState::release_staging_locked(void* p) {
  for (Staging& s : staging_)
    if (s.data == p) ANVIL_CUDA_CHECK(label_, cudaEventRecord(s.done, stream));
}

}  // namespace anvil::cuda
