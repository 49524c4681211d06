// python/src/interop.cpp — tensors in and out of Python without copies where
// the memory allows: .numpy() and __dlpack__ view anvil's storage (CPU, and
// CUDA through DLPack), anvil.from_dlpack and anvil.tensor(numpy array) read
// the producer's; nested lists and numbers become tensors through one host
// buffer.
#include <nanobind/ndarray.h>

#include <cstring>
#include <string>

#include "anvil/dlpack.h"
#include "common.h"

namespace anvil::python {
namespace {

// A DLManagedTensor (anvil/dlpack.h) as the owner of Python-side views: its
// deleter runs when the last of them dies.
nb::capsule owner_of(DLManagedTensor* m) {
  return nb::capsule(m, [](void* p) noexcept {
    auto* managed = static_cast<DLManagedTensor*>(p);
    managed->deleter(managed);
  });
}

// The tensor's memory as an nb::ndarray of framework F (anvil::to_dlpack,
// which waits for a CUDA device's queue first).
template <typename... F>
nb::ndarray<F...> export_array(const Tensor& t) {
  DLManagedTensor* m = nullptr;
  {
    nb::gil_scoped_release release;
    m = to_dlpack(t);
  }
  const DLTensor& dl = m->dl_tensor;
  nb::capsule owner = owner_of(m);
  std::vector<std::size_t> shape(static_cast<std::size_t>(dl.ndim));
  for (std::size_t i = 0; i < shape.size(); ++i) shape[i] = static_cast<std::size_t>(dl.shape[i]);
  const nb::dlpack::dtype dtype{dl.dtype.code, dl.dtype.bits, dl.dtype.lanes};
  return nb::ndarray<F...>(dl.data, shape.size(), shape.data(), owner, dl.strides, dtype, dl.device.device_type,
                           dl.device.device_id);
}

// DLPack's "dltensor" capsule: a consumer renames it "used_dltensor" and
// calls the deleter itself; one nobody consumed is deleted with the capsule.
nb::object dltensor_capsule(DLManagedTensor* m) {
  PyObject* capsule = PyCapsule_New(m, "dltensor", [](PyObject* self) {
    if (!PyCapsule_IsValid(self, "dltensor")) return;  // consumed
    auto* managed = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(self, "dltensor"));
    managed->deleter(managed);
  });
  if (capsule == nullptr) {
    m->deleter(m);
    throw nb::python_error();
  }
  return nb::steal(capsule);
}

}  // namespace

nb::object to_numpy(const Tensor& t) {
  if (!t.device().is_cpu())
    throw nb::type_error(
        ("numpy: the tensor is on " + t.device().str() + "; NumPy reads host memory only, so copy it with .cpu() first")
            .c_str());
  if (t.dtype() == DType::BF16)
    throw nb::type_error("numpy: NumPy has no bfloat16; convert with .to(anvil.float32) first");
  return nb::cast(export_array<nb::numpy>(t));
}

// The array API's __dlpack__ (2023.12). max_version: nanobind makes the
// unversioned (0.x) capsule, which the standard lets a producer return
// whatever the consumer's maximum. dl_device: the tensor's own device, or the
// CPU (a copy); copy=False where a copy is needed is a BufferError.
nb::object dlpack_capsule(const Tensor& t, nb::handle stream, nb::handle max_version, nb::handle dl_device,
                          std::optional<bool> copy) {
  (void)stream;  // to_dlpack synchronises the device, so any stream may read
  (void)max_version;
  Tensor out = t;
  if (!dl_device.is_none()) {
    const auto [type, id] = nb::cast<std::pair<int, int>>(dl_device);
    const bool same = (type == kDLCPU && id == 0 && t.device().is_cpu()) ||
                      (type == kDLCUDA && t.device() == Device(DeviceType::CUDA, id));
    if (!same) {
      if (type != kDLCPU || id != 0)
        throw nb::buffer_error(detail::cat("__dlpack__: dl_device (", type, ", ", id, ") is not ", t.device(),
                                           "'s and not the CPU (1, 0); anvil exports to its own device or the CPU")
                                   .c_str());
      if (copy == false)
        throw nb::buffer_error(
            detail::cat("__dlpack__: dl_device is the CPU but the tensor is on ", t.device(), " and copy=False")
                .c_str());
      nb::gil_scoped_release release;
      out = t.cpu();
    }
  }
  if (copy == true && out.is_same(t)) {
    nb::gil_scoped_release release;
    out = t.clone();
  }
  DLManagedTensor* m = nullptr;
  {
    nb::gil_scoped_release release;
    m = to_dlpack(out);
  }
  return dltensor_capsule(m);
}

nb::tuple dlpack_device(const Tensor& t) {
  const Device d = t.device();
  if (d.type() == DeviceType::CPU) return nb::make_tuple(static_cast<int>(kDLCPU), 0);
  if (d.type() == DeviceType::CUDA) return nb::make_tuple(static_cast<int>(kDLCUDA), d.index());
  throw NotSupported(detail::cat("__dlpack_device__: ", d, " has no DLPack device type (CPU and CUDA only)"));
}

Tensor from_dlpack(nb::handle obj) {
  if (nb::isinstance<Tensor>(obj)) return nb::cast<Tensor>(obj);
  nb::ndarray<> array;
  try {
    array = nb::cast<nb::ndarray<>>(obj);
  } catch (const nb::cast_error&) {
    throw nb::type_error(("from_dlpack: a " + std::string(nb::type_name(obj.type()).c_str()) +
                          " has neither __dlpack__ nor the buffer protocol")
                             .c_str());
  }
  // The producer's array (through whichever protocol nanobind read it) as a
  // DLManagedTensor for anvil::from_dlpack. Dropping the array may run
  // Python code (NumPy's deallocator), so the deleter takes the GIL, from
  // whichever thread the last view dies on.
  struct Imported {
    nb::ndarray<> array;
    std::vector<std::int64_t> shape, strides;
    DLManagedTensor managed{};
  };
  auto* imported = new Imported{array, {}, {}, {}};
  for (std::size_t i = 0; i < array.ndim(); ++i) {
    imported->shape.push_back(static_cast<std::int64_t>(array.shape(i)));
    imported->strides.push_back(array.stride(i));
  }
  DLTensor& dl = imported->managed.dl_tensor;
  dl.data = const_cast<void*>(array.data());
  dl.device = {static_cast<DLDeviceType>(array.device_type()), array.device_id()};
  dl.ndim = static_cast<std::int32_t>(array.ndim());
  dl.dtype = {array.dtype().code, array.dtype().bits, array.dtype().lanes};
  dl.shape = imported->shape.data();
  dl.strides = imported->strides.data();
  imported->managed.manager_ctx = imported;
  imported->managed.deleter = [](DLManagedTensor* self) {
    if (!Py_IsInitialized()) return;  // at exit, the producer is gone already
    nb::gil_scoped_acquire gil;
    delete static_cast<Imported*>(self->manager_ctx);
  };
  try {
    return anvil::from_dlpack(&imported->managed);
  } catch (...) {
    delete imported;  // not taken (anvil/dlpack.h); the GIL is held here
    throw;
  }
}

namespace {

// Nested lists and numbers: the shape from the nesting, the values into one
// host buffer, the dtype as torch.tensor infers it (any float: f32; else any
// int: i64; else bool).
struct Flattened {
  std::vector<std::int64_t> shape;
  std::vector<double> floats;
  std::vector<std::int64_t> ints;
  bool any_float = false, any_int = false;
  std::size_t count = 0;
};

void flatten_into(nb::handle h, int depth, Flattened& out) {
  PyObject* o = h.ptr();
  if (PyList_Check(o) || PyTuple_Check(o)) {
    const auto n = static_cast<std::int64_t>(PySequence_Fast_GET_SIZE(o));
    if (static_cast<int>(out.shape.size()) == depth) {
      if (out.count > 0 && depth == 0) throw ShapeError("tensor: inconsistent nesting");
      out.shape.push_back(n);
    } else if (static_cast<int>(out.shape.size()) < depth || out.shape[static_cast<std::size_t>(depth)] != n) {
      throw ShapeError(detail::cat("tensor: a list of ", n, " elements at depth ", depth,
                                   " where its siblings have another length; nested lists must be rectangular"));
    }
    for (std::int64_t i = 0; i < n; ++i) flatten_into(PySequence_Fast_GET_ITEM(o, i), depth + 1, out);
    return;
  }
  if (static_cast<int>(out.shape.size()) != depth)
    throw ShapeError("tensor: a number where a list was expected; nested lists must be rectangular");
  if (nb::isinstance<Tensor>(h)) {
    const Tensor t = nb::cast<Tensor>(h);
    if (t.numel() != 1) throw ShapeError("tensor: only one-element tensors can be list elements");
    const nb::object v = item(t);
    flatten_into(v, depth, out);
    return;
  }
  Scalar s;
  if (!nb::try_cast<Scalar>(h, s))
    throw nb::type_error(
        ("tensor: cannot make a tensor element from a " + std::string(nb::type_name(h.type()).c_str())).c_str());
  if (s.is_floating()) out.any_float = true;
  if (s.kind() == Scalar::Kind::Int) out.any_int = true;
  out.floats.push_back(s.to_double());
  out.ints.push_back(s.to_int());
  ++out.count;
}

}  // namespace

Tensor tensor_from_data(nb::handle data, std::optional<DType> dtype, std::optional<Device> device) {
  const Device d = device_or_default(device);
  // torch.tensor copies its input: a view (or the tensor), then one copy
  // that converts and moves it.
  auto fresh = [&](const Tensor& view) {
    nb::gil_scoped_release release;
    const Tensor converted = dtype ? view.to(*dtype) : view;
    if (!converted.is_same(view)) return converted.to(d);
    return converted.device() == d ? converted.clone() : converted.copy_to(d);
  };
  if (nb::isinstance<Tensor>(data)) return fresh(nb::cast<Tensor>(data).detach());
  PyObject* o = data.ptr();
  const bool listlike = PyList_Check(o) || PyTuple_Check(o);
  if (!listlike && !PyBool_Check(o) && !PyLong_Check(o) && !PyFloat_Check(o) &&
      (nb::hasattr(data, "__dlpack__") || PyObject_CheckBuffer(o) || nb::hasattr(data, "__array__"))) {
    nb::object source = nb::borrow(data);
    // NumPy arrays (reversed views included), NumPy scalars and buffers
    // become C-contiguous arrays first: this copies anyway. Other producers
    // (PyTorch, on any device) are read through DLPack.
    const bool numpy_like = nb::hasattr(data, "__array_interface__") || !nb::hasattr(data, "__dlpack__");
    if (numpy_like) source = nb::module_::import_("numpy").attr("asarray")(data, "order"_a = "C");
    return fresh(from_dlpack(source));
  }
  Flattened f;
  flatten_into(data, 0, f);
  Tensor host;
  const Shape shape(f.shape);
  if (f.any_float) {
    host = from_host(f.floats.data(), shape, f64, cpu()).to(dtype.value_or(f32));
  } else if (f.any_int) {
    host = from_host(f.ints.data(), shape, i64, cpu());
    if (dtype) host = host.to(*dtype);
  } else {
    std::vector<std::uint8_t> bytes(f.ints.begin(), f.ints.end());
    host = from_host(bytes.data(), shape, boolean, cpu());
    if (dtype) host = host.to(*dtype);
  }
  return host.to(d);
}

nb::object item(const Tensor& t) {
  const SourceLocation site = python_call_site();  // Note [Python call sites]
  if (is_floating(t.dtype())) {
    double v;
    {
      nb::gil_scoped_release release;
      v = t.item<double>(site);
    }
    return nb::float_(v);
  }
  if (t.dtype() == DType::Bool) {
    bool v;
    {
      nb::gil_scoped_release release;
      v = t.item<bool>(site);
    }
    return nb::bool_(v);
  }
  std::int64_t v;
  {
    nb::gil_scoped_release release;
    v = t.item<std::int64_t>(site);
  }
  return nb::int_(v);
}

namespace {
template <typename T, typename Make>
nb::object nest(const std::vector<T>& values, const Shape& shape, int dim, std::size_t& at, Make make) {
  if (dim == shape.size()) return make(values[at++]);
  nb::list out;
  for (std::int64_t i = 0; i < shape[dim]; ++i) out.append(nest(values, shape, dim + 1, at, make));
  return out;
}
}  // namespace

nb::object tolist(const Tensor& t) {
  const SourceLocation site = python_call_site();  // Note [Python call sites]
  std::size_t at = 0;
  if (is_floating(t.dtype())) {
    std::vector<double> v;
    {
      nb::gil_scoped_release release;
      v = t.to_vector<double>(site);
    }
    return nest(v, t.shape(), 0, at, [](double x) { return nb::object(nb::float_(x)); });
  }
  if (t.dtype() == DType::Bool) {
    std::vector<unsigned char> v;
    {
      nb::gil_scoped_release release;
      v = t.to_vector<unsigned char>(site);
    }
    return nest(v, t.shape(), 0, at, [](unsigned char x) { return nb::object(nb::bool_(x != 0)); });
  }
  std::vector<std::int64_t> v;
  {
    nb::gil_scoped_release release;
    v = t.to_vector<std::int64_t>(site);
  }
  return nest(v, t.shape(), 0, at, [](std::int64_t x) { return nb::object(nb::int_(x)); });
}

}  // namespace anvil::python
