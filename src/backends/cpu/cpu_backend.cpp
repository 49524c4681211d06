#include "backends/cpu/cpu_backend.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>

#include "anvil/runtime.h"
#include "backends/cpu/dtype_switch.h"
#include "backends/cpu/isa.h"
#include "backends/cpu/parallel.h"

namespace anvil::detail {
Backend* make_cpu_backend() {
  static cpu_backend::CpuBackend backend;
  return &backend;
}
}  // namespace anvil::detail

namespace anvil::cpu_backend {

namespace {
std::uint64_t physical_memory() noexcept {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? static_cast<std::uint64_t>(pages) * static_cast<std::uint64_t>(page) : 0;
}

std::uint64_t available_memory() noexcept {
  const long pages = sysconf(_SC_AVPHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? static_cast<std::uint64_t>(pages) * static_cast<std::uint64_t>(page) : 0;
}

std::string cpu_model_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(' ', colon + 1));
    }
  return "cpu";
}

// 64-byte alignment for vector loads; large blocks come from mmap inside
// the C library and are returned to the OS by empty_cache().
void* host_allocate(std::size_t bytes) noexcept { return std::aligned_alloc(64, (bytes + 63) / 64 * 64); }
void host_release(void* p, std::size_t) noexcept { std::free(p); }
}  // namespace

// The cache keeps at most a quarter of physical memory for reuse, so a
// program that allocates many different sizes cannot hoard the machine.
CpuBackend::CpuBackend() : allocator_("cpu", {host_allocate, host_release}, physical_memory(), physical_memory() / 4) {
  try {
    allocator_.set_limit(detail::memory_limit_from_env(anvil::cpu()));
  } catch (...) {
    // A malformed ANVIL_MEMORY_LIMIT is reported by set_memory_limit users;
    // the backend itself must construct (enumeration never throws).
  }
}

DeviceProperties CpuBackend::properties(int) {
  DeviceProperties p;
  p.name = cpu_model_name();
  p.vendor = "host";
  p.kind = "cpu";
  p.memory_total = physical_memory();
  p.memory_free = available_memory();
  p.compute_units = static_cast<int>(std::thread::hardware_concurrency());
  p.driver_version = "openblas+openmp";
  p.runtime_version = std::string("anvil cpu, ") + kernels().name + " kernels";
  // Note [Threads from the measured wake cost]: what a wake of the pool
  // costs here, measured (at the thread bound) or fixed.
  const ParallelCosts costs = parallel_costs();
  char wake[64];
  std::snprintf(wake, sizeof wake, ", wake %.1f us%s", costs.wake_us,
                costs.fixed         ? " (fixed)"
                : costs.threads > 1 ? ""
                                    : " (not measured)");
  p.runtime_version += wake;
  // Note [Bounded OpenMP spinning]: how idle workers wait, and why.
  p.runtime_version += ", wait " + costs.wait_policy + " (" + costs.wait_reason + ")";
  p.fp64 = true;
  p.fp16 = false;
  return p;
}

void* CpuBackend::allocate(int, std::size_t bytes) { return allocator_.allocate(bytes); }
void CpuBackend::deallocate(int, void* data, std::size_t bytes) noexcept { allocator_.deallocate(data, bytes); }
MemoryStats CpuBackend::memory_stats(int) { return allocator_.stats(); }
void CpuBackend::reset_peak_memory_stats(int) { allocator_.reset_peak(); }
void CpuBackend::empty_cache(int) { allocator_.empty_cache(); }
void CpuBackend::set_memory_limit(int, std::uint64_t bytes) { allocator_.set_limit(bytes); }

namespace {
void parallel_memcpy(char* dst, const char* src, std::size_t bytes) {
  parallel_for(static_cast<std::int64_t>(bytes), std::int64_t{1} << 20,
               [&](std::int64_t b, std::int64_t e) { std::memcpy(dst + b, src + b, static_cast<std::size_t>(e - b)); });
}
}  // namespace

void CpuBackend::copy_from_host(int, void* dst, std::size_t dst_offset, const void* src, std::size_t bytes) {
  parallel_memcpy(static_cast<char*>(dst) + dst_offset, static_cast<const char*>(src), bytes);
}
void CpuBackend::copy_to_host(int, void* dst, const void* src, std::size_t src_offset, std::size_t bytes) {
  parallel_memcpy(static_cast<char*>(dst), static_cast<const char*>(src) + src_offset, bytes);
}
void CpuBackend::copy_device(int, void* dst, std::size_t dst_offset, int, const void* src, std::size_t src_offset,
                             std::size_t bytes) {
  count({bytes, bytes});
  parallel_memcpy(static_cast<char*>(dst) + dst_offset, static_cast<const char*>(src) + src_offset, bytes);
}

void CpuBackend::fill(int, const detail::KernelOperand& out, std::int64_t numel, const Scalar& value) {
  count({0, detail::dense_bytes(out, numel)});
  ANVIL_DISPATCH(out.dtype, T, {
    T* p = static_cast<T*>(out.data) + out.offset;
    const T v = scalar_to<T>(value);
    parallel_for(numel, kParallelGrain, [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t i = b; i < e; ++i) p[i] = v;
    });
  });
}

void CpuBackend::arange(int, const detail::KernelOperand& out, std::int64_t numel, double start, double step) {
  count({0, detail::dense_bytes(out, numel)});
  ANVIL_DISPATCH(out.dtype, T, {
    T* p = static_cast<T*>(out.data) + out.offset;
    parallel_for(numel, kParallelGrain, [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t i = b; i < e; ++i) p[i] = static_cast<T>(start + static_cast<double>(i) * step);
    });
  });
}

}  // namespace anvil::cpu_backend
