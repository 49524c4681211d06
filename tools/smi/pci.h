// Matching NVML's GPUs to anvil's cuda:N by PCI bus id. NVML numbers GPUs
// in PCI order; CUDA numbers them fastest first by default and after
// CUDA_VISIBLE_DEVICES, so an index is no key, the bus id is.
//
//   pci_bus_key("00000000:3B:00.0") == pci_bus_key("0000:3b:00.0")  // "0000:3b:00"
//   nvml_row_for({"0000:3b:00.0"}, {"0000:1a:00.0", "0000:3b:00.0"}) == {1}
#pragma once

#include <cstdio>
#include <string>
#include <vector>

namespace anvil::smi {

// The canonical "dddd:bb:dd" (hex, lower case) of a PCI bus id written as
// "domain:bus:device[.function]" with any number of digits, as CUDA
// ("0000:3b:00.0") and NVML ("00000000:3B:00.0") do; "" when it is not one.
// The function is left out: CUDA reports a GPU, not a function.
inline std::string pci_bus_key(const std::string& id) {
  unsigned domain = 0, bus = 0, device = 0;
  int used = 0;
  if (std::sscanf(id.c_str(), "%x:%x:%x%n", &domain, &bus, &device, &used) != 3) return "";
  if (used != static_cast<int>(id.size()) && id[used] != '.') return "";
  char key[32];
  std::snprintf(key, sizeof key, "%04x:%02x:%02x", domain, bus, device);
  return key;
}

// For each CUDA device (its bus id, cuda:N order), the index of the NVML
// row with the same bus id, or -1 when there is none (or the id is unknown).
inline std::vector<int> nvml_row_for(const std::vector<std::string>& cuda_bus_ids,
                                     const std::vector<std::string>& nvml_bus_ids) {
  std::vector<int> out;
  for (const std::string& c : cuda_bus_ids) {
    const std::string key = pci_bus_key(c);
    int row = -1;
    for (std::size_t i = 0; i < nvml_bus_ids.size() && !key.empty() && row < 0; ++i)
      if (pci_bus_key(nvml_bus_ids[i]) == key) row = static_cast<int>(i);
    out.push_back(row);
  }
  return out;
}

}  // namespace anvil::smi
