// python/src/optim.cpp — anvil.optim: SGD and Adam (anvil/optim.h), their
// fused steps where the device has them.
#include "common.h"

namespace anvil::python {

void bind_optim(nb::module_& top) {
  nb::module_ m = top.def_submodule("optim", "optimisers (anvil/optim.h)");
  nb::class_<optim::Optimizer>(m, "Optimizer", doc("optim::Optimizer"))
      .def("step", &optim::Optimizer::step, ANVIL_NOGIL, doc("optim::Optimizer::step"))
      .def("zero_grad", &optim::Optimizer::zero_grad, doc("optim::Optimizer::zero_grad"))
      .def("state_dict", &optim::Optimizer::state_dict, doc("optim::Optimizer::state_dict"))
      .def("load_state_dict", &optim::Optimizer::load_state_dict, "state_dict"_a, ANVIL_NOGIL,
           doc("optim::Optimizer::load_state_dict"))
      .def_prop_ro("params", &optim::Optimizer::params);
  nb::class_<optim::SGD, optim::Optimizer>(m, "SGD", doc("optim::SGD"))
      .def(
          "__init__",
          [](optim::SGD* self, std::vector<Tensor> params, double lr, double momentum, double dampening,
             double weight_decay, bool nesterov) {
            new (self) optim::SGD(std::move(params), optim::SGDOptions{.lr = lr,
                                                                       .momentum = momentum,
                                                                       .dampening = dampening,
                                                                       .weight_decay = weight_decay,
                                                                       .nesterov = nesterov});
          },
          "params"_a, "lr"_a = 0.01, "momentum"_a = 0.0, "dampening"_a = 0.0, "weight_decay"_a = 0.0,
          "nesterov"_a = false)
      .def_prop_rw(
          "lr", [](optim::SGD& o) { return o.options().lr; }, [](optim::SGD& o, double lr) { o.options().lr = lr; });
  nb::class_<optim::Adam, optim::Optimizer>(m, "Adam", doc("optim::Adam"))
      .def(
          "__init__",
          [](optim::Adam* self, std::vector<Tensor> params, double lr, std::pair<double, double> betas, double eps,
             double weight_decay) {
            new (self) optim::Adam(
                std::move(params),
                optim::AdamOptions{
                    .lr = lr, .beta1 = betas.first, .beta2 = betas.second, .eps = eps, .weight_decay = weight_decay});
          },
          "params"_a, "lr"_a = 1e-3, "betas"_a = std::pair<double, double>(0.9, 0.999), "eps"_a = 1e-8,
          "weight_decay"_a = 0.0)
      .def_prop_rw(
          "lr", [](optim::Adam& o) { return o.options().lr; }, [](optim::Adam& o, double lr) { o.options().lr = lr; });
}

}  // namespace anvil::python
