// python/src/amp.cpp — anvil.amp: autocast as a context manager and the
// GradScaler (anvil/amp.h).
#include "common.h"

namespace anvil::python {
namespace {

struct Autocast {
  DeviceType type;
  DType dtype;
  bool enabled;
  std::vector<std::shared_ptr<amp::AutocastGuard>> active;  // one per nested `with`
};

DeviceType device_type_of(const std::string& s) { return Device(s).type(); }

}  // namespace

void bind_amp(nb::module_& top) {
  nb::module_ m = top.def_submodule("amp", "automatic mixed precision (anvil/amp.h)");
  nb::class_<Autocast>(m, "autocast", "with anvil.amp.autocast('cuda', dtype=anvil.bfloat16): … (torch.autocast)")
      .def(
          "__init__",
          [](Autocast* self, const std::string& device_type, std::optional<DType> dtype, bool enabled) {
            const DeviceType t = device_type_of(device_type);
            // PyTorch's defaults: float16 on GPUs, bfloat16 on the CPU.
            new (self) Autocast{t, dtype.value_or(t == DeviceType::CPU ? bf16 : f16), enabled, {}};
          },
          "device_type"_a, "dtype"_a = nb::none(), "enabled"_a = true)
      .def("__enter__",
           [](nb::handle self) {
             Autocast& a = nb::cast<Autocast&>(self);
             a.active.push_back(std::make_shared<amp::AutocastGuard>(a.type, a.dtype, a.enabled));
             return nb::borrow(self);
           })
      .def("__exit__", [](Autocast& a, nb::args) {
        if (!a.active.empty()) a.active.pop_back();
        return false;
      });
  m.def(
      "is_autocast_enabled", [](const std::string& t) { return amp::is_autocast_enabled(device_type_of(t)); },
      "device_type"_a, doc("amp::is_autocast_enabled"));
  m.def(
      "get_autocast_dtype", [](const std::string& t) { return amp::autocast_dtype(device_type_of(t)); },
      "device_type"_a);

  nb::class_<amp::GradScaler>(m, "GradScaler", doc("amp::GradScaler"))
      .def(
          "__init__",
          [](amp::GradScaler* self, double init_scale, double growth_factor, double backoff_factor,
             std::int64_t growth_interval, bool enabled) {
            new (self) amp::GradScaler(
                amp::GradScalerOptions{init_scale, growth_factor, backoff_factor, growth_interval, enabled});
          },
          "init_scale"_a = 65536.0, "growth_factor"_a = 2.0, "backoff_factor"_a = 0.5, "growth_interval"_a = 2000,
          "enabled"_a = true)
      .def("scale", &amp::GradScaler::scale, "outputs"_a, ANVIL_NOGIL, doc("amp::GradScaler::scale"))
      .def("unscale_", &amp::GradScaler::unscale_, "optimizer"_a, ANVIL_NOGIL, doc("amp::GradScaler::unscale_"))
      .def("step", &amp::GradScaler::step, "optimizer"_a, ANVIL_NOGIL, doc("amp::GradScaler::step"))
      .def("update", nb::overload_cast<>(&amp::GradScaler::update), ANVIL_NOGIL, doc("amp::GradScaler::update"))
      .def("update", nb::overload_cast<double>(&amp::GradScaler::update), "new_scale"_a, ANVIL_NOGIL,
           doc("amp::GradScaler::update"))
      .def("get_scale", &amp::GradScaler::get_scale, doc("amp::GradScaler::get_scale"))
      .def("is_enabled", &amp::GradScaler::is_enabled, doc("amp::GradScaler::is_enabled"))
      .def("state_dict", &amp::GradScaler::state_dict, doc("amp::GradScaler::state_dict"))
      .def("load_state_dict", &amp::GradScaler::load_state_dict, "state_dict"_a,
           doc("amp::GradScaler::load_state_dict"));
}

}  // namespace anvil::python
