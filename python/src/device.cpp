// python/src/device.cpp — devices and dtypes: anvil.device("opencl:1"),
// anvil.cpu(), anvil.gpu(i), anvil.try_gpu(), anvil.float32, …
#include <sstream>

#include "common.h"

namespace anvil::python {

void bind_device(nb::module_& m) {
  nb::enum_<DeviceType>(m, "DeviceType")
      .value("cpu", DeviceType::CPU)
      .value("cuda", DeviceType::CUDA)
      .value("opencl", DeviceType::OpenCL);

  nb::class_<Device>(m, "device", "Where a tensor lives: cpu, cuda:N or opencl:N (torch.device)")
      .def(nb::init<const std::string&>(), "spec"_a)
      .def(nb::init<DeviceType, int>(), "type"_a, "index"_a = 0)
      .def_prop_ro("type", [](Device d) { return std::string(to_string(d.type())); })
      .def_prop_ro("index", &Device::index)
      .def("__str__", &Device::str, doc("Device::str"))
      .def("__repr__",
           [](Device d) {
             const std::string type = "device(type='" + std::string(to_string(d.type())) + "'";
             return d.is_cpu() ? type + ")" : type + ", index=" + std::to_string(d.index()) + ")";
           })
      .def("__eq__", [](Device a, Device b) { return a == b; })
      .def("__eq__", [](Device a, const std::string& b) { return a == Device(b); })
      .def("__hash__", [](Device d) { return std::hash<Device>()(d); })
      .def("properties", &properties, "The device's name, memory and driver (DeviceProperties)")
      .def("synchronize", [](Device d) {
        const SourceLocation site = python_call_site();
        nb::gil_scoped_release release;
        synchronize(d, site);
      });
  nb::implicitly_convertible<std::string, Device>();

  nb::class_<DeviceProperties>(m, "DeviceProperties", doc("DeviceProperties"))
      .def_ro("name", &DeviceProperties::name)
      .def_ro("vendor", &DeviceProperties::vendor)
      .def_ro("kind", &DeviceProperties::kind)
      .def_ro("memory_total", &DeviceProperties::memory_total)
      .def_ro("memory_free", &DeviceProperties::memory_free)
      .def_ro("compute_units", &DeviceProperties::compute_units)
      .def_ro("clock_mhz", &DeviceProperties::clock_mhz)
      .def_ro("driver_version", &DeviceProperties::driver_version)
      .def_ro("runtime_version", &DeviceProperties::runtime_version)
      .def_ro("fp64", &DeviceProperties::fp64)
      .def_ro("fp16", &DeviceProperties::fp16)
      .def_ro("compute_capability", &DeviceProperties::compute_capability);

  m.def("cpu", &anvil::cpu, doc("cpu"));
  m.def("gpu", &gpu, "i"_a = 0, "The i-th accelerator; DeviceError when there is none");
  m.def("try_gpu", &try_gpu, "i"_a = 0, "The i-th accelerator, or the CPU");
  m.def("try_gpu_reason", &try_gpu_reason, "i"_a = 0, doc("try_gpu_reason"));
  m.def("try_all_gpus", &try_all_gpus, doc("try_all_gpus"));
  m.def("gpu_count", &gpu_count, doc("gpu_count"));
  m.def("device_count", &device_count, "type"_a, doc("device_count"));
  m.def("device_unavailable_reason", &device_unavailable_reason, "type"_a, doc("device_unavailable_reason"));
  m.def("all_devices", &all_devices, doc("all_devices"));
  m.def("default_device", &default_device, doc("default_device"));
  m.def(
      "synchronize",
      [](Device d) {
        const SourceLocation site = python_call_site();
        nb::gil_scoped_release release;
        synchronize(d, site);
      },
      "device"_a, doc("synchronize"));

  // with anvil.device_scope(d): factories create on d (torch's `with torch.device(d)`).
  struct Scope {
    Device d;
    std::optional<DeviceScope> scope;
  };
  nb::class_<Scope>(m, "device_scope")
      .def(nb::init<Device>(), "device"_a)
      .def("__enter__", [](Scope& s) { s.scope.emplace(s.d); })
      .def("__exit__", [](Scope& s, nb::args) { s.scope.reset(); });

  nb::enum_<DType>(m, "dtype", "An element type (torch.dtype)")
      .value("bool", DType::Bool)
      .value("uint8", DType::U8)
      .value("int32", DType::I32)
      .value("int64", DType::I64)
      .value("float32", DType::F32)
      .value("float64", DType::F64)
      .value("float16", DType::F16)
      .value("bfloat16", DType::BF16)
      .def("__repr__", [](DType t) { return "anvil." + std::string(nb::cast<std::string>(nb::cast(t).attr("name"))); })
      .def("__str__", [](DType t) { return "anvil." + std::string(nb::cast<std::string>(nb::cast(t).attr("name"))); })
      .def_prop_ro("is_floating_point", [](DType t) { return is_floating(t); })
      .def_prop_ro("itemsize", [](DType t) { return element_size(t); });
  nb::enum_<MemoryFormat>(m, "memory_format", "How a 4-d tensor lies in memory (torch.memory_format)")
      .value("contiguous_format", MemoryFormat::Contiguous)
      .value("channels_last", MemoryFormat::ChannelsLast)
      .value("preserve_format", MemoryFormat::Preserve)
      .def("__repr__",
           [](MemoryFormat f) { return "anvil." + std::string(nb::cast<std::string>(nb::cast(f).attr("name"))); });
  m.attr("contiguous_format") = MemoryFormat::Contiguous;
  m.attr("channels_last") = MemoryFormat::ChannelsLast;
  m.attr("preserve_format") = MemoryFormat::Preserve;
  m.def("promote_types", [](DType a, DType b) { return promote(a, b); });
  m.def("is_floating_point_dtype", [](DType t) { return is_floating(t); });
  m.def(
      "element_size", [](DType t) { return element_size(t); }, doc("element_size"));

  m.def("set_num_threads", &set_num_threads, doc("set_num_threads"));
  m.def("get_num_threads", &num_threads, doc("num_threads"));
  nb::class_<MemoryStats>(m, "MemoryStats", doc("MemoryStats"))
      .def_ro("allocated", &MemoryStats::allocated)
      .def_ro("reserved", &MemoryStats::reserved)
      .def_ro("peak_allocated", &MemoryStats::peak_allocated)
      .def_ro("num_allocs", &MemoryStats::num_allocs)
      .def_ro("num_frees", &MemoryStats::num_frees)
      .def_ro("cache_hits", &MemoryStats::cache_hits)
      .def_ro("limit", &MemoryStats::limit)
      .def("__repr__", [](const MemoryStats& s) {
        std::ostringstream os;
        os << s;
        return os.str();
      });
  m.def("memory_stats", &memory_stats, "device"_a, doc("memory_stats"));
  m.def("reset_peak_memory_stats", &reset_peak_memory_stats, "device"_a, doc("reset_peak_memory_stats"));
  m.def("empty_cache", &empty_cache, "device"_a, doc("empty_cache"));
  m.def("set_memory_limit", &set_memory_limit, "device"_a, "bytes"_a, doc("set_memory_limit"));
}

}  // namespace anvil::python
