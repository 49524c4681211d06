// python/src/errors.cpp — anvil's errors as Python exceptions, translated
// once, in one table. Each class derives from anvil.Error (a RuntimeError)
// and from the nearest built-in, so `except IndexError` catches
// anvil.IndexError and `except MemoryError` an out-of-memory.
#include "common.h"

namespace anvil::python {
namespace {

struct ErrorClass {
  const char* name;
  PyObject* builtin;  // second base, or nullptr
  PyObject* type = nullptr;
};

PyObject* g_error = nullptr;
// The order of anvil/error.h; Error itself is g_error.
ErrorClass g_errors[] = {
    {"ShapeError", PyExc_ValueError},
    {"DTypeError", PyExc_TypeError},
    {"DeviceMismatchError", nullptr},
    {"DeviceError", nullptr},
    {"IndexError", PyExc_IndexError},
    {"ValueError", PyExc_ValueError},
    {"NotSupportedError", PyExc_NotImplementedError},
    {"NotCompiledError", PyExc_NotImplementedError},
    {"OutOfMemoryError", PyExc_MemoryError},
    {"BackendError", nullptr},
    {"IOError", PyExc_OSError},
    {"CompileError", nullptr},
    {"ImplicitSyncError", nullptr},
};
enum : int {
  kShape,
  kDType,
  kDeviceMismatch,
  kDevice,
  kIndex,
  kValue,
  kNotSupported,
  kNotCompiled,
  kOOM,
  kBackend,
  kIO,
  kCompile,
  kImplicitSync
};

void raise(int i, const char* what) { PyErr_SetString(g_errors[i].type, what); }

// ImplicitSyncError carries the sync's parts as attributes, as the C++ one
// does as fields: api, file, line, function (the user's Python line when the
// sync came from a binding, Note [Python call sites]).
void raise_implicit_sync(const ImplicitSync& e) {
  PyObject* type = g_errors[kImplicitSync].type;
  nb::object error = nb::steal(PyObject_CallOneArg(type, nb::str(e.what()).ptr()));
  if (!error.is_valid()) return;  // the call set the Python error
  error.attr("api") = e.api();
  error.attr("file") = e.file();
  error.attr("line") = e.line();
  error.attr("function") = e.function();
  PyErr_SetObject(type, error.ptr());
}

}  // namespace

void bind_errors(nb::module_& m) {
  g_error =
      PyErr_NewExceptionWithDoc("anvil.Error", "Every error anvil raises (anvil::Error).", PyExc_RuntimeError, nullptr);
  m.attr("Error") = nb::handle(g_error);
  for (ErrorClass& e : g_errors) {
    nb::object bases = e.builtin != nullptr ? nb::make_tuple(nb::handle(g_error), nb::handle(e.builtin))
                                            : nb::make_tuple(nb::handle(g_error));
    const std::string qualified = std::string("anvil.") + e.name;
    e.type = PyErr_NewException(qualified.c_str(), bases.ptr(), nullptr);
    if (e.type == nullptr) throw nb::python_error();
    m.attr(e.name) = nb::handle(e.type);
  }
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const ShapeError& e) {
      raise(kShape, e.what());
    } catch (const DTypeError& e) {
      raise(kDType, e.what());
    } catch (const DeviceMismatch& e) {
      raise(kDeviceMismatch, e.what());
    } catch (const DeviceError& e) {
      raise(kDevice, e.what());
    } catch (const anvil::IndexError& e) {
      raise(kIndex, e.what());
    } catch (const anvil::ValueError& e) {
      raise(kValue, e.what());
    } catch (const NotSupported& e) {
      raise(kNotSupported, e.what());
    } catch (const NotCompiled& e) {
      raise(kNotCompiled, e.what());
    } catch (const OutOfMemory& e) {
      raise(kOOM, e.what());
    } catch (const BackendError& e) {
      raise(kBackend, e.what());
    } catch (const anvil::IOError& e) {
      raise(kIO, e.what());
    } catch (const CompileError& e) {
      raise(kCompile, e.what());
    } catch (const ImplicitSync& e) {
      raise_implicit_sync(e);
    } catch (const Error& e) {
      PyErr_SetString(g_error, e.what());
    }
  });
}

}  // namespace anvil::python
