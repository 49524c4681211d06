// python/src/io.cpp — anvil.save / anvil.load (safetensors) and .npy files
// (anvil/io.h).
#include "common.h"

namespace anvil::python {

void bind_io(nb::module_& m) {
  m.def(
      "save",
      [](const std::map<std::string, Tensor>& tensors, const std::string& path,
         const std::map<std::string, std::string>& metadata) {
        save_safetensors(path, {tensors.begin(), tensors.end()}, metadata);
      },
      "obj"_a, "path"_a, "metadata"_a = std::map<std::string, std::string>(), ANVIL_NOGIL,
      "Writes a dict of tensors (a state_dict) as safetensors");
  m.def(
      "load",
      [](const std::string& path, std::optional<Device> map_location) {
        return load_safetensors(path, map_location.value_or(cpu()));
      },
      "path"_a, "map_location"_a = nb::none(), ANVIL_NOGIL,
      "Reads a safetensors file into a dict of tensors on map_location (the CPU by default)");
  m.def("save_npy", &save_npy, "path"_a, "tensor"_a, ANVIL_NOGIL, doc("save_npy"));
  m.def(
      "load_npy",
      [](const std::string& path, std::optional<Device> device) { return load_npy(path, device.value_or(cpu())); },
      "path"_a, "device"_a = nb::none(), ANVIL_NOGIL, doc("load_npy"));
}

}  // namespace anvil::python
