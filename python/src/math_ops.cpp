// python/src/math_ops.cpp — the elementwise ops of two operands, one per public
// row of anvil/ops.def (add, sub, …, atan2, hypot, floor_divide, bitwise_and, …):
// anvil.name and Tensor.name in the forms the row names, each one call to the
// C++ op without the GIL, documented by the row's doc column. They are
// elementwise primitives of the library, so the array API namespace calls them
// rather than composing them in Python. Also the operators // and % (the others
// are with the Tensor class in tensor.cpp). The ops of one tensor are bound
// from the same table in tensor.cpp.
#include <string_view>

#include "common.h"

namespace anvil::python {

namespace {
// PyTorch names pow's second operand `exponent` (torch.pow(input, exponent),
// x.pow(exponent)); every other binary op's is `other`.
constexpr const char* second_operand(std::string_view op) { return op == "pow" ? "exponent" : "other"; }
}  // namespace

void bind_math_ops(nb::module_& m) {
  nb::handle t = nb::type<Tensor>();
  auto method = [t](const char* name, auto f, const char* doc) {
    nb::cpp_function_def(f, nb::scope(t), nb::name(name), nb::is_method(), nb::arg(second_operand(name)), ANVIL_NOGIL,
                         doc);
  };
  // Tensor first, then a number: nanobind tries overloads in this order.
#define ANVIL_BINARY_TENSOR(Op, name)                                                       \
  m.def(                                                                                    \
      #name, [](const Tensor& a, const Tensor& b) { return anvil::name(a, b); }, "input"_a, \
      nb::arg(second_operand(#name)), doc(#name), ANVIL_NOGIL);                             \
  method(                                                                                   \
      #name, [](const Tensor& a, const Tensor& b) { return a.name(b); }, doc("Tensor::" #name));
#define ANVIL_BINARY_SCALAR(Op, name)                                                       \
  m.def(                                                                                    \
      #name, [](const Tensor& a, const Scalar& b) { return anvil::name(a, b); }, "input"_a, \
      nb::arg(second_operand(#name)), doc(#name), ANVIL_NOGIL);                             \
  method(                                                                                   \
      #name, [](const Tensor& a, const Scalar& b) { return a.name(b); }, doc("Tensor::" #name));
#define ANVIL_BINARY_SCALAR_FIRST(Op, name)                                                 \
  m.def(                                                                                    \
      #name, [](const Scalar& a, const Tensor& b) { return anvil::name(a, b); }, "input"_a, \
      nb::arg(second_operand(#name)), doc(#name), ANVIL_NOGIL);
#include "anvil/ops.def"
  // Their names, which the package re-exports (anvil/__init__.py).
  m.attr("_binary_ops") = nb::make_tuple(
#define ANVIL_BINARY_TENSOR(Op, name) #name,
#include "anvil/ops.def"
      "");

  // x // y and x % y, as torch.Tensor's operators (and 7 // x, 7 % x).
  method(
      "__floordiv__", [](const Tensor& a, const Tensor& b) { return anvil::floor_divide(a, b); }, doc("floor_divide"));
  method(
      "__floordiv__", [](const Tensor& a, const Scalar& b) { return anvil::floor_divide(a, b); }, doc("floor_divide"));
  method(
      "__rfloordiv__", [](const Tensor& a, const Scalar& b) { return anvil::floor_divide(b, a); }, doc("floor_divide"));
  method(
      "__mod__", [](const Tensor& a, const Tensor& b) { return anvil::remainder(a, b); }, doc("remainder"));
  method(
      "__mod__", [](const Tensor& a, const Scalar& b) { return anvil::remainder(a, b); }, doc("remainder"));
  method(
      "__rmod__", [](const Tensor& a, const Scalar& b) { return anvil::remainder(b, a); }, doc("remainder"));
}

}  // namespace anvil::python
