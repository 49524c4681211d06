// The few NVML entry points anvil-smi uses, declared here with the C ABI of
// nvml.h (stable since NVML 5) so that no NVIDIA header is needed to build.
#include "nvml.h"

#include <dlfcn.h>

#include <cstdio>
#include <exception>

namespace anvil::smi {
namespace {

using nvmlReturn_t = int;
using nvmlDevice_t = struct nvmlDevice_st*;
constexpr nvmlReturn_t kNvmlSuccess = 0;
constexpr nvmlReturn_t kNvmlErrorInsufficientSize = 7;
constexpr int kNvmlTemperatureGpu = 0;

struct nvmlUtilization_t {
  unsigned gpu, memory;
};
struct nvmlMemory_t {
  unsigned long long total, free, used;
};
// nvmlPciInfo_t (NVML 11+: nvmlDeviceGetPciInfo_v3).
struct nvmlPciInfo_t {
  char busIdLegacy[16];
  unsigned domain, bus, device, pciDeviceId, pciSubSystemId;
  char busId[32];
};
// nvmlProcessInfo_t as the _v2/_v3 process queries fill it.
struct nvmlProcessInfo_t {
  unsigned pid;
  unsigned long long usedGpuMemory;  // NVML_VALUE_NOT_AVAILABLE (~0ULL) when unknown
  unsigned gpuInstanceId, computeInstanceId;
};

// Loads a symbol by its first available name (newer versioned names first).
template <typename Fn>
Fn sym(void* lib, std::initializer_list<const char*> names) {
  for (const char* n : names)
    if (void* p = dlsym(lib, n)) return reinterpret_cast<Fn>(p);
  return nullptr;
}

class Library {
 public:
  Library() : handle_(dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL)) {}
  ~Library() {
    if (handle_ != nullptr) dlclose(handle_);
  }
  Library(const Library&) = delete;
  Library& operator=(const Library&) = delete;
  void* get() const { return handle_; }

 private:
  void* handle_;
};

std::string error_string(void* lib, nvmlReturn_t r) {
  auto str = sym<const char* (*)(nvmlReturn_t)>(lib, {"nvmlErrorString"});
  const char* s = str != nullptr ? str(r) : nullptr;
  return s != nullptr ? std::string(s) : "NVML error " + std::to_string(r);
}

NvmlReport query(void* lib) {
  NvmlReport out;
  auto init = sym<nvmlReturn_t (*)()>(lib, {"nvmlInit_v2", "nvmlInit"});
  auto shutdown = sym<nvmlReturn_t (*)()>(lib, {"nvmlShutdown"});
  auto count = sym<nvmlReturn_t (*)(unsigned*)>(lib, {"nvmlDeviceGetCount_v2", "nvmlDeviceGetCount"});
  auto handle = sym<nvmlReturn_t (*)(unsigned, nvmlDevice_t*)>(
      lib, {"nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetHandleByIndex"});
  if (init == nullptr || shutdown == nullptr || count == nullptr || handle == nullptr) {
    out.reason = "libnvidia-ml.so.1 lacks nvmlInit/nvmlDeviceGetCount (driver too old?)";
    return out;
  }
  if (nvmlReturn_t r = init(); r != kNvmlSuccess) {
    out.reason = "nvmlInit failed: " + error_string(lib, r);
    return out;
  }
  auto text = [&](auto fn, auto... args) {
    char buf[256] = {};
    if (fn != nullptr && fn(args..., buf, static_cast<unsigned>(sizeof buf)) == kNvmlSuccess) return std::string(buf);
    return std::string();
  };
  out.driver_version = text(sym<nvmlReturn_t (*)(char*, unsigned)>(lib, {"nvmlSystemGetDriverVersion"}));
  out.nvml_version = text(sym<nvmlReturn_t (*)(char*, unsigned)>(lib, {"nvmlSystemGetNVMLVersion"}));

  auto name = sym<nvmlReturn_t (*)(nvmlDevice_t, char*, unsigned)>(lib, {"nvmlDeviceGetName"});
  auto uuid = sym<nvmlReturn_t (*)(nvmlDevice_t, char*, unsigned)>(lib, {"nvmlDeviceGetUUID"});
  auto pci = sym<nvmlReturn_t (*)(nvmlDevice_t, nvmlPciInfo_t*)>(lib, {"nvmlDeviceGetPciInfo_v3"});
  auto util = sym<nvmlReturn_t (*)(nvmlDevice_t, nvmlUtilization_t*)>(lib, {"nvmlDeviceGetUtilizationRates"});
  auto temp = sym<nvmlReturn_t (*)(nvmlDevice_t, int, unsigned*)>(lib, {"nvmlDeviceGetTemperature"});
  auto power = sym<nvmlReturn_t (*)(nvmlDevice_t, unsigned*)>(lib, {"nvmlDeviceGetPowerUsage"});
  auto limit = sym<nvmlReturn_t (*)(nvmlDevice_t, unsigned*)>(lib, {"nvmlDeviceGetEnforcedPowerLimit"});
  auto memory = sym<nvmlReturn_t (*)(nvmlDevice_t, nvmlMemory_t*)>(lib, {"nvmlDeviceGetMemoryInfo"});
  auto procs = sym<nvmlReturn_t (*)(nvmlDevice_t, unsigned*, nvmlProcessInfo_t*)>(
      lib, {"nvmlDeviceGetComputeRunningProcesses_v3", "nvmlDeviceGetComputeRunningProcesses_v2"});
  auto proc_name = sym<nvmlReturn_t (*)(unsigned, char*, unsigned)>(lib, {"nvmlSystemGetProcessName"});

  unsigned n = 0;
  if (nvmlReturn_t r = count(&n); r != kNvmlSuccess) {
    out.reason = "nvmlDeviceGetCount failed: " + error_string(lib, r);
    shutdown();
    return out;
  }
  for (unsigned i = 0; i < n; ++i) {
    nvmlDevice_t dev = nullptr;
    if (handle(i, &dev) != kNvmlSuccess) continue;
    NvmlGpu g;
    g.index = static_cast<int>(i);
    g.name = text(name, dev);
    g.uuid = text(uuid, dev);
    if (nvmlPciInfo_t info{}; pci != nullptr && pci(dev, &info) == kNvmlSuccess) {
      char id[32];  // NVML's own format, from the fields every version fills
      std::snprintf(id, sizeof id, "%08X:%02X:%02X.0", info.domain, info.bus, info.device);
      g.pci_bus_id = id;
    }
    if (nvmlUtilization_t u{}; util != nullptr && util(dev, &u) == kNvmlSuccess) {
      g.utilization_gpu = u.gpu;
      g.utilization_memory = u.memory;
    }
    if (unsigned t = 0; temp != nullptr && temp(dev, kNvmlTemperatureGpu, &t) == kNvmlSuccess) g.temperature_c = t;
    if (unsigned mw = 0; power != nullptr && power(dev, &mw) == kNvmlSuccess) g.power_w = mw / 1000.0;
    if (unsigned mw = 0; limit != nullptr && limit(dev, &mw) == kNvmlSuccess) g.power_limit_w = mw / 1000.0;
    if (nvmlMemory_t m{}; memory != nullptr && memory(dev, &m) == kNvmlSuccess) {
      g.memory_total = m.total;
      g.memory_used = m.used;
    }
    if (procs != nullptr) {
      // Ask for the count, then the list, with room for a process that
      // starts in between.
      std::vector<nvmlProcessInfo_t> infos;
      unsigned np = 0;
      nvmlReturn_t r = procs(dev, &np, nullptr);
      if (r == kNvmlErrorInsufficientSize) {
        infos.resize(np + 4);
        np = static_cast<unsigned>(infos.size());
        r = procs(dev, &np, infos.data());
      }
      if (r == kNvmlSuccess) {
        infos.resize(np);
        for (const nvmlProcessInfo_t& p : infos) {
          NvmlProcess proc;
          proc.pid = p.pid;
          proc.name = text(proc_name, p.pid);
          if (p.usedGpuMemory != ~0ULL) proc.used_bytes = p.usedGpuMemory;
          g.processes.push_back(std::move(proc));
        }
      }
    }
    out.gpus.push_back(std::move(g));
  }
  shutdown();
  out.available = true;
  return out;
}

}  // namespace

NvmlReport query_nvml() noexcept {
  try {
    Library lib;
    if (lib.get() == nullptr) {
      NvmlReport out;
      const char* err = dlerror();
      // dlerror() repeats the file name; keep only what it adds beyond "not found".
      const std::string why = err != nullptr ? err : "";
      out.reason = "libnvidia-ml.so.1 not found (no NVIDIA driver)";
      if (!why.empty() && why.find("No such file") == std::string::npos) out.reason += ": " + why;
      return out;
    }
    return query(lib.get());
  } catch (const std::exception& e) {
    NvmlReport out;
    out.reason = std::string("NVML query failed: ") + e.what();
    return out;
  }
}

}  // namespace anvil::smi
