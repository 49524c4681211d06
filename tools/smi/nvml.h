// NVML (NVIDIA's management library) loaded at run time with dlopen, so that
// anvil-smi builds and runs without the NVIDIA driver: when the library or a
// GPU is missing, `available` is false with a reason and every figure is
// absent (printed as n/a, null in JSON).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace anvil::smi {

struct NvmlProcess {
  unsigned pid = 0;
  std::string name;                         // "" when NVML cannot say
  std::optional<std::uint64_t> used_bytes;  // absent when NVML cannot say
};

struct NvmlGpu {
  int index = 0;
  std::string name;
  std::string uuid;
  std::string pci_bus_id;                      // NVML's busId, "00000000:3B:00.0"; "" when NVML cannot say
  std::optional<unsigned> utilization_gpu;     // percent
  std::optional<unsigned> utilization_memory;  // percent
  std::optional<unsigned> temperature_c;
  std::optional<double> power_w;
  std::optional<double> power_limit_w;
  std::optional<std::uint64_t> memory_total;
  std::optional<std::uint64_t> memory_used;
  std::vector<NvmlProcess> processes;
};

struct NvmlReport {
  bool available = false;
  std::string reason;  // why not available ("" when it is)
  std::string driver_version;
  std::string nvml_version;
  std::vector<NvmlGpu> gpus;
};

// Loads libnvidia-ml.so.1, queries every GPU and unloads it. Never throws.
NvmlReport query_nvml() noexcept;

}  // namespace anvil::smi
