// python/src/indexing.cpp — x[key] and x[key] = value with NumPy's meaning
// (which PyTorch follows), built on the C++ view and index ops:
//   ints, slices, None and ... are views (select, slice, unsqueeze); a slice
//   with a negative step is the positive slice over the same elements, then
//   flip (a copy: anvil's strides are never negative);
//   integer tensors, lists, NumPy arrays and bool masks are advanced indices:
//   a k-dim mask is its k nonzero index arrays, all index arrays broadcast
//   together, and once there is one, ints count as 0-d index arrays too
//   (NumPy's rule; PyTorch selects them first). The indexed dims are
//   flattened into one and read with index_select or written with
//   index_copy_ (repeated indices: the last write wins, on every device).
// Where the broadcast index dims go: in place of the indexed dims when the
// advanced indices are next to each other in the subscript, first otherwise.
#include <algorithm>
#include <string>

#include "common.h"

namespace anvil::python {

namespace {

// One advanced index: the dim of the view it indexes and its i64 values
// (any shape; broadcast with the others later).
struct Advanced {
  int dim = 0;
  Tensor index;
  bool on_host = false;  // values are on the CPU: checked and wrapped there
};

// The subscript applied: the view of x that the basic items give (positive
// steps only), the dims to flip, and the advanced indices.
struct Indexed {
  Tensor view;
  std::vector<int> flip_dims;  // dims of `view` taken with a negative step
  std::vector<Advanced> advanced;
  bool adjacent = true;  // the advanced items are next to each other in the subscript
};

enum class Kind { Int, Slice, None, Ellipsis, BoolScalar, Array };

struct Item {
  Kind kind = Kind::Int;
  nb::handle handle;
  std::int64_t value = 0;  // Int; BoolScalar (0 or 1)
  Tensor array;            // Array: integer (i64) or bool
};

std::string py_type_name(nb::handle h) { return nb::type_name(h.type()).c_str(); }

[[noreturn]] void bad_item(nb::handle h) {
  throw IndexError(
      detail::cat("index: only ints, slices, None, ..., bool masks and integer tensors are valid "
                  "indices; expected one of those, got ",
                  py_type_name(h)));
}

// A list, tuple or NumPy value as a CPU tensor (no device work, so reading
// it back is free); an empty list is an empty integer index, as in NumPy
// (an empty array keeps its dtype).
Tensor host_array(nb::handle h) {
  Tensor t = tensor_from_data(h, std::nullopt, cpu());
  const bool sequence = PyList_Check(h.ptr()) || PyTuple_Check(h.ptr());
  if (sequence && t.numel() == 0) t = t.to(i64);
  return t;
}

Item classify(nb::handle h) {
  Item it;
  it.handle = h;
  PyObject* o = h.ptr();
  if (h.is_none()) {
    it.kind = Kind::None;
  } else if (o == Py_Ellipsis) {
    it.kind = Kind::Ellipsis;
  } else if (PySlice_Check(o)) {
    it.kind = Kind::Slice;
  } else if (PyBool_Check(o)) {
    it.kind = Kind::BoolScalar;
    it.value = o == Py_True ? 1 : 0;
  } else if (PyLong_Check(o)) {
    it.kind = Kind::Int;
    it.value = nb::cast<std::int64_t>(h);
  } else if (nb::isinstance<Tensor>(h) || PyList_Check(o) || PyTuple_Check(o) || nb::hasattr(h, "__array__")) {
    Tensor t = nb::isinstance<Tensor>(h) ? nb::cast<Tensor>(h) : host_array(h);
    if (t.dtype() == DType::Bool) {
      if (t.dim() == 0) {  // a 0-d mask: x[True], x[anvil.tensor(False)]
        it.kind = Kind::BoolScalar;
        nb::gil_scoped_release release;
        it.value = t.item<bool>() ? 1 : 0;
        return it;
      }
    } else if (!is_integral(t.dtype())) {
      throw IndexError(
          detail::cat("index: tensors used as indices must be integer or bool; expected i64, i32, u8 "
                      "or bool, got ",
                      t.dtype()));
    } else if (t.dim() == 0) {  // a 0-d integer tensor is an int, as in NumPy
      it.kind = Kind::Int;
      nb::gil_scoped_release release;
      it.value = t.item<std::int64_t>();
      return it;
    }
    it.kind = Kind::Array;
    it.array = t;
  } else if (PyIndex_Check(o)) {
    it.kind = Kind::Int;
    it.value = nb::cast<std::int64_t>(nb::steal(PyNumber_Index(o)));
  } else {
    bad_item(h);
  }
  return it;
}

std::int64_t checked_int(std::int64_t i, std::int64_t size, int dim) {
  if (i < -size || i >= size)
    throw IndexError(detail::cat("index: index ", i, " is out of range for dim ", dim, " of size ", size,
                                 "; expected an index in [", -size, ", ", size, "), got ", i));
  return i < 0 ? i + size : i;
}

// The positions where a bool mask is true, as one i64 index array per mask
// dim (numpy.nonzero). The mask is read on the host, as NumPy and PyTorch do
// for x[mask]: the result's size depends on it.
std::vector<Tensor> mask_indices(const Tensor& mask) {
  nb::gil_scoped_release release;
  const std::vector<unsigned char> bits = mask.contiguous().to_vector<unsigned char>();
  const int k = mask.dim();
  std::vector<std::vector<std::int64_t>> pos(static_cast<std::size_t>(k));
  const Shape& s = mask.shape();
  for (std::size_t i = 0; i < bits.size(); ++i) {
    if (bits[i] == 0) continue;
    std::int64_t rest = static_cast<std::int64_t>(i);
    for (int d = k - 1; d >= 0; --d) {
      pos[static_cast<std::size_t>(d)].push_back(rest % s[d]);
      rest /= s[d];
    }
  }
  std::vector<Tensor> out;
  for (auto& p : pos) {
    out.push_back(from_host(p.data(), Shape{static_cast<std::int64_t>(p.size())}, i64, cpu()));
  }
  return out;
}

Indexed apply_basic(const Tensor& x, nb::handle key) {
  std::vector<Item> items;
  if (nb::isinstance<nb::tuple>(key)) {
    for (nb::handle h : nb::borrow<nb::tuple>(key)) items.push_back(classify(h));
  } else {
    items.push_back(classify(key));
  }
  bool any_advanced = false;
  int consumed = 0, ellipses = 0;
  for (const Item& it : items) {
    if (it.kind == Kind::Ellipsis) ++ellipses;
    if (it.kind == Kind::Array || it.kind == Kind::BoolScalar) any_advanced = true;
    if (it.kind == Kind::Int || it.kind == Kind::Slice) consumed += 1;
    if (it.kind == Kind::Array) consumed += it.array.dtype() == DType::Bool ? it.array.dim() : 1;
  }
  if (ellipses > 1)
    throw IndexError(
        detail::cat("index: an index can only have a single ellipsis ('...'); expected at most 1, got ", ellipses));
  if (consumed > x.dim())
    throw IndexError(detail::cat("index: too many indices for a tensor of dimension ", x.dim(), "; expected at most ",
                                 x.dim(), ", got ", consumed));
  Indexed out{x, {}, {}, true};
  int dim = 0;
  int last_advanced_item = -1;  // for the adjacency rule
  auto add_advanced = [&](int item, const Tensor& index, bool on_host) {
    if (last_advanced_item >= 0 && last_advanced_item != item - 1 && last_advanced_item != item) out.adjacent = false;
    last_advanced_item = item;
    out.advanced.push_back({dim, index, on_host});
  };
  for (int i = 0; i < static_cast<int>(items.size()); ++i) {
    const Item& it = items[static_cast<std::size_t>(i)];
    switch (it.kind) {
      case Kind::None:
        out.view = out.view.unsqueeze(dim);
        ++dim;
        break;
      case Kind::Ellipsis:
        dim += x.dim() - consumed;
        break;
      case Kind::Slice: {
        Py_ssize_t start, stop, step;
        if (PySlice_Unpack(it.handle.ptr(), &start, &stop, &step) < 0) {
          if (!PyErr_ExceptionMatches(PyExc_ValueError)) throw nb::python_error();
          PyErr_Clear();  // Python's "slice step cannot be zero", as anvil's error
          throw ValueError("index: slice step cannot be zero; expected a nonzero step, got 0");
        }
        const std::int64_t size = out.view.size(dim);
        const std::int64_t len = PySlice_AdjustIndices(static_cast<Py_ssize_t>(size), &start, &stop, step);
        if (step > 0) {
          if (!(start == 0 && len == size && step == 1))
            out.view = out.view.slice(dim, start, std::max<std::int64_t>(start, stop), step);
        } else if (len == 0) {
          out.view = out.view.slice(dim, 0, 0);
        } else {
          // start, start + step, ...: the positive slice from its last element.
          const std::int64_t first = start + (len - 1) * step;
          out.view = out.view.slice(dim, first, start + 1, -step);
          if (len > 1) out.flip_dims.push_back(dim);
        }
        ++dim;
        break;
      }
      case Kind::Int: {
        const std::int64_t v = checked_int(it.value, out.view.size(dim), dim);
        if (!any_advanced) {
          out.view = out.view.select(dim, v);
        } else {  // a 0-d index array (NumPy's rule)
          add_advanced(i, from_host(&v, Shape{}, i64, cpu()), true);
          ++dim;
        }
        break;
      }
      case Kind::BoolScalar: {
        // A 0-d mask: a new dim of size 1, indexed by [0] (True) or [] (False).
        out.view = out.view.unsqueeze(dim);
        const std::int64_t zero = 0;
        add_advanced(i, from_host(&zero, Shape{it.value}, i64, cpu()), true);
        ++dim;
        break;
      }
      case Kind::Array: {
        const Tensor& t = it.array;
        if (!t.device().is_cpu() && t.device() != x.device())
          throw DeviceMismatch(
              detail::cat("index: an index tensor must be on the indexed tensor's device or the "
                          "CPU; expected ",
                          x.device(), " or cpu, got ", t.device(), "; move it with .to(", x.device(), ")"));
        if (t.dtype() == DType::Bool) {
          // A mask dim is the indexed dim's size or 0 (an empty mask selects
          // nothing), as the array API standard says.
          for (int j = 0; j < t.dim(); ++j)
            if (out.view.size(dim + j) != t.size(j) && t.size(j) != 0)
              throw IndexError(detail::cat("index: the boolean mask's shape ", t.shape(),
                                           " does not match the indexed tensor at dim ", dim + j, "; expected ",
                                           out.view.size(dim + j), " or 0, got ", t.size(j)));
          for (const Tensor& positions : mask_indices(t)) {
            add_advanced(i, positions, true);
            ++dim;
          }
        } else {
          add_advanced(i, t.to(i64), t.device().is_cpu());
          ++dim;
        }
        break;
      }
    }
  }
  return out;
}

// The advanced indices broadcast together and folded into one i64 index
// into the advanced dims flattened (row-major), on x's device. Values on the
// host are checked (IndexError now) and wrapped there; values on a device
// are wrapped there, and an entry with any component out of range becomes
// -1, which the index kernel reports at the next sync (no sync here).
struct Folded {
  Shape broadcast;  // the index arrays' broadcast shape
  Tensor index;     // 1-D, broadcast.numel() entries
};

Folded fold(const Indexed& ix, Device device) {
  Folded f;
  f.broadcast = ix.advanced.front().index.shape();
  for (std::size_t j = 1; j < ix.advanced.size(); ++j) {
    const Shape& s = ix.advanced[j].index.shape();
    try {
      f.broadcast = broadcast_shapes(f.broadcast, s, "index");
    } catch (const ShapeError&) {
      std::string shapes;
      for (const Advanced& a : ix.advanced) shapes += (shapes.empty() ? "" : ", ") + detail::cat(a.index.shape());
      throw IndexError(
          detail::cat("index: the index arrays cannot be broadcast together; expected shapes that "
                      "broadcast, got ",
                      shapes));
    }
  }
  Tensor folded, bad;
  std::int64_t multiplier = 1;
  for (std::size_t jj = ix.advanced.size(); jj-- > 0;) {
    const Advanced& a = ix.advanced[jj];
    const std::int64_t size = ix.view.size(a.dim);
    Tensor idx;
    if (a.on_host) {
      std::vector<std::int64_t> v = a.index.contiguous().to_vector<std::int64_t>();
      for (std::int64_t& e : v) e = checked_int(e, size, a.dim);
      idx = from_host(v.data(), a.index.shape(), i64, cpu()).to(device);
    } else {
      idx = a.index.to(device);
      idx = where(lt(idx, Scalar(0)), idx + Scalar(size), idx);
      if (ix.advanced.size() > 1) {  // the fold could turn an out-of-range entry into a valid one
        const Tensor out_of_range = ne(clamp(idx, Scalar(0), Scalar(size - 1)), idx).expand(f.broadcast);
        bad = bad.defined() ? where(out_of_range, Scalar(true), bad) : out_of_range;
      }
    }
    idx = idx.expand(f.broadcast);
    if (multiplier != 1) idx = idx * Scalar(multiplier);
    folded = folded.defined() ? folded + idx : idx;
    multiplier *= size;
  }
  if (bad.defined()) folded = where(bad, Scalar(std::int64_t{-1}), folded);
  f.index = folded.reshape({-1});
  return f;
}

// The view with its advanced dims moved together (first when they are not
// adjacent) so that they can be flattened into one dim at `at`.
struct Gathered {
  Tensor view;
  int at = 0;
  int count = 0;
};

Gathered gather_advanced(const Indexed& ix) {
  const int k = static_cast<int>(ix.advanced.size());
  if (ix.adjacent) return {ix.view, ix.advanced.front().dim, k};
  std::vector<std::int64_t> order;
  for (const Advanced& a : ix.advanced) order.push_back(a.dim);
  for (int d = 0; d < ix.view.dim(); ++d)
    if (std::none_of(ix.advanced.begin(), ix.advanced.end(), [&](const Advanced& a) { return a.dim == d; }))
      order.push_back(d);
  return {ix.view.permute(Dims(order)), 0, k};
}

// Shape of x[key]: the gathered view with its `count` dims at `at` replaced
// by the broadcast shape.
Shape result_shape(const Gathered& g, const Shape& broadcast) {
  std::vector<std::int64_t> s;
  for (int d = 0; d < g.at; ++d) s.push_back(g.view.size(d));
  for (std::int64_t b : broadcast) s.push_back(b);
  for (int d = g.at + g.count; d < g.view.dim(); ++d) s.push_back(g.view.size(d));
  return Shape(s);
}

// Where view dim d (not advanced) lands in the result.
int result_dim(const Indexed& ix, const Gathered& g, int d, int broadcast_dims) {
  if (ix.adjacent) return d < g.at ? d : d - g.count + broadcast_dims;
  int before = 0;  // non-advanced dims before d
  for (int e = 0; e < d; ++e)
    if (std::none_of(ix.advanced.begin(), ix.advanced.end(), [&](const Advanced& a) { return a.dim == e; })) ++before;
  return broadcast_dims + before;
}

Tensor flip_dims(const Tensor& t, const std::vector<std::int64_t>& dims) {
  return dims.empty() ? t : t.flip(Dims(dims));
}

}  // namespace

Tensor getitem(const Tensor& x, nb::handle key) {
  Indexed ix = apply_basic(x, key);
  nb::gil_scoped_release release;
  if (ix.advanced.empty()) return flip_dims(ix.view, {ix.flip_dims.begin(), ix.flip_dims.end()});
  const Folded f = fold(ix, x.device());
  const Gathered g = gather_advanced(ix);
  const Tensor flat = g.count > 1 ? g.view.flatten(g.at, g.at + g.count - 1) : g.view;
  Tensor out = flat.index_select(g.at, f.index).reshape(result_shape(g, f.broadcast));
  std::vector<std::int64_t> flips;
  for (int d : ix.flip_dims) flips.push_back(result_dim(ix, g, d, f.broadcast.size()));
  return flip_dims(out, flips);
}

namespace {

// The value to store, as a tensor of x's dtype on x's device broadcast to
// `shape` (NumPy drops the value's extra leading dims of size 1).
Tensor value_for(const Tensor& v, const Tensor& x, const Shape& shape) {
  Tensor t = v;
  while (t.dim() > shape.size() && t.size(0) == 1) t = t.squeeze(Dims(0));
  bool fits = t.dim() <= shape.size();
  for (int i = 1; fits && i <= t.dim(); ++i)
    fits = t.size(t.dim() - i) == 1 || t.size(t.dim() - i) == shape[shape.size() - i];
  if (!fits)
    throw ShapeError(
        detail::cat("setitem: the value does not broadcast to the indexed region; expected a shape "
                    "broadcastable to ",
                    shape, ", got ", v.shape()));
  if (t.device() != x.device() && t.device().is_cpu()) t = t.to(x.device());
  return t.to(x.dtype());
}

// key is one bool tensor on x's device covering x's leading dims.
bool masks_leading_dims(const Tensor& x, nb::handle key) {
  if (!nb::isinstance<Tensor>(key)) return false;
  const Tensor& m = nb::cast<const Tensor&>(key);
  if (m.dtype() != DType::Bool || m.dim() == 0 || m.dim() > x.dim() || m.device() != x.device()) return false;
  for (int d = 0; d < m.dim(); ++d)
    if (m.size(d) != x.size(d)) return false;
  return true;
}

bool same_view(const Tensor& a, const Tensor& b) {
  return a.shares_storage(b) && a.offset() == b.offset() && a.shape() == b.shape() && a.strides() == b.strides();
}

// Whether dims [at, at + count) of t can be flattened into one without a copy.
bool flattens_as_view(const Tensor& t, int at, int count) {
  int inner = -1;  // the last dim of size > 1 seen, from the innermost
  for (int d = at + count - 1; d >= at; --d) {
    if (t.size(d) == 0) return true;
    if (t.size(d) == 1) continue;
    if (inner >= 0 && t.stride(d) != t.stride(inner) * t.size(inner)) return false;
    inner = d;
  }
  return true;
}

}  // namespace

void setitem(Tensor& x, nb::handle key, nb::handle value) {
  Scalar s;
  const bool scalar = !nb::isinstance<Tensor>(value) && nb::try_cast<Scalar>(value, s);
  if (scalar && masks_leading_dims(x, key)) {
    // x[mask] = number as masked_fill, as PyTorch does: no host read of the mask.
    Tensor mask = nb::cast<Tensor>(key);
    nb::gil_scoped_release release;
    std::vector<std::int64_t> shape(mask.shape().begin(), mask.shape().end());
    shape.resize(static_cast<std::size_t>(x.dim()), 1);
    x.copy_(x.masked_fill(mask.reshape(Shape(shape)), s));
    return;
  }
  Indexed ix = apply_basic(x, key);
  Tensor v;
  if (!scalar) {
    if (nb::isinstance<Tensor>(value)) {
      v = nb::cast<Tensor>(value);
    } else {
      try {
        v = tensor_from_data(value, x.dtype(), x.device());
      } catch (const nb::python_error&) {
        throw;
      } catch (const Error&) {
        throw nb::type_error(detail::cat("setitem: the value must be a number, a tensor, a list or an array; "
                                         "expected one of those, got ",
                                         py_type_name(value))
                                 .c_str());
      }
    }
  }
  nb::gil_scoped_release release;
  if (ix.advanced.empty()) {
    if (scalar) {
      ix.view.fill_(s);
      return;
    }
    if (same_view(v, ix.view)) return;  // x[k] += 1 stores the view it changed
    Tensor t = value_for(v, x, ix.view.shape());
    std::vector<std::int64_t> flips;  // flipping a broadcast dim changes nothing
    const int lead = ix.view.dim() - t.dim();
    for (int d : ix.flip_dims)
      if (d >= lead && t.size(d - lead) > 1) flips.push_back(d - lead);
    t = flip_dims(t, flips);
    if (t.shares_storage(x)) t = t.clone();  // x[1:] = x[:-1] reads x before writing it, as NumPy
    ix.view.copy_(t);
    return;
  }
  const Folded f = fold(ix, x.device());
  const Gathered g = gather_advanced(ix);
  const Shape shape = result_shape(g, f.broadcast);
  Tensor source = scalar ? full(shape, s, x.device(), x.dtype()) : value_for(v, x, shape).expand(shape);
  std::vector<std::int64_t> flips;
  for (int d : ix.flip_dims) flips.push_back(result_dim(ix, g, d, f.broadcast.size()));
  source = flip_dims(source, flips);
  // Rows of the flattened advanced dims: one per index entry.
  std::vector<std::int64_t> rows;
  for (int d = 0; d < g.at; ++d) rows.push_back(g.view.size(d));
  rows.push_back(f.index.numel());
  for (int d = g.at + g.count; d < g.view.dim(); ++d) rows.push_back(g.view.size(d));
  source = source.reshape(Shape(rows));
  if (source.shares_storage(x)) source = source.clone();
  Tensor target;
  if (g.count == 1) {
    target = g.view;
  } else if (flattens_as_view(g.view, g.at, g.count)) {
    target = g.view.flatten(g.at, g.at + g.count - 1);
  }
  if (target.defined() && (target.numel() == 0 || target.shares_storage(x))) {
    target.index_copy_(g.at, f.index, source);
  } else {  // write through a contiguous copy of the region
    Tensor region = g.view.contiguous();
    Tensor flat = region.flatten(g.at, g.at + g.count - 1);
    flat.index_copy_(g.at, f.index, source);
    Tensor dest = g.view;
    dest.copy_(region);
  }
}

// The C++ ops that indexing added, bound as torch names them: x.flip(dims),
// anvil.flip(x, dims), x.index_copy(dim, index, source) and index_copy_.
void bind_indexing(nb::module_& m) {
  nb::handle t = nb::type<Tensor>();
  // x[key] and x[key] = value, bound here (replacing tensor.cpp's) so that
  // the key and the value may be None: x[None], x[..., None] = v.
  for (const char* name : {"__getitem__", "__setitem__"})
    if (nb::hasattr(t, name)) nb::delattr(t, name);
  nb::cpp_function_def(&getitem, nb::scope(t), nb::name("__getitem__"), nb::is_method(), "key"_a.none(),
                       "x[key] with NumPy's meaning (docs/python.md, Indexing)");
  nb::cpp_function_def(&setitem, nb::scope(t), nb::name("__setitem__"), nb::is_method(), "key"_a.none(),
                       "value"_a.none(), "x[key] = value with NumPy's meaning (docs/python.md, Indexing)");
  constexpr const char* kFlip =
      "A copy with the order of `dims` reversed (every dim when dims is None), torch.flip; what x[::-1] is";
  constexpr const char* kIndexCopy =
      "x with row index[i] of `dim` replaced by source[.., i, ..] (torch.index_copy); repeated indices: the last "
      "write wins, on every device";
  nb::cpp_function_def([](const Tensor& x, const Dims& dims) { return x.flip(dims); }, nb::scope(t), nb::name("flip"),
                       nb::is_method(), "dims"_a = nb::none(), ANVIL_NOGIL, kFlip);
  nb::cpp_function_def([](const Tensor& x, int dim, const Tensor& index,
                          const Tensor& source) { return x.index_copy(dim, index, source); },
                       nb::scope(t), nb::name("index_copy"), nb::is_method(), "dim"_a, "index"_a, "source"_a,
                       ANVIL_NOGIL, kIndexCopy);
  nb::cpp_function_def(
      [](nb::handle self, int dim, const Tensor& index, const Tensor& source) {
        Tensor& x = nb::cast<Tensor&>(self);
        {
          nb::gil_scoped_release release;
          x.index_copy_(dim, index, source);
        }
        return nb::borrow(self);
      },
      nb::scope(t), nb::name("index_copy_"), nb::is_method(), "dim"_a, "index"_a, "source"_a, kIndexCopy);
  m.def("flip", &flip, "input"_a, "dims"_a = nb::none(), ANVIL_NOGIL, kFlip);
  m.def("index_copy", &index_copy, "input"_a, "dim"_a, "index"_a, "source"_a, ANVIL_NOGIL, kIndexCopy);
}

}  // namespace anvil::python
