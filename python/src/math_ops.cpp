// python/src/math_ops.cpp — the binary ops of anvil/ops.h with uneven
// signatures: anvil.atan2, copysign, hypot, logaddexp, floor_divide (//),
// remainder (%), bitwise_and, bitwise_or, bitwise_xor,
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
  m.def(
      "hypot", [](const Tensor& a, const Tensor& b) { return anvil::hypot(a, b); }, "input"_a, "other"_a, doc("hypot"),
      ANVIL_NOGIL);
  method(
      "hypot", [](const Tensor& a, const Tensor& b) { return a.hypot(b); }, doc("hypot"));
  m.def(
      "logaddexp", [](const Tensor& a, const Tensor& b) { return anvil::logaddexp(a, b); }, "input"_a, "other"_a,
      doc("logaddexp"), ANVIL_NOGIL);
  method(
      "logaddexp", [](const Tensor& a, const Tensor& b) { return a.logaddexp(b); }, doc("logaddexp"));

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
  ANVIL_MATH_BITWISE(floor_divide)
  ANVIL_MATH_BITWISE(remainder)
#undef ANVIL_MATH_BITWISE
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
  // A scalar shifted by a tensor (torch.bitwise_left_shift(2, x)).
  m.def(
      "bitwise_left_shift", [](const Scalar& a, const Tensor& b) { return anvil::bitwise_left_shift(a, b); }, "input"_a,
      "other"_a, doc("bitwise_left_shift"), ANVIL_NOGIL);
  m.def(
      "bitwise_right_shift", [](const Scalar& a, const Tensor& b) { return anvil::bitwise_right_shift(a, b); },
      "input"_a, "other"_a, doc("bitwise_right_shift"), ANVIL_NOGIL);
}

}  // namespace anvil::python
