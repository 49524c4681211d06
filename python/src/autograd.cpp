// python/src/autograd.cpp — grad mode (anvil.no_grad), backward and
// anvil.autograd.grad over the C++ autograd (anvil/autograd.h).
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
  // torch.autograd.grad: the gradients of `output` with respect to `inputs`,
  // returned rather than accumulated. The C++ backward accumulates into
  // .grad, so each input's .grad is saved, cleared, read and restored.
  a.def(
      "grad",
      [](const Tensor& output, const std::vector<Tensor>& inputs, std::optional<Tensor> grad_output, bool retain_graph,
         bool allow_unused) {
        std::vector<Tensor> saved;
        for (const Tensor& x : inputs) {
          saved.push_back(x.grad());
          x.set_grad(Tensor());
        }
        std::vector<Tensor> out;
        try {
          autograd::backward(output, grad_output.value_or(Tensor()), retain_graph);
        } catch (...) {
          for (std::size_t i = 0; i < inputs.size(); ++i) inputs[i].set_grad(saved[i]);
          throw;
        }
        for (std::size_t i = 0; i < inputs.size(); ++i) {
          out.push_back(inputs[i].grad());
          inputs[i].set_grad(saved[i]);
          if (!out.back().defined() && !allow_unused)
            throw ValueError(detail::cat("autograd.grad: input ", i,
                                         " was not used in the graph; pass allow_unused=True to get None for it"));
        }
        return out;
      },
      "outputs"_a, "inputs"_a, "grad_outputs"_a = nb::none(), "retain_graph"_a = false, "allow_unused"_a = false,
      ANVIL_NOGIL);
}

}  // namespace anvil::python
