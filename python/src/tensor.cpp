// python/src/tensor.cpp — anvil.Tensor: its methods and operators, the
// factories and the free ops (anvil/tensor.h, anvil/ops.h), each one call to
// the C++ function of the same name, without the GIL.
#include <nanobind/operators.h>
#include <nanobind/stl/complex.h>

#include <sstream>

#include "common.h"
#include "core/tensor_impl.h"

namespace anvil::python {

Shape shape_from_args(const nb::args& args, const char* op) {
  if (args.size() == 1 && (nb::isinstance<nb::tuple>(args[0]) || nb::isinstance<nb::list>(args[0])))
    return nb::cast<Shape>(args[0]);
  std::vector<std::int64_t> dims;
  for (nb::handle h : args) {
    if (!PyIndex_Check(h.ptr()) || PyBool_Check(h.ptr()))
      throw nb::type_error(
          (std::string(op) + ": the size is ints or one tuple of ints, got a " + nb::type_name(h.type()).c_str())
              .c_str());
    dims.push_back(nb::cast<std::int64_t>(h));
  }
  return Shape(dims);
}

namespace {

Tensor finish(Tensor t, bool requires_grad) {
  if (requires_grad) t.requires_grad_(true);
  return t;
}

Tensor reshape_args(const Tensor& x, const nb::args& args) { return x.reshape(shape_from_args(args, "reshape")); }

std::string repr(const Tensor& t) {
  const SourceLocation site = python_call_site();  // Note [Python call sites]
  nb::gil_scoped_release release;
  return to_string(t, site);
}

// x.item<T>() for __float__, __int__, __bool__, __index__: the call site
// read with the GIL held, the wait without it.
template <typename T>
T item_at_site(const Tensor& x) {
  const SourceLocation site = python_call_site();
  nb::gil_scoped_release release;
  return x.item<T>(site);
}

nb::object grad_or_none(const Tensor& t) {
  Tensor g = t.grad();
  if (!g.defined()) return nb::none();
  return nb::cast(g);
}

// Note [No-op conversions return self]
// PyTorch's `x.cuda(1) is x` is True when x is already there, and so are
// x.to(its device or dtype), x.contiguous() of a contiguous x, x.float() of
// an f32 x. The C++ calls return the same tensor (is_same); nanobind would
// wrap it in a new Python object, so these bindings hand back `self`.
nb::object self_or(nb::handle self, Tensor r) {
  if (r.is_same(nb::cast<const Tensor&>(self))) return nb::borrow(self);
  return nb::cast(std::move(r));
}

// Binds fn(x) -> Tensor, run without the GIL, returning `self` when fn
// returned x itself.
template <typename F>
auto keeping_self(F fn) {
  return [fn](nb::handle self) -> nb::object {
    const Tensor& x = nb::cast<const Tensor&>(self);
    Tensor r;
    {
      nb::gil_scoped_release release;
      r = fn(x);
    }
    return self_or(self, std::move(r));
  };
}

// x.to(device), x.to(dtype), x.to(device, dtype), x.to(other tensor), with
// device= and dtype= keywords; x itself when nothing changes.
nb::object to(nb::handle self, nb::args args, std::optional<Device> device, std::optional<DType> dtype, bool copy) {
  const Tensor& x = nb::cast<const Tensor&>(self);
  for (nb::handle a : args) {
    if (nb::isinstance<DType>(a)) {
      dtype = nb::cast<DType>(a);
    } else if (nb::isinstance<Tensor>(a)) {
      const Tensor o = nb::cast<Tensor>(a);
      device = o.device();
      dtype = o.dtype();
    } else {
      device = nb::cast<Device>(a);
    }
  }
  const SourceLocation site = python_call_site();
  Tensor out = x;
  {
    nb::gil_scoped_release release;
    if (dtype) out = out.to(*dtype);
    if (device) out = copy && out.is_same(x) ? out.copy_to(*device, site) : out.to(*device, site);
    if (copy && out.is_same(x)) out = out.clone();
  }
  return self_or(self, std::move(out));
}

// The address of x's first element where its device can use it: the host
// pointer on the CPU, the device pointer on CUDA (as torch's data_ptr()).
// An OpenCL buffer is an opaque handle whose address the driver never shows.
std::uintptr_t data_address(const Tensor& x) {
  const Device d = x.device();
  if (d.is_cpu()) return reinterpret_cast<std::uintptr_t>(x.raw_data_ptr());
  if (d.type() != DeviceType::CUDA)
    throw NotSupported(detail::cat("data_ptr: ", d,
                                   " memory is an OpenCL buffer object, which has no address; expected a cpu or cuda "
                                   "tensor, got one on ",
                                   d, "; use .cpu() to read it, or shares_storage() to compare tensors"));
  const detail::TensorImpl& impl = x.impl_ref();
  if (impl.storage()->data() == nullptr) return 0;
  return reinterpret_cast<std::uintptr_t>(impl.storage()->data()) +
         static_cast<std::uintptr_t>(x.offset()) * element_size(x.dtype());
}

// torch.unique's Python result: the values alone, or a tuple of the values
// and what was asked for (inverse, then counts).
nb::object unique_py(const Tensor& x, bool sorted, bool return_inverse, bool return_counts, std::optional<int> dim) {
  UniqueResult r;
  {
    nb::gil_scoped_release release;
    r = unique(x, sorted, return_inverse, return_counts, dim);
  }
  if (!return_inverse && !return_counts) return nb::cast(r.values);
  nb::list out;
  out.append(r.values);
  if (return_inverse) out.append(r.inverse_indices);
  if (return_counts) out.append(r.counts);
  return nb::tuple(out);
}

}  // namespace

void bind_tensor(nb::module_& m) {
  nb::class_<ValuesIndices>(m, "ValuesIndices", "values and indices (torch.return_types)")
      .def_ro("values", &ValuesIndices::values)
      .def_ro("indices", &ValuesIndices::indices)
      .def("__iter__", [](const ValuesIndices& r) { return nb::iter(nb::make_tuple(r.values, r.indices)); })
      .def("__getitem__",
           [](const ValuesIndices& r, int i) {
             if (i == 0 || i == -2) return r.values;
             if (i == 1 || i == -1) return r.indices;
             throw nb::index_error("ValuesIndices: index 0 (values) or 1 (indices)");
           })
      .def("__iter__",
           [](const Tensor& x) {
             if (x.dim() == 0) throw nb::type_error("iteration over a 0-d tensor");
             nb::list rows;
             for (std::int64_t i = 0; i < x.size(0); ++i) rows.append(x.select(0, i));
             return nb::iter(rows);
           })
      .def("__len__", [](const ValuesIndices&) { return 2; });

  nb::class_<Tensor> t(m, "Tensor", "A tensor: a view over storage on one device (anvil/tensor.h)");
  // What it is.
  t.def_prop_ro("shape", &Tensor::shape)
      .def(
          "size", [](const Tensor& x) { return x.shape(); }, doc("Tensor::size"))
      .def("size", &Tensor::size, "dim"_a, doc("Tensor::size"))
      .def(
          "stride", [](const Tensor& x) { return x.strides(); }, doc("Tensor::stride"))
      .def("stride", &Tensor::stride, "dim"_a, doc("Tensor::stride"))
      .def_prop_ro("ndim", &Tensor::dim)
      .def("dim", &Tensor::dim, doc("Tensor::dim"))
      .def("numel", &Tensor::numel, doc("Tensor::numel"))
      .def_prop_ro("dtype", &Tensor::dtype)
      .def_prop_ro("device", &Tensor::device)
      .def("storage_offset", &Tensor::offset, doc("Tensor::offset"))
      .def(
          "is_contiguous", [](const Tensor& x, MemoryFormat format) { return x.is_contiguous(format); }, nb::kw_only(),
          "memory_format"_a = MemoryFormat::Contiguous, doc("Tensor::is_contiguous"))
      .def_prop_ro("nbytes", &Tensor::nbytes)
      .def("element_size", [](const Tensor& x) { return element_size(x.dtype()); })
      .def_prop_ro("is_cuda", [](const Tensor& x) { return x.device().type() == DeviceType::CUDA; })
      .def("is_floating_point", [](const Tensor& x) { return is_floating(x.dtype()); })
      .def("shares_storage", &Tensor::shares_storage, doc("Tensor::shares_storage"))
      .def("is_same", &Tensor::is_same, doc("Tensor::is_same"))
      .def("data_ptr", &data_address)
      .def("__repr__", &repr)
      .def("__len__",
           [](const Tensor& x) {
             if (x.dim() == 0) throw nb::type_error("len() of a 0-d tensor");
             return x.size(0);
           })
      // Moving between devices and dtypes.
      .def("to", &to, "args"_a, nb::kw_only(), "device"_a = nb::none(), "dtype"_a = nb::none(), "copy"_a = false,
           doc("Tensor::to"))
      .def(
          "copy_to",
          [](const Tensor& x, Device d) {
            const SourceLocation site = python_call_site();
            nb::gil_scoped_release release;
            return x.copy_to(d, site);
          },
          "device"_a, doc("Tensor::copy_to"))
      .def(
          "cpu",
          [](nb::handle self) {
            const SourceLocation site = python_call_site();
            return keeping_self([site](const Tensor& x) { return x.cpu(site); })(self);
          },
          doc("Tensor::cpu"))
      .def(
          "cuda",
          [](nb::handle self, int i) {
            return keeping_self([i](const Tensor& x) { return x.to(Device(DeviceType::CUDA, i)); })(self);
          },
          "index"_a = 0)
      .def("float", keeping_self([](const Tensor& x) { return x.to(f32); }))
      .def("double", keeping_self([](const Tensor& x) { return x.to(f64); }))
      .def("half", keeping_self([](const Tensor& x) { return x.to(f16); }))
      .def("bfloat16", keeping_self([](const Tensor& x) { return x.to(bf16); }))
      .def("long", keeping_self([](const Tensor& x) { return x.to(i64); }))
      .def("int", keeping_self([](const Tensor& x) { return x.to(i32); }))
      .def("bool", keeping_self([](const Tensor& x) { return x.to(boolean); }))
      // Host access.
      .def("item", &item)
      .def("tolist", &tolist)
      .def("numpy", &to_numpy)
      .def(
          "__array__",
          [](const Tensor& x, nb::handle dtype, nb::handle copy) {
            (void)copy;
            nb::object a = to_numpy(x.device().is_cpu() ? x : x.cpu());
            return dtype.is_none() ? a : a.attr("astype")(dtype);
          },
          "dtype"_a = nb::none(), "copy"_a = nb::none())
      .def("__dlpack__", &dlpack_capsule, nb::kw_only(), "stream"_a = nb::none(), "max_version"_a = nb::none(),
           "dl_device"_a = nb::none(), "copy"_a = nb::none())
      .def("__dlpack_device__", &dlpack_device)
      .def("__float__", &item_at_site<double>)
      .def("__complex__", [](const Tensor& x) { return std::complex<double>(item_at_site<double>(x), 0.0); })
      .def("__int__", &item_at_site<std::int64_t>)
      .def("__bool__",
           [](const Tensor& x) {
             if (x.numel() != 1)
               throw ValueError(detail::cat("bool: the truth value of a tensor with ", x.numel(),
                                            " elements is ambiguous; use .any() or .all()"));
             return item_at_site<bool>(x);
           })
      .def("__index__",
           [](const Tensor& x) {
             if (!is_integral(x.dtype()) || x.numel() != 1)
               throw nb::type_error("only one-element integer tensors can be converted to an index");
             return item_at_site<std::int64_t>(x);
           })
      // Indexing.
      .def("__getitem__", &getitem)
      .def("__setitem__", &setitem)
      // Views.
      // Not ANVIL_NOGIL: shape_from_args reads the Python arguments.
      .def("reshape", &reshape_args, doc("Tensor::reshape"))
      .def(
          "view", [](const Tensor& x, const nb::args& a) { return x.view(shape_from_args(a, "view")); },
          doc("Tensor::view"))
      .def("transpose", &Tensor::transpose, "dim0"_a, "dim1"_a, ANVIL_NOGIL, doc("Tensor::transpose"))
      .def(
          "permute", [](const Tensor& x, const nb::args& a) { return x.permute(Dims(shape_from_args(a, "permute"))); },
          doc("Tensor::permute"))
      .def("t", &Tensor::t, ANVIL_NOGIL, doc("Tensor::t"))
      .def_prop_ro("T", [](const Tensor& x) { return x.dim() <= 2 ? x.t() : x; })
      .def_prop_ro("mT", [](const Tensor& x) { return x.transpose(-2, -1); })
      .def("slice", &Tensor::slice, "dim"_a, "start"_a, "end"_a, "step"_a = 1, ANVIL_NOGIL, doc("Tensor::slice"))
      .def("narrow", &Tensor::narrow, "dim"_a, "start"_a, "length"_a, ANVIL_NOGIL, doc("Tensor::narrow"))
      .def("select", &Tensor::select, "dim"_a, "index"_a, ANVIL_NOGIL, doc("Tensor::select"))
      .def(
          "expand", [](const Tensor& x, const nb::args& a) { return x.expand(shape_from_args(a, "expand")); },
          doc("Tensor::expand"))
      .def(
          "expand_as", [](const Tensor& x, const Tensor& o) { return x.expand(o.shape()); }, ANVIL_NOGIL)
      .def(
          "repeat", [](const Tensor& x, const nb::args& a) { return x.repeat(shape_from_args(a, "repeat")); },
          doc("Tensor::repeat"))
      .def("squeeze", nb::overload_cast<>(&Tensor::squeeze, nb::const_), ANVIL_NOGIL, doc("Tensor::squeeze"))
      .def("squeeze", nb::overload_cast<const Dims&>(&Tensor::squeeze, nb::const_), "dim"_a, ANVIL_NOGIL,
           doc("Tensor::squeeze"))
      .def("unsqueeze", &Tensor::unsqueeze, "dim"_a, ANVIL_NOGIL, doc("Tensor::unsqueeze"))
      .def("flatten", &Tensor::flatten, "start_dim"_a = 0, "end_dim"_a = -1, ANVIL_NOGIL, doc("Tensor::flatten"))
      .def(
          "contiguous",
          [](nb::handle self, MemoryFormat format) {
            return keeping_self([format](const Tensor& x) { return x.contiguous(format); })(self);
          },
          nb::kw_only(), "memory_format"_a = MemoryFormat::Contiguous, doc("Tensor::contiguous"))
      .def("clone", &Tensor::clone, nb::kw_only(), "memory_format"_a = MemoryFormat::Preserve, ANVIL_NOGIL,
           doc("Tensor::clone"))
      .def("index_select", &Tensor::index_select, "dim"_a, "index"_a, ANVIL_NOGIL, doc("Tensor::index_select"))
      .def("gather", &Tensor::gather, "dim"_a, "index"_a, ANVIL_NOGIL, doc("Tensor::gather"))
      .def("index_add", &Tensor::index_add, "dim"_a, "index"_a, "source"_a, nb::kw_only(), "alpha"_a = 1, ANVIL_NOGIL,
           doc("Tensor::index_add"))
      .def("scatter_add", &Tensor::scatter_add, "dim"_a, "index"_a, "src"_a, ANVIL_NOGIL, doc("Tensor::scatter_add"))
      .def("index_add_", &Tensor::index_add_, "dim"_a, "index"_a, "source"_a, nb::kw_only(), "alpha"_a = 1,
           nb::rv_policy::reference_internal, ANVIL_NOGIL, doc("Tensor::index_add_"))
      .def("scatter_add_", &Tensor::scatter_add_, "dim"_a, "index"_a, "src"_a, nb::rv_policy::reference_internal,
           ANVIL_NOGIL, doc("Tensor::scatter_add_"))
      .def("split", nb::overload_cast<std::int64_t, int>(&Tensor::split, nb::const_), "split_size"_a, "dim"_a = 0,
           ANVIL_NOGIL, doc("Tensor::split"))
      .def("split", nb::overload_cast<const std::vector<std::int64_t>&, int>(&Tensor::split, nb::const_),
           "split_size"_a, "dim"_a = 0, ANVIL_NOGIL, doc("Tensor::split"))
      .def("chunk", &Tensor::chunk, "chunks"_a, "dim"_a = 0, ANVIL_NOGIL, doc("Tensor::chunk"))
      .def(
          "as_strided",
          [](const Tensor& x, const Shape& size, const Shape& stride, std::optional<std::int64_t> offset) {
            return x.as_strided(size, stride, offset.value_or(x.offset()));
          },
          "size"_a, "stride"_a, "storage_offset"_a = nb::none(), ANVIL_NOGIL, doc("Tensor::as_strided"));

  // Elementwise, one argument.
  // Each elementwise op of one tensor in anvil/ops.def (its docstring is the row's).
#define ANVIL_UNARY_OP(Op, name, ...) t.def(#name, &Tensor::name, doc("Tensor::" #name), ANVIL_NOGIL);
#define ANVIL_UNARY_OP_WITH_PARAMS(...)
#include "anvil/ops.def"
  t.def("detach", &Tensor::detach, doc("Tensor::detach"), ANVIL_NOGIL);
  t.def("max", nb::overload_cast<>(&Tensor::max, nb::const_), ANVIL_NOGIL, doc("Tensor::max"))
      .def("min", nb::overload_cast<>(&Tensor::min, nb::const_), ANVIL_NOGIL, doc("Tensor::min"))
      .def("masked_fill", &Tensor::masked_fill, "mask"_a, "value"_a, ANVIL_NOGIL, doc("Tensor::masked_fill"))
      .def("tril", &Tensor::tril, "diagonal"_a = 0, ANVIL_NOGIL, doc("Tensor::tril"))
      .def("triu", &Tensor::triu, "diagonal"_a = 0, ANVIL_NOGIL, doc("Tensor::triu"))
      .def("clamp", &Tensor::clamp, "min"_a = nb::none(), "max"_a = nb::none(), ANVIL_NOGIL, doc("Tensor::clamp"))
      .def("clip", &Tensor::clamp, "min"_a = nb::none(), "max"_a = nb::none(), ANVIL_NOGIL, doc("Tensor::clamp"))
      .def("where", nb::overload_cast<const Tensor&, const Tensor&>(&Tensor::where, nb::const_), "condition"_a,
           "other"_a, ANVIL_NOGIL, doc("Tensor::where"))
      .def("where", nb::overload_cast<const Tensor&, const Scalar&>(&Tensor::where, nb::const_), "condition"_a,
           "other"_a, ANVIL_NOGIL, doc("Tensor::where"))
      .def("add", nb::overload_cast<const Tensor&, const Scalar&>(&Tensor::add, nb::const_), "other"_a, nb::kw_only(),
           "alpha"_a, ANVIL_NOGIL, doc("Tensor::add"));

  // Elementwise, two arguments: a tensor or a Python number (anvil/ops.def):
  // bound in math_ops.cpp, after these.

  // In place: the same Python object back (x.add_(1) is x).
#define ANVIL_INPLACE(name)                      \
  t.def(                                         \
       #name,                                    \
       [](nb::handle self, const Tensor& o) {    \
         nb::cast<Tensor&>(self).name(o);        \
         return nb::borrow(self);                \
       },                                        \
       "other"_a, doc("Tensor::" #name))         \
      .def(                                      \
          #name,                                 \
          [](nb::handle self, const Scalar& o) { \
            nb::cast<Tensor&>(self).name(o);     \
            return nb::borrow(self);             \
          },                                     \
          "other"_a, doc("Tensor::" #name));
  ANVIL_INPLACE(add_)
  ANVIL_INPLACE(sub_)
  ANVIL_INPLACE(mul_)
  ANVIL_INPLACE(div_)
#undef ANVIL_INPLACE
  auto self_back = [](nb::handle self) { return nb::borrow(self); };
  t.def(
       "pow_",
       [self_back](nb::handle self, const Scalar& e) {
         nb::cast<Tensor&>(self).pow_(e);
         return self_back(self);
       },
       doc("Tensor::pow_"))
      .def(
          "clamp_",
          [self_back](nb::handle self, std::optional<Scalar> lo, std::optional<Scalar> hi) {
            nb::cast<Tensor&>(self).clamp_(lo, hi);
            return self_back(self);
          },
          "min"_a = nb::none(), "max"_a = nb::none(), doc("Tensor::clamp_"))
      .def(
          "relu_",
          [self_back](nb::handle self) {
            nb::cast<Tensor&>(self).relu_();
            return self_back(self);
          },
          doc("Tensor::relu_"))
      .def(
          "exp_",
          [self_back](nb::handle self) {
            nb::cast<Tensor&>(self).exp_();
            return self_back(self);
          },
          doc("Tensor::exp_"))
      .def(
          "neg_",
          [self_back](nb::handle self) {
            nb::cast<Tensor&>(self).neg_();
            return self_back(self);
          },
          doc("Tensor::neg_"))
      .def(
          "zero_",
          [self_back](nb::handle self) {
            nb::cast<Tensor&>(self).zero_();
            return self_back(self);
          },
          doc("Tensor::zero_"))
      .def(
          "fill_",
          [self_back](nb::handle self, const Scalar& v) {
            nb::cast<Tensor&>(self).fill_(v);
            return self_back(self);
          },
          doc("Tensor::fill_"))
      .def(
          "copy_",
          [self_back](nb::handle self, const Tensor& src) {
            nb::cast<Tensor&>(self).copy_(src);
            return self_back(self);
          },
          "src"_a, doc("Tensor::copy_"));

  // Operators, reflected and in place, with tensors and Python numbers.
  t.def(
       "__add__", [](const Tensor& a, const Tensor& b) { return a + b; }, ANVIL_NOGIL)
      .def(
          "__add__", [](const Tensor& a, const Scalar& b) { return a + b; }, ANVIL_NOGIL)
      .def(
          "__radd__", [](const Tensor& a, const Scalar& b) { return b + a; }, ANVIL_NOGIL)
      .def(
          "__sub__", [](const Tensor& a, const Tensor& b) { return a - b; }, ANVIL_NOGIL)
      .def(
          "__sub__", [](const Tensor& a, const Scalar& b) { return a - b; }, ANVIL_NOGIL)
      .def(
          "__rsub__", [](const Tensor& a, const Scalar& b) { return b - a; }, ANVIL_NOGIL)
      .def(
          "__mul__", [](const Tensor& a, const Tensor& b) { return a * b; }, ANVIL_NOGIL)
      .def(
          "__mul__", [](const Tensor& a, const Scalar& b) { return a * b; }, ANVIL_NOGIL)
      .def(
          "__rmul__", [](const Tensor& a, const Scalar& b) { return b * a; }, ANVIL_NOGIL)
      .def(
          "__truediv__", [](const Tensor& a, const Tensor& b) { return a / b; }, ANVIL_NOGIL)
      .def(
          "__truediv__", [](const Tensor& a, const Scalar& b) { return a / b; }, ANVIL_NOGIL)
      .def(
          "__rtruediv__", [](const Tensor& a, const Scalar& b) { return b / a; }, ANVIL_NOGIL)
      .def(
          "__pow__", [](const Tensor& a, const Tensor& b) { return pow(a, b); }, ANVIL_NOGIL)
      .def(
          "__pow__", [](const Tensor& a, const Scalar& b) { return pow(a, b); }, ANVIL_NOGIL)
      .def(
          "__rpow__", [](const Tensor& a, const Scalar& b) { return pow(b, a); }, ANVIL_NOGIL)
      .def(
          "__matmul__", [](const Tensor& a, const Tensor& b) { return matmul(a, b); }, ANVIL_NOGIL)
      .def(
          "__neg__", [](const Tensor& a) { return -a; }, ANVIL_NOGIL)
      .def("__pos__", [](const Tensor& a) { return a; })
      .def(
          "__abs__", [](const Tensor& a) { return abs(a); }, ANVIL_NOGIL)
      .def(
          "__invert__", [](const Tensor& a) { return logical_not(a); }, ANVIL_NOGIL)
      .def(
          "__eq__", [](const Tensor& a, const Tensor& b) { return a == b; }, ANVIL_NOGIL)
      .def(
          "__eq__", [](const Tensor& a, const Scalar& b) { return a == b; }, ANVIL_NOGIL)
      .def(
          "__ne__", [](const Tensor& a, const Tensor& b) { return a != b; }, ANVIL_NOGIL)
      .def(
          "__ne__", [](const Tensor& a, const Scalar& b) { return a != b; }, ANVIL_NOGIL)
      .def(
          "__lt__", [](const Tensor& a, const Tensor& b) { return a < b; }, ANVIL_NOGIL)
      .def(
          "__lt__", [](const Tensor& a, const Scalar& b) { return a < b; }, ANVIL_NOGIL)
      .def(
          "__le__", [](const Tensor& a, const Tensor& b) { return a <= b; }, ANVIL_NOGIL)
      .def(
          "__le__", [](const Tensor& a, const Scalar& b) { return a <= b; }, ANVIL_NOGIL)
      .def(
          "__gt__", [](const Tensor& a, const Tensor& b) { return a > b; }, ANVIL_NOGIL)
      .def(
          "__gt__", [](const Tensor& a, const Scalar& b) { return a > b; }, ANVIL_NOGIL)
      .def(
          "__ge__", [](const Tensor& a, const Tensor& b) { return a >= b; }, ANVIL_NOGIL)
      .def(
          "__ge__", [](const Tensor& a, const Scalar& b) { return a >= b; }, ANVIL_NOGIL);
  // __eq__ is elementwise (as in torch); a tensor hashes by identity, so it can key a dict.
  t.def("__hash__", [](const Tensor& x) { return reinterpret_cast<std::uintptr_t>(x.impl().get()); });
#define ANVIL_IOP(pyname, op)                            \
  t.def(pyname, [](nb::handle self, const Tensor& o) {   \
     {                                                   \
       nb::gil_scoped_release release;                   \
       nb::cast<Tensor&>(self) op o;                     \
     }                                                   \
     return nb::borrow(self);                            \
   }).def(pyname, [](nb::handle self, const Scalar& o) { \
    {                                                    \
      nb::gil_scoped_release release;                    \
      nb::cast<Tensor&>(self) op o;                      \
    }                                                    \
    return nb::borrow(self);                             \
  });
  ANVIL_IOP("__iadd__", +=)
  ANVIL_IOP("__isub__", -=)
  ANVIL_IOP("__imul__", *=)
  ANVIL_IOP("__itruediv__", /=)
#undef ANVIL_IOP

  // Reductions.
  t.def("sum", &Tensor::sum, "dim"_a = nb::none(), "keepdim"_a = false, "dtype"_a = nb::none(), ANVIL_NOGIL,
        doc("Tensor::sum"))
      .def("mean", &Tensor::mean, "dim"_a = nb::none(), "keepdim"_a = false, ANVIL_NOGIL, doc("Tensor::mean"))
      .def("prod", &Tensor::prod, "dim"_a = nb::none(), "keepdim"_a = false, "dtype"_a = nb::none(), ANVIL_NOGIL,
           doc("Tensor::prod"))
      .def("amax", &Tensor::amax, "dim"_a = nb::none(), "keepdim"_a = false, ANVIL_NOGIL, doc("Tensor::amax"))
      .def("amin", &Tensor::amin, "dim"_a = nb::none(), "keepdim"_a = false, ANVIL_NOGIL, doc("Tensor::amin"))
      .def("max", nb::overload_cast<int, bool>(&Tensor::max, nb::const_), "dim"_a, "keepdim"_a = false, ANVIL_NOGIL,
           doc("Tensor::max"))
      .def("min", nb::overload_cast<int, bool>(&Tensor::min, nb::const_), "dim"_a, "keepdim"_a = false, ANVIL_NOGIL,
           doc("Tensor::min"))
      .def("sort", &Tensor::sort, "dim"_a = -1, "descending"_a = false, ANVIL_NOGIL, doc("Tensor::sort"))
      .def("unique", &unique_py, "sorted"_a = true, "return_inverse"_a = false, "return_counts"_a = false,
           "dim"_a = nb::none(), doc("unique"))
      .def("topk", &Tensor::topk, "k"_a, "dim"_a = -1, "largest"_a = true, "sorted"_a = true, ANVIL_NOGIL,
           doc("Tensor::topk"))
      .def(
          "argmax", [](const Tensor& x, std::optional<int> dim, bool keepdim) { return argmax(x, dim, keepdim); },
          "dim"_a = nb::none(), "keepdim"_a = false, ANVIL_NOGIL, doc("Tensor::argmax"))
      .def(
          "argmin", [](const Tensor& x, std::optional<int> dim, bool keepdim) { return argmin(x, dim, keepdim); },
          "dim"_a = nb::none(), "keepdim"_a = false, ANVIL_NOGIL, doc("Tensor::argmin"))
      .def("var", &Tensor::var, "dim"_a = nb::none(), "keepdim"_a = false, nb::kw_only(), "correction"_a = 1,
           ANVIL_NOGIL, doc("Tensor::var"))
      .def("std", &Tensor::std, "dim"_a = nb::none(), "keepdim"_a = false, nb::kw_only(), "correction"_a = 1,
           ANVIL_NOGIL, doc("Tensor::std"))
      .def("norm", &Tensor::norm, "dim"_a = nb::none(), "keepdim"_a = false, ANVIL_NOGIL, doc("Tensor::norm"))
      .def("logsumexp", &Tensor::logsumexp, "dim"_a, "keepdim"_a = false, ANVIL_NOGIL, doc("Tensor::logsumexp"))
      .def("softmax", &Tensor::softmax, "dim"_a, ANVIL_NOGIL, doc("Tensor::softmax"))
      .def("log_softmax", &Tensor::log_softmax, "dim"_a, ANVIL_NOGIL, doc("Tensor::log_softmax"))
      // Linear algebra.
      .def("matmul", &Tensor::matmul, ANVIL_NOGIL, doc("Tensor::matmul"))
      .def("mm", &Tensor::mm, ANVIL_NOGIL, doc("Tensor::mm"))
      .def("bmm", &Tensor::bmm, ANVIL_NOGIL, doc("Tensor::bmm"))
      .def("dot", &Tensor::dot, ANVIL_NOGIL, doc("Tensor::dot"))
      .def("outer", &Tensor::outer, ANVIL_NOGIL, doc("Tensor::outer"))
      .def("addmm", &Tensor::addmm, "mat1"_a, "mat2"_a, nb::kw_only(), "beta"_a = 1, "alpha"_a = 1, ANVIL_NOGIL,
           doc("Tensor::addmm"))
      .def("baddbmm", &Tensor::baddbmm, "batch1"_a, "batch2"_a, nb::kw_only(), "beta"_a = 1, "alpha"_a = 1, ANVIL_NOGIL,
           doc("Tensor::baddbmm"))
      .def("allclose", &Tensor::allclose, "other"_a, "rtol"_a = 1e-5, "atol"_a = 1e-8, ANVIL_NOGIL,
           doc("Tensor::allclose"))
      .def("equal", &Tensor::equal, ANVIL_NOGIL, doc("Tensor::equal"))
      // Autograd.
      .def_prop_rw("requires_grad", &Tensor::requires_grad, [](Tensor& x, bool on) { x.requires_grad_(on); })
      .def(
          "requires_grad_",
          [](nb::handle self, bool on) {
            nb::cast<Tensor&>(self).requires_grad_(on);
            return nb::borrow(self);
          },
          "requires_grad"_a = true, doc("Tensor::requires_grad_"))
      .def_prop_rw(
          "grad", &grad_or_none, [](const Tensor& x, std::optional<Tensor> g) { x.set_grad(g ? *g : Tensor()); },
          nb::for_setter(nb::arg("grad").none()))
      .def_prop_rw(
          "data", [](const Tensor& x) { return x.detach(); },
          [](const Tensor& x, const Tensor& src) { x.set_data(src); })
      .def_prop_ro("is_leaf", &Tensor::is_leaf)
      // copy.deepcopy (of a module's attributes in anvil.nn.Module.clone):
      // a leaf's copy on its device, requiring grad as it does; as in PyTorch,
      // a tensor made by a recorded op has no deep copy.
      .def(
          "__deepcopy__",
          [](const Tensor& x, nb::handle) {
            if (!x.is_leaf())
              throw ValueError(
                  detail::cat("deepcopy: only leaf tensors can be deep-copied; expected a leaf, got one "
                              "made by ",
                              x.grad_fn_name(), "; deep-copy x.detach()"));
            nb::gil_scoped_release release;
            Tensor c = x.detach().copy_to(x.device());
            if (x.requires_grad()) c.requires_grad_(true);
            return c;
          },
          "memo"_a)
      .def_prop_ro("grad_fn",
                   [](const Tensor& x) -> nb::object {
                     std::string name = x.grad_fn_name();
                     if (name.empty()) return nb::none();
                     return nb::str(name.c_str());
                   })
      .def("zero_grad", &Tensor::zero_grad, doc("Tensor::zero_grad"))
      .def(
          "backward",
          [](const Tensor& x, std::optional<Tensor> gradient, bool retain_graph) {
            x.backward(gradient ? *gradient : Tensor(), retain_graph);
          },
          "gradient"_a = nb::none(), "retain_graph"_a = false, ANVIL_NOGIL, doc("Tensor::backward"))
      .def("set_data", &Tensor::set_data, doc("Tensor::set_data"));

  // --- factories: size as ints or a tuple; dtype=, device=, requires_grad= ----------
#define ANVIL_FACTORY(name, fn)                                                                         \
  m.def(                                                                                                \
      name,                                                                                             \
      [](nb::args size, std::optional<DType> dtype, std::optional<Device> device, bool requires_grad) { \
        const Shape shape = shape_from_args(size, name);                                                \
        Tensor out;                                                                                     \
        {                                                                                               \
          nb::gil_scoped_release release;                                                               \
          out = fn(shape, device_or_default(device), dtype.value_or(f32));                              \
        }                                                                                               \
        return finish(out, requires_grad);                                                              \
      },                                                                                                \
      "size"_a, nb::kw_only(), "dtype"_a = nb::none(), "device"_a = nb::none(), "requires_grad"_a = false, doc(name));
  ANVIL_FACTORY("empty", empty)
  ANVIL_FACTORY("zeros", zeros)
  ANVIL_FACTORY("ones", ones)
  ANVIL_FACTORY("rand", rand)
  ANVIL_FACTORY("randn", randn)
#undef ANVIL_FACTORY
  m.def(
      "full",
      [](const Shape& size, const Scalar& value, std::optional<DType> dtype, std::optional<Device> device,
         bool requires_grad) { return finish(full(size, value, device_or_default(device), dtype), requires_grad); },
      "size"_a, "fill_value"_a, nb::kw_only(), "dtype"_a = nb::none(), "device"_a = nb::none(),
      "requires_grad"_a = false, doc("full"));
  m.def(
      "arange",
      [](const Scalar& a, std::optional<Scalar> b, const Scalar& step, std::optional<DType> dtype,
         std::optional<Device> device, bool requires_grad) {
        Tensor out = b ? arange(a, *b, step, device_or_default(device), dtype)
                       : arange(Scalar(0), a, step, device_or_default(device), dtype);
        return finish(out, requires_grad);
      },
      "start"_a, "end"_a = nb::none(), "step"_a = 1, nb::kw_only(), "dtype"_a = nb::none(), "device"_a = nb::none(),
      "requires_grad"_a = false, doc("arange"));
  m.def(
      "linspace",
      [](double start, double end, std::int64_t steps, std::optional<DType> dtype, std::optional<Device> device,
         bool requires_grad) {
        return finish(linspace(start, end, steps, device_or_default(device), dtype.value_or(f32)), requires_grad);
      },
      "start"_a, "end"_a, "steps"_a, nb::kw_only(), "dtype"_a = nb::none(), "device"_a = nb::none(),
      "requires_grad"_a = false, doc("linspace"));
  m.def(
      "eye",
      [](std::int64_t n, std::optional<std::int64_t> mcols, std::optional<DType> dtype, std::optional<Device> device,
         bool requires_grad) {
        return finish(eye(n, mcols, device_or_default(device), dtype.value_or(f32)), requires_grad);
      },
      "n"_a, "m"_a = nb::none(), nb::kw_only(), "dtype"_a = nb::none(), "device"_a = nb::none(),
      "requires_grad"_a = false, doc("eye"));
  m.def(
      "randint",
      [](std::int64_t low, std::int64_t high, const Shape& size, std::optional<DType> dtype,
         std::optional<Device> device) {
        return randint(low, high, size, device_or_default(device), dtype.value_or(i64));
      },
      "low"_a, "high"_a, "size"_a, nb::kw_only(), "dtype"_a = nb::none(), "device"_a = nb::none(), ANVIL_NOGIL,
      doc("randint"));
  m.def("manual_seed", &manual_seed, "seed"_a, doc("manual_seed"));
  m.def(
      "tensor",
      [](nb::handle data, std::optional<DType> dtype, std::optional<Device> device, bool requires_grad) {
        return finish(tensor_from_data(data, dtype, device), requires_grad);
      },
      "data"_a, nb::kw_only(), "dtype"_a = nb::none(), "device"_a = nb::none(), "requires_grad"_a = false);
  m.def("from_dlpack", &from_dlpack, "x"_a, "A tensor sharing the memory of x (anything with __dlpack__)");
  m.def("from_numpy", &from_dlpack, "array"_a, "A CPU tensor sharing the NumPy array's memory");
  m.def("empty_like", &empty_like, ANVIL_NOGIL, doc("empty_like"));
  m.def("zeros_like", &zeros_like, ANVIL_NOGIL, doc("zeros_like"));
  m.def("ones_like", &ones_like, ANVIL_NOGIL, doc("ones_like"));
  m.def("full_like", &full_like, ANVIL_NOGIL, doc("full_like"));
  m.def("rand_like", &rand_like, ANVIL_NOGIL, doc("rand_like"));
  m.def("randn_like", &randn_like, ANVIL_NOGIL, doc("randn_like"));
  m.def("randint_like", &randint_like, "input"_a, "low"_a, "high"_a, ANVIL_NOGIL, doc("randint_like"));
  m.def(
      "scalar_tensor",
      [](const Scalar& v, std::optional<DType> dtype, std::optional<Device> device) {
        return scalar_tensor(v, device_or_default(device), dtype);
      },
      "value"_a, nb::kw_only(), "dtype"_a = nb::none(), "device"_a = nb::none(), doc("scalar_tensor"));

  // --- free ops (anvil/ops.h) ---------------------------------------------------------
#define ANVIL_UNARY_OP(Op, name, ...) \
  m.def(                              \
      #name, [](const Tensor& x) { return anvil::name(x); }, "input"_a, doc(#name), ANVIL_NOGIL);
#define ANVIL_UNARY_OP_WITH_PARAMS(...)
#include "anvil/ops.def"
  // Their names, which the package re-exports (anvil/__init__.py).
  m.attr("_table_ops") = nb::make_tuple(
#define ANVIL_UNARY_OP(Op, name, ...) #name,
#define ANVIL_UNARY_OP_WITH_PARAMS(...)
#include "anvil/ops.def"
      "");
#define ANVIL_FREE_UNARY(name) \
  m.def(                       \
      #name, [](const Tensor& x) { return anvil::name(x); }, "input"_a, doc(#name), ANVIL_NOGIL);
  ANVIL_FREE_UNARY(t)
  ANVIL_FREE_UNARY(contiguous)
  m.def(
      "clone", [](const Tensor& x, MemoryFormat format) { return anvil::clone(x, format); }, "input"_a, nb::kw_only(),
      "memory_format"_a = MemoryFormat::Preserve, doc("clone"), ANVIL_NOGIL);
#undef ANVIL_FREE_UNARY
  m.def("matmul", &matmul, ANVIL_NOGIL, doc("matmul"));
  m.def("mm", &mm, ANVIL_NOGIL, doc("mm"));
  m.def("bmm", &bmm, ANVIL_NOGIL, doc("bmm"));
  m.def("dot", &dot, ANVIL_NOGIL, doc("dot"));
  m.def("outer", &outer, ANVIL_NOGIL, doc("outer"));
  m.def("addmm", &addmm, "input"_a, "mat1"_a, "mat2"_a, nb::kw_only(), "beta"_a = 1, "alpha"_a = 1, ANVIL_NOGIL,
        doc("addmm"));
  m.def("baddbmm", &baddbmm, "input"_a, "batch1"_a, "batch2"_a, nb::kw_only(), "beta"_a = 1, "alpha"_a = 1, ANVIL_NOGIL,
        doc("baddbmm"));
  m.def("clamp", nb::overload_cast<const Tensor&, std::optional<Scalar>, std::optional<Scalar>>(&clamp), "input"_a,
        "min"_a = nb::none(), "max"_a = nb::none(), ANVIL_NOGIL, doc("clamp"));
  m.def("where", nb::overload_cast<const Tensor&, const Tensor&, const Tensor&>(&where), "condition"_a, "input"_a,
        "other"_a, ANVIL_NOGIL, doc("where"));
  m.def("where", nb::overload_cast<const Tensor&, const Scalar&, const Tensor&>(&where), "condition"_a, "input"_a,
        "other"_a, ANVIL_NOGIL, doc("where"));
  m.def("where", nb::overload_cast<const Tensor&, const Tensor&, const Scalar&>(&where), "condition"_a, "input"_a,
        "other"_a, ANVIL_NOGIL, doc("where"));
  m.def("masked_fill", &masked_fill, "input"_a, "mask"_a, "value"_a, ANVIL_NOGIL, doc("masked_fill"));
  m.def("tril", &tril, "input"_a, "diagonal"_a = 0, ANVIL_NOGIL, doc("tril"));
  m.def("triu", &triu, "input"_a, "diagonal"_a = 0, ANVIL_NOGIL, doc("triu"));
  m.def("sum", &sum, "input"_a, "dim"_a = nb::none(), "keepdim"_a = false, "dtype"_a = nb::none(), ANVIL_NOGIL,
        doc("sum"));
  m.def("mean", &mean, "input"_a, "dim"_a = nb::none(), "keepdim"_a = false, ANVIL_NOGIL, doc("mean"));
  m.def("prod", &prod, "input"_a, "dim"_a = nb::none(), "keepdim"_a = false, "dtype"_a = nb::none(), ANVIL_NOGIL,
        doc("prod"));
  m.def("amax", &amax, "input"_a, "dim"_a = nb::none(), "keepdim"_a = false, ANVIL_NOGIL, doc("amax"));
  m.def("amin", &amin, "input"_a, "dim"_a = nb::none(), "keepdim"_a = false, ANVIL_NOGIL, doc("amin"));
  m.def("max", nb::overload_cast<const Tensor&>(&max), "input"_a, ANVIL_NOGIL, doc("max"));
  m.def("max", nb::overload_cast<const Tensor&, int, bool>(&max), "input"_a, "dim"_a, "keepdim"_a = false, ANVIL_NOGIL,
        doc("max"));
  m.def("min", nb::overload_cast<const Tensor&>(&min), "input"_a, ANVIL_NOGIL, doc("min"));
  m.def("min", nb::overload_cast<const Tensor&, int, bool>(&min), "input"_a, "dim"_a, "keepdim"_a = false, ANVIL_NOGIL,
        doc("min"));
  m.def("argmax", &argmax, "input"_a, "dim"_a = nb::none(), "keepdim"_a = false, ANVIL_NOGIL, doc("argmax"));
  m.def("argmin", &argmin, "input"_a, "dim"_a = nb::none(), "keepdim"_a = false, ANVIL_NOGIL, doc("argmin"));
  // The scans (anvil/ops.def), as free functions and methods.
#define ANVIL_SCAN_OP(Op, name, ...)                                                                        \
  m.def(                                                                                                    \
      #name, [](const Tensor& x, int dim) { return anvil::name(x, dim); }, "input"_a, "dim"_a, ANVIL_NOGIL, \
      doc(#name));                                                                                          \
  t.def(                                                                                                    \
      #name, [](const Tensor& x, int dim) { return x.name(dim); }, "dim"_a, ANVIL_NOGIL, doc("Tensor::" #name));
#include "anvil/ops.def"
  m.def("sort", &sort, "input"_a, "dim"_a = -1, "descending"_a = false, ANVIL_NOGIL, doc("sort"));
  m.def("topk", &topk, "input"_a, "k"_a, "dim"_a = -1, "largest"_a = true, "sorted"_a = true, ANVIL_NOGIL, doc("topk"));
  // torch.searchsorted's Python signature: values a tensor or a number, the rest keywords.
  m.def(
      "searchsorted",
      [](const Tensor& seq, const Tensor& values, bool out_int32, bool right, std::optional<std::string> side,
         std::optional<Tensor> sorter) {
        return searchsorted(seq, values, out_int32, right, std::move(side), sorter.value_or(Tensor{}));
      },
      "sorted_sequence"_a, "input"_a, nb::kw_only(), "out_int32"_a = false, "right"_a = false, "side"_a = nb::none(),
      "sorter"_a = nb::none(), ANVIL_NOGIL, doc("searchsorted"));
  m.def(
      "searchsorted",
      [](const Tensor& seq, const Scalar& value, bool out_int32, bool right, std::optional<std::string> side,
         std::optional<Tensor> sorter) {
        return searchsorted(seq, value, out_int32, right, std::move(side), sorter.value_or(Tensor{}));
      },
      "sorted_sequence"_a, "input"_a, nb::kw_only(), "out_int32"_a = false, "right"_a = false, "side"_a = nb::none(),
      "sorter"_a = nb::none(), ANVIL_NOGIL, doc("searchsorted"));
  m.def("unique", &unique_py, "input"_a, "sorted"_a = true, "return_inverse"_a = false, "return_counts"_a = false,
        "dim"_a = nb::none(), doc("unique"));
  m.def("var", &var, "input"_a, "dim"_a = nb::none(), "keepdim"_a = false, nb::kw_only(), "correction"_a = 1,
        ANVIL_NOGIL, doc("var"));
  m.def("std", &anvil::std, "input"_a, "dim"_a = nb::none(), "keepdim"_a = false, nb::kw_only(), "correction"_a = 1,
        ANVIL_NOGIL, doc("std"));
  m.def("norm", &norm, "input"_a, "dim"_a = nb::none(), "keepdim"_a = false, ANVIL_NOGIL, doc("norm"));
  m.def("logsumexp", &logsumexp, "input"_a, "dim"_a, "keepdim"_a = false, ANVIL_NOGIL, doc("logsumexp"));
  m.def("softmax", &softmax, "input"_a, "dim"_a, ANVIL_NOGIL, doc("softmax"));
  m.def("log_softmax", &log_softmax, "input"_a, "dim"_a, ANVIL_NOGIL, doc("log_softmax"));
  m.def("reshape", &reshape, "input"_a, "shape"_a, ANVIL_NOGIL, doc("reshape"));
  m.def("transpose", &transpose, "input"_a, "dim0"_a, "dim1"_a, ANVIL_NOGIL, doc("transpose"));
  m.def("permute", &permute, "input"_a, "dims"_a, ANVIL_NOGIL, doc("permute"));
  m.def("narrow", &narrow, "input"_a, "dim"_a, "start"_a, "length"_a, ANVIL_NOGIL, doc("narrow"));
  m.def("select", &select, "input"_a, "dim"_a, "index"_a, ANVIL_NOGIL, doc("select"));
  m.def("squeeze", nb::overload_cast<const Tensor&>(&squeeze), "input"_a, ANVIL_NOGIL, doc("squeeze"));
  m.def("squeeze", nb::overload_cast<const Tensor&, const Dims&>(&squeeze), "input"_a, "dim"_a, ANVIL_NOGIL,
        doc("squeeze"));
  m.def("unsqueeze", &unsqueeze, "input"_a, "dim"_a, ANVIL_NOGIL, doc("unsqueeze"));
  m.def("flatten", &flatten, "input"_a, "start_dim"_a = 0, "end_dim"_a = -1, ANVIL_NOGIL, doc("flatten"));
  m.def("index_select", &index_select, "input"_a, "dim"_a, "index"_a, ANVIL_NOGIL, doc("index_select"));
  m.def("gather", &gather, "input"_a, "dim"_a, "index"_a, ANVIL_NOGIL, doc("gather"));
  m.def("index_add", &index_add, "input"_a, "dim"_a, "index"_a, "source"_a, nb::kw_only(), "alpha"_a = 1, ANVIL_NOGIL,
        doc("index_add"));
  m.def("scatter_add", &scatter_add, "input"_a, "dim"_a, "index"_a, "src"_a, ANVIL_NOGIL, doc("scatter_add"));
  m.def("cat", &cat, "tensors"_a, "dim"_a = 0, ANVIL_NOGIL, doc("cat"));
  m.def("stack", &stack, "tensors"_a, "dim"_a = 0, ANVIL_NOGIL, doc("stack"));
  m.def("split", nb::overload_cast<const Tensor&, std::int64_t, int>(&split), "input"_a, "split_size"_a, "dim"_a = 0,
        ANVIL_NOGIL, doc("split"));
  m.def("split", nb::overload_cast<const Tensor&, const std::vector<std::int64_t>&, int>(&split), "input"_a,
        "split_size"_a, "dim"_a = 0, ANVIL_NOGIL, doc("split"));
  m.def("chunk", &chunk, "input"_a, "chunks"_a, "dim"_a = 0, ANVIL_NOGIL, doc("chunk"));
  m.def(
      "broadcast_shapes", [](const Shape& a, const Shape& b) { return broadcast_shapes(a, b); },
      doc("broadcast_shapes"));
  // As torch.as_strided: without storage_offset, the input's own.
  m.def(
      "as_strided",
      [](const Tensor& x, const Shape& size, const Shape& stride, std::optional<std::int64_t> offset) {
        return as_strided(x, size, stride, offset.value_or(x.offset()));
      },
      "input"_a, "size"_a, "stride"_a, "storage_offset"_a = nb::none(), ANVIL_NOGIL, doc("as_strided"));
  m.def("allclose", &allclose, "input"_a, "other"_a, "rtol"_a = 1e-5, "atol"_a = 1e-8, ANVIL_NOGIL, doc("allclose"));
  m.def("equal", &equal, "input"_a, "other"_a, ANVIL_NOGIL, doc("equal"));
  m.def(
      "set_printoptions",
      [](std::optional<int> precision, std::optional<std::int64_t> threshold, std::optional<int> edgeitems,
         std::optional<int> linewidth) {
        PrintOptions o = printoptions();
        if (precision) o.precision = *precision;
        if (threshold) o.threshold = *threshold;
        if (edgeitems) o.edgeitems = *edgeitems;
        if (linewidth) o.linewidth = *linewidth;
        set_printoptions(o);
      },
      "precision"_a = nb::none(), "threshold"_a = nb::none(), "edgeitems"_a = nb::none(), "linewidth"_a = nb::none(),
      doc("set_printoptions"));
}

}  // namespace anvil::python
