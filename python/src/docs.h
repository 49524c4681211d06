// python/src/docs.h — docstrings from the C++ headers' comments, so that the
// contract is written once (STYLE.md: the public headers carry it).
// python/docstrings.py turns include/anvil's comments into
// anvil_docstrings.h at build time (the rules are in its docstring), and a
// binding names the declaration it binds:
//
//   m.def("relu", &relu, "input"_a, doc("relu"), ANVIL_NOGIL);
//   nb::class_<nn::Linear, nn::Module>(m, "Linear", doc("nn::Linear"))
//
// A key with no declaration behind it does not compile, so renaming a C++
// function cannot silently leave its Python name without a docstring.
#pragma once

#include <string_view>

#include "anvil_docstrings.h"

namespace anvil::python {

// The docstring of the declaration `key` names below `anvil::` ("relu",
// "Tensor::sum", "nn::Linear", "nn::Module::to", "optim::SGD").
consteval const char* doc(std::string_view key) {
  for (const docs::Entry& e : docs::kEntries)
    if (e.key == key) return e.text;
  throw "doc(): no public declaration of that name in include/anvil (python/docstrings.py)";
}

}  // namespace anvil::python
