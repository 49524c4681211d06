// python/src/array_api.cpp — what the Python array API standard (2023.12) asks
// of the tensor object beyond PyTorch's surface: __array_namespace__,
// to_device, the operators //, %, &, |, ^, << and >>, ~ that is bitwise on
// integers, and .T on every rank. The namespace itself is Python over the bound
// ops (python/anvil/array_api.py); these methods forward to its functions, so
// each rule is written once. Bound here rather than in Python so that the
// stubs name them as Tensor methods.
#include "common.h"

namespace anvil::python {

namespace {

nb::object array_api() { return nb::module_::import_("anvil.array_api"); }

// A method on the already bound anvil.Tensor; `replace` drops a binding of
// the same name first (otherwise nanobind adds an overload after it).
template <typename F, typename... Extra>
void method(nb::handle tensor, const char* name, bool replace, F&& f, const Extra&... extra) {
  if (replace && nb::hasattr(tensor, name)) nb::delattr(tensor, name);
  nb::cpp_function_def(std::forward<F>(f), nb::scope(tensor), nb::name(name), nb::is_method(), extra...);
}

void in_place_operator(nb::handle tensor, const char* name, const char* fn) {
  method(tensor, name, false, [fn](nb::handle self, nb::handle other) {
    const Tensor result = nb::cast<Tensor>(array_api().attr(fn)(self, other));
    Tensor& x = nb::cast<Tensor&>(self);
    {
      nb::gil_scoped_release release;
      x.copy_(result);
    }
    return nb::borrow(self);
  });
}

// self <op> other, other <op> self and self <op>= other (in place: views of
// self see it) through the namespace function `fn`.
void binary_operator(nb::handle tensor, const char* op, const char* fn) {
  const std::string name = std::string("__") + op + "__";
  const std::string reflected = std::string("__r") + op + "__";
  const std::string in_place = std::string("__i") + op + "__";
  method(tensor, name.c_str(), false,
         [fn](nb::handle self, nb::handle other) { return array_api().attr(fn)(self, other); });
  method(tensor, reflected.c_str(), false,
         [fn](nb::handle self, nb::handle other) { return array_api().attr(fn)(other, self); });
  in_place_operator(tensor, in_place.c_str(), fn);
}

}  // namespace

void bind_array_api(nb::module_& m) {
  (void)m;
  nb::handle t = nb::type<Tensor>();
  method(
      t, "__array_namespace__", false,
      [](nb::handle, nb::handle api_version) { return array_api().attr("_namespace")(api_version); }, nb::kw_only(),
      "api_version"_a = nb::none(), "The array API namespace, anvil.array_api (docs/python.md)");
  method(
      t, "to_device", false,
      [](const Tensor& x, Device d, nb::handle stream) {
        if (!stream.is_none())
          throw NotSupported("to_device: a stream argument; anvil orders work by each device's own queue; pass None");
        nb::gil_scoped_release release;
        return x.to(d);
      },
      "device"_a, nb::kw_only(), "stream"_a = nb::none(), "x on device (the same tensor when already there)");
  binary_operator(t, "floordiv", "floor_divide");
  binary_operator(t, "mod", "remainder");
  binary_operator(t, "and", "bitwise_and");
  binary_operator(t, "or", "bitwise_or");
  binary_operator(t, "xor", "bitwise_xor");
  binary_operator(t, "lshift", "bitwise_left_shift");
  binary_operator(t, "rshift", "bitwise_right_shift");
  in_place_operator(t, "__ipow__", "pow");
  // ~x on an integer tensor is bitwise, as in the standard and PyTorch (it was
  // logical_not): in two's complement ~x = -x - 1, and 255 - x for uint8 (the
  // same rule as anvil.array_api.bitwise_invert).
  method(
      t, "__invert__", true,
      [](const Tensor& x) {
        if (x.dtype() == boolean) return logical_not(x);
        if (x.dtype() == u8) return Scalar(255) - x;
        if (x.dtype() == i32 || x.dtype() == i64) return -x - Scalar(1);
        throw DTypeError(detail::cat("__invert__: expected a bool or integer tensor, got ", x.dtype()));
      },
      ANVIL_NOGIL, "~x: logical not of a bool tensor, bitwise not of an integer one");
  // x.T reverses the dims, as NumPy's and PyTorch's (it returned x unchanged above 2 dims).
  nb::object getter = nb::cpp_function(
      [](const Tensor& x) {
        std::vector<std::int64_t> dims(static_cast<std::size_t>(x.dim()));
        for (int i = 0; i < x.dim(); ++i) dims[static_cast<std::size_t>(i)] = x.dim() - 1 - i;
        return x.permute(Dims(dims));
      },
      nb::is_method());
  if (nb::hasattr(t, "T")) nb::delattr(t, "T");
  nb::setattr(t, "T",
              nb::borrow(reinterpret_cast<PyObject*>(&PyProperty_Type))(getter, nb::none(), nb::none(),
                                                                        "x with its dims reversed"));
}

}  // namespace anvil::python
