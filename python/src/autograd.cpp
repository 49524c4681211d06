// python/src/autograd.cpp — grad mode (anvil.no_grad), backward and
// anvil.autograd.grad over the C++ autograd (anvil/autograd.h).
#include <nanobind/stl/variant.h>

#include <variant>

#include "common.h"

namespace anvil::python {

void bind_autograd(nb::module_& m) {
  m.def("is_grad_enabled", &is_grad_enabled, doc("is_grad_enabled"));
  m.def("set_grad_enabled", &set_grad_enabled, "mode"_a, doc("set_grad_enabled"));
  nb::module_ a = m.def_submodule("autograd", "reverse-mode differentiation (anvil/autograd.h)");
  a.def(
      "backward",
      [](const Tensor& output, std::optional<Tensor> gradient, bool retain_graph) {
        autograd::backward(output, gradient.value_or(Tensor()), retain_graph);
      },
      "tensor"_a, "grad_tensor"_a = nb::none(), "retain_graph"_a = false, ANVIL_NOGIL);
  // torch.autograd.grad over the C++ autograd::grad: the gradients are
  // returned, and no .grad (of the inputs or of any other leaf) is touched,
  // so threads that share inputs do not disturb each other.
  using Tensors = std::variant<Tensor, std::vector<Tensor>>;
  auto as_list = [](const Tensors& t) {
    return std::holds_alternative<Tensor>(t) ? std::vector<Tensor>{std::get<Tensor>(t)}
                                             : std::get<std::vector<Tensor>>(t);
  };
  a.def(
      "grad",
      [as_list](const Tensors& outputs, const Tensors& inputs, std::optional<Tensors> grad_outputs, bool retain_graph,
                bool allow_unused) {
        const std::vector<Tensor> seeds = grad_outputs ? as_list(*grad_outputs) : std::vector<Tensor>{};
        std::vector<std::optional<Tensor>> out;  // None for an unused input (allow_unused)
        for (Tensor& g : autograd::grad(as_list(outputs), as_list(inputs), seeds, retain_graph, allow_unused))
          out.push_back(g.defined() ? std::optional<Tensor>(std::move(g)) : std::nullopt);
        return out;
      },
      "outputs"_a, "inputs"_a, "grad_outputs"_a = nb::none(), "retain_graph"_a = false, "allow_unused"_a = false,
      ANVIL_NOGIL);
}

}  // namespace anvil::python
