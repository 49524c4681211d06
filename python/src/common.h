// python/src/common.h — what every file of the extension shares: the type
// casters for anvil's small values (Scalar, Shape, Dims) and the helpers that
// turn Python arguments into C++ ones. The bindings stay thin (STYLE.md
// "Bindings"): each def calls one C++ function.
#pragma once

#include <nanobind/nanobind.h>
#include <nanobind/stl/array.h>
#include <nanobind/stl/function.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <optional>
#include <vector>

#include "anvil/anvil.h"
#include "docs.h"

namespace nb = nanobind;

// Every op runs without the GIL, so Python threads overlap with compute.
#define ANVIL_NOGIL nb::call_guard<nb::gil_scoped_release>()

namespace nanobind::detail {

// A Python bool, int or float (or a NumPy scalar, when converting) as an
// anvil::Scalar that keeps its category: x + 2 stays integral, x + 2.5 not.
template <>
struct type_caster<anvil::Scalar> {
  NB_TYPE_CASTER(anvil::Scalar, const_name("bool | int | float"))
  bool from_python(handle src, uint8_t flags, cleanup_list*) noexcept {
    PyObject* o = src.ptr();
    if (PyBool_Check(o)) {
      value = anvil::Scalar(o == Py_True);
      return true;
    }
    if (PyFloat_Check(o)) {
      value = anvil::Scalar(PyFloat_AS_DOUBLE(o));
      return true;
    }
    const bool convert = (flags & static_cast<uint8_t>(cast_flags::convert)) != 0;
    if (PyLong_Check(o) || (convert && !nb_type_check(reinterpret_cast<PyObject*>(Py_TYPE(o))) && PyIndex_Check(o))) {
      int overflow = 0;
      object index = steal(PyNumber_Index(o));
      if (!index.is_valid()) {
        PyErr_Clear();
        return false;
      }
      const long long v = PyLong_AsLongLongAndOverflow(index.ptr(), &overflow);
      if (overflow != 0 || (v == -1 && PyErr_Occurred())) {
        PyErr_Clear();
        return false;
      }
      value = anvil::Scalar(static_cast<std::int64_t>(v));
      return true;
    }
    if (convert && !nb_type_check(reinterpret_cast<PyObject*>(Py_TYPE(o))) && Py_TYPE(o)->tp_as_number != nullptr &&
        Py_TYPE(o)->tp_as_number->nb_float != nullptr) {
      const double v = PyFloat_AsDouble(o);
      if (v == -1.0 && PyErr_Occurred()) {
        PyErr_Clear();
        return false;
      }
      value = anvil::Scalar(v);
      return true;
    }
    return false;
  }
  static handle from_cpp(const anvil::Scalar& s, rv_policy, cleanup_list*) noexcept {
    if (s.is_bool()) return handle(s.to<bool>() ? Py_True : Py_False).inc_ref();
    if (s.is_floating()) return PyFloat_FromDouble(s.to_double());
    return PyLong_FromLongLong(s.to_int());
  }
};

// A shape: a tuple or list of ints (anvil.zeros((2, 3))); returned as a tuple.
template <>
struct type_caster<anvil::Shape> {
  NB_TYPE_CASTER(anvil::Shape, const_name("tuple[int, ...]"))
  bool from_python(handle src, uint8_t, cleanup_list*) noexcept {
    if (!PyTuple_Check(src.ptr()) && !PyList_Check(src.ptr())) return false;
    const Py_ssize_t n = PySequence_Fast_GET_SIZE(src.ptr());
    if (n > anvil::kMaxDims) return false;
    std::vector<std::int64_t> dims(static_cast<std::size_t>(n));
    for (Py_ssize_t i = 0; i < n; ++i) {
      PyObject* item = PySequence_Fast_GET_ITEM(src.ptr(), i);
      if (!PyIndex_Check(item) || PyBool_Check(item)) return false;
      dims[static_cast<std::size_t>(i)] = PyLong_AsLongLong(item);
      if (PyErr_Occurred()) {
        PyErr_Clear();
        return false;
      }
    }
    value = anvil::Shape(dims);
    return true;
  }
  static handle from_cpp(const anvil::Shape& s, rv_policy, cleanup_list*) noexcept {
    PyObject* t = PyTuple_New(s.size());
    for (int i = 0; i < s.size(); ++i) PyTuple_SET_ITEM(t, i, PyLong_FromLongLong(s[i]));
    return t;
  }
};

// The dims of a reduction or permute: None (all), one int or a sequence.
template <>
struct type_caster<anvil::Dims> {
  NB_TYPE_CASTER(anvil::Dims, const_name("int | tuple[int, ...] | None"))
  bool from_python(handle src, uint8_t, cleanup_list*) noexcept {
    PyObject* o = src.ptr();
    if (o == Py_None) {
      value = anvil::Dims();
      return true;
    }
    if (PyLong_Check(o) && !PyBool_Check(o)) {
      const long long d = PyLong_AsLongLong(o);
      if (PyErr_Occurred()) {
        PyErr_Clear();
        return false;
      }
      value = anvil::Dims(static_cast<std::int64_t>(d));
      return true;
    }
    if (!PyTuple_Check(o) && !PyList_Check(o)) return false;
    const Py_ssize_t n = PySequence_Fast_GET_SIZE(o);
    if (n > anvil::kMaxDims) return false;
    std::vector<std::int64_t> dims(static_cast<std::size_t>(n));
    for (Py_ssize_t i = 0; i < n; ++i) {
      PyObject* item = PySequence_Fast_GET_ITEM(o, i);
      if (!PyLong_Check(item) || PyBool_Check(item)) return false;
      dims[static_cast<std::size_t>(i)] = PyLong_AsLongLong(item);
    }
    value = anvil::Dims(dims);
    return true;
  }
  static handle from_cpp(const anvil::Dims& d, rv_policy, cleanup_list*) noexcept {
    PyObject* t = PyTuple_New(d.size());
    for (int i = 0; i < d.size(); ++i) PyTuple_SET_ITEM(t, i, PyLong_FromLongLong(d[i]));
    return t;
  }
};

}  // namespace nanobind::detail

namespace anvil::python {

using namespace nb::literals;

// device=None means the default device (the CPU, or a DeviceScope's).
inline Device device_or_default(const std::optional<Device>& d) { return d ? *d : default_device(); }

// The size of a factory: zeros(2, 3) or zeros((2, 3)) or zeros([2, 3]).
Shape shape_from_args(const nb::args& args, const char* op);

// anvil.tensor(data): nested lists of numbers, a number, a NumPy array (or
// anything with __array__ / the buffer protocol), an anvil tensor (copied).
Tensor tensor_from_data(nb::handle data, std::optional<DType> dtype, std::optional<Device> device);

// A tensor viewing a DLPack producer's memory (NumPy, PyTorch, CuPy): no
// copy; the producer's buffer lives as long as the tensor.
Tensor from_dlpack(nb::handle obj);

// Python's bool, int or float of a one-element tensor; nested lists of them.
nb::object item(const Tensor& t);
nb::object tolist(const Tensor& t);
// A NumPy array viewing a CPU tensor's memory (TypeError elsewhere).
nb::object to_numpy(const Tensor& t);
// DLPack: the capsule and (device type, id) of a CPU or CUDA tensor; with
// dl_device = (kDLCPU, 0) a copy on the CPU of a tensor anywhere.
nb::object dlpack_capsule(const Tensor& t, nb::handle stream, nb::handle max_version, nb::handle dl_device,
                          std::optional<bool> copy);
nb::tuple dlpack_device(const Tensor& t);

// x[key] and x[key] = value (python/src/indexing.cpp).
Tensor getitem(const Tensor& x, nb::handle key);
void setitem(Tensor& x, nb::handle key, nb::handle value);

void bind_errors(nb::module_& m);
void bind_device(nb::module_& m);
void bind_tensor(nb::module_& m);
void bind_array_api(nb::module_& m);  // after bind_tensor: it adds to anvil.Tensor
void bind_indexing(nb::module_& m);   // likewise
void bind_math_ops(nb::module_& m);   // likewise
void bind_autograd(nb::module_& m);
void bind_nn(nb::module_& m);
void bind_optim(nb::module_& m);
void bind_data(nb::module_& m);
void bind_io(nb::module_& m);
void bind_amp(nb::module_& m);
void bind_ledger(nb::module_& m);
void bind_dist(nb::module_& m);
void bind_profiler(nb::module_& m);

// The Python line calling into anvil, for the sync sentinel's call sites
// (Note [Python call sites] in profiler.cpp).
SourceLocation python_call_site();

}  // namespace anvil::python
