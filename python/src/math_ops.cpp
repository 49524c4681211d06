// python/src/math_ops.cpp — atan2 and the integer bitwise ops of
// anvil/ops.h: anvil.atan2, copysign, bitwise_and, bitwise_or, bitwise_xor,
// bitwise_left_shift, bitwise_right_shift, and the Tensor methods of the same
// names (torch's), each one call to the C++ op without the GIL. They are
// elementwise primitives of the library, so the array API namespace calls
// them rather than composing them in Python. (The ops of one tensor are bound
// from anvil/ops.def in tensor.cpp.)
#include "common.h"

namespace anvil::python {

void bind_math_ops(nb::module_& m) {
  nb::handle t = nb::type<Tensor>();
  auto method = [t](const char* name, auto f, const char* doc) {
    nb::cpp_function_def(f, nb::scope(t), nb::name(name), nb::is_method(), "other"_a, ANVIL_NOGIL, doc);
  };
  m.def(
      "atan2", [](const Tensor& a, const Tensor& b) { return anvil::atan2(a, b); }, "input"_a, "other"_a, doc("atan2"),
      ANVIL_NOGIL);
  method(
      "atan2", [](const Tensor& a, const Tensor& b) { return a.atan2(b); }, doc("atan2"));
  m.def(
      "copysign", [](const Tensor& a, const Tensor& b) { return anvil::copysign(a, b); }, "input"_a, "other"_a,
      doc("copysign"), ANVIL_NOGIL);
  method(
      "copysign", [](const Tensor& a, const Tensor& b) { return a.copysign(b); }, doc("copysign"));

  // tensor op tensor and tensor op scalar, as free functions and methods.
#define ANVIL_MATH_BITWISE(op)                                                                                   \
  m.def(                                                                                                         \
       #op, [](const Tensor& a, const Tensor& b) { return anvil::op(a, b); }, "input"_a, "other"_a, doc(#op),    \
       ANVIL_NOGIL)                                                                                              \
      .def(                                                                                                      \
          #op, [](const Tensor& a, const Scalar& b) { return anvil::op(a, b); }, "input"_a, "other"_a, doc(#op), \
          ANVIL_NOGIL);                                                                                          \
  method(                                                                                                        \
      #op, [](const Tensor& a, const Tensor& b) { return a.op(b); }, doc(#op));                                  \
  method(                                                                                                        \
      #op, [](const Tensor& a, const Scalar& b) { return anvil::op(a, b); }, doc(#op));
  ANVIL_MATH_BITWISE(bitwise_and)
  ANVIL_MATH_BITWISE(bitwise_or)
  ANVIL_MATH_BITWISE(bitwise_xor)
  ANVIL_MATH_BITWISE(bitwise_left_shift)
  ANVIL_MATH_BITWISE(bitwise_right_shift)
#undef ANVIL_MATH_BITWISE
  // A scalar shifted by a tensor (torch.bitwise_left_shift(2, x)).
  m.def(
      "bitwise_left_shift", [](const Scalar& a, const Tensor& b) { return anvil::bitwise_left_shift(a, b); }, "input"_a,
      "other"_a, doc("bitwise_left_shift"), ANVIL_NOGIL);
  m.def(
      "bitwise_right_shift", [](const Scalar& a, const Tensor& b) { return anvil::bitwise_right_shift(a, b); },
      "input"_a, "other"_a, doc("bitwise_right_shift"), ANVIL_NOGIL);
}

}  // namespace anvil::python
