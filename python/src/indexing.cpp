// python/src/indexing.cpp — x[key] and x[key] = value with PyTorch's meaning,
// built on the C++ view and index ops (anvil/tensor.h, anvil/ops.h).
#include "common.h"

namespace anvil::python {

namespace {

// --- indexing: x[...] with PyTorch's meaning --------------------------------------
// Basic items (int, slice, None, ...) become views (select, slice,
// unsqueeze); one advanced item (an integer tensor or list, a bool mask)
// becomes index_select over the flattened index, as torch does for a single
// advanced index.
struct Advanced {
  int dim = -1;
  Tensor index;  // i64, 1-D
  Shape index_shape;
  int mask_dims = 0;  // a bool mask covers this many dims (flattened into one)
};

struct Indexed {
  Tensor view;
  std::optional<Advanced> advanced;
};

Tensor as_index_tensor(nb::handle item, Device device) {
  if (nb::isinstance<Tensor>(item)) return nb::cast<Tensor>(item);
  return tensor_from_data(item, std::nullopt, device);
}

// Positions where a bool mask is true, as i64 on the mask's device (the
// mask is read once on the host, as torch does for x[mask]).
Tensor mask_positions(const Tensor& mask) {
  const std::vector<unsigned char> bits = mask.to_vector<unsigned char>();
  std::vector<std::int64_t> positions;
  for (std::size_t i = 0; i < bits.size(); ++i)
    if (bits[i] != 0) positions.push_back(static_cast<std::int64_t>(i));
  return from_host(positions.data(), Shape{static_cast<std::int64_t>(positions.size())}, i64, mask.device());
}

bool is_advanced(nb::handle item) {
  return nb::isinstance<Tensor>(item) || nb::isinstance<nb::list>(item) || nb::hasattr(item, "__array__");
}

Indexed index(const Tensor& x, nb::handle key) {
  std::vector<nb::handle> items;
  nb::tuple keep;
  if (nb::isinstance<nb::tuple>(key)) {
    keep = nb::borrow<nb::tuple>(key);
    for (nb::handle h : keep) items.push_back(h);
  } else {
    items.push_back(key);
  }
  // The dims the items consume, to place an ellipsis.
  int consumed = 0;
  bool ellipsis = false;
  std::vector<Tensor> advanced_tensors(items.size());
  for (std::size_t i = 0; i < items.size(); ++i) {
    nb::handle h = items[i];
    if (h.is_none()) continue;
    if (h.ptr() == Py_Ellipsis) {
      if (ellipsis) throw IndexError("index: an index can only have a single ellipsis ('...')");
      ellipsis = true;
      continue;
    }
    if (is_advanced(h) && !PyLong_Check(h.ptr())) {
      advanced_tensors[i] = as_index_tensor(h, x.device());
      const Tensor& t = advanced_tensors[i];
      if (t.dtype() == DType::Bool) {
        consumed += std::max(t.dim(), 1);
      } else if (t.dim() == 0 && is_integral(t.dtype())) {
        consumed += 1;
      } else {
        consumed += 1;
      }
      continue;
    }
    consumed += 1;
  }
  if (consumed > x.dim())
    throw IndexError(
        detail::cat("index: too many indices for a tensor of dimension ", x.dim(), " (", consumed, " given)"));
  Indexed out{x, std::nullopt};
  int dim = 0;
  for (std::size_t i = 0; i < items.size(); ++i) {
    nb::handle h = items[i];
    if (h.is_none()) {
      out.view = out.view.unsqueeze(dim);
      ++dim;
    } else if (h.ptr() == Py_Ellipsis) {
      dim += x.dim() - consumed;
    } else if (PySlice_Check(h.ptr())) {
      Py_ssize_t start, stop, step;
      if (PySlice_Unpack(h.ptr(), &start, &stop, &step) < 0) throw nb::python_error();
      if (step <= 0) throw ValueError("index: slice step must be greater than zero (negative steps are not supported)");
      const std::int64_t size = out.view.size(dim);
      PySlice_AdjustIndices(static_cast<Py_ssize_t>(size), &start, &stop, step);
      if (!(start == 0 && stop == size && step == 1))
        out.view = out.view.slice(dim, start, std::max(start, stop), step);
      ++dim;
    } else if (advanced_tensors[i].defined()) {
      Tensor t = advanced_tensors[i];
      if (out.advanced) throw NotSupported("index: more than one tensor (or list) index in one subscript");
      if (t.dim() == 0 && is_integral(t.dtype())) {  // a 0-d integer tensor is an int
        out.view = out.view.select(dim, t.item<std::int64_t>());
        continue;
      }
      Advanced a;
      a.dim = dim;
      if (t.dtype() == DType::Bool) {
        const int k = std::max(t.dim(), 1);
        for (int j = 0; j < k && t.dim() > 0; ++j) {
          if (out.view.size(dim + j) != t.size(j))
            throw IndexError(detail::cat("index: the mask's shape ", t.shape(), " does not match the indexed dims ",
                                         "at dim ", dim + j, "; expected ", out.view.size(dim + j), ", got ",
                                         t.size(j)));
        }
        a.mask_dims = k;
        a.index = mask_positions(t);
        a.index_shape = Shape{a.index.numel()};
        dim += k;
      } else {
        if (!is_integral(t.dtype()))
          throw IndexError(detail::cat("index: tensors used as indices must be integer or bool, got ", t.dtype()));
        a.index_shape = t.shape();
        a.index = t.flatten();
        ++dim;
      }
      out.advanced = a;
    } else {
      if (!PyIndex_Check(h.ptr()))
        throw IndexError((std::string("index: only ints, slices, None, ..., bool masks and integer tensors are ") +
                          "valid indices, got a " + nb::type_name(h.type()).c_str())
                             .c_str());
      out.view = out.view.select(dim, nb::cast<std::int64_t>(h));
    }
  }
  return out;
}

// The view the advanced index runs over: a mask's dims flattened into one.
Tensor flattened_for(const Indexed& ix) {
  const Advanced& a = *ix.advanced;
  return a.mask_dims > 1 ? ix.view.flatten(a.dim, a.dim + a.mask_dims - 1) : ix.view;
}

}  // namespace

Tensor getitem(const Tensor& x, nb::handle key) {
  Indexed ix = index(x, key);
  if (!ix.advanced) return ix.view;
  const Advanced& a = *ix.advanced;
  const Tensor base = flattened_for(ix);
  nb::gil_scoped_release release;
  Tensor picked = base.index_select(a.dim, a.index);
  if (a.index_shape.size() == 1) return picked;
  std::vector<std::int64_t> shape;
  for (int i = 0; i < a.dim; ++i) shape.push_back(base.size(i));
  for (std::int64_t s : a.index_shape) shape.push_back(s);
  for (int i = a.dim + 1; i < base.dim(); ++i) shape.push_back(base.size(i));
  return picked.reshape(Shape(shape));
}

void setitem(Tensor& x, nb::handle key, nb::handle value) {
  Indexed ix = index(x, key);
  Scalar s;
  const bool scalar = !nb::isinstance<Tensor>(value) && nb::try_cast<Scalar>(value, s);
  Tensor v;
  if (!scalar)
    v = nb::isinstance<Tensor>(value) ? nb::cast<Tensor>(value) : tensor_from_data(value, x.dtype(), x.device());
  nb::gil_scoped_release release;
  if (!ix.advanced) {
    if (scalar) {
      ix.view.fill_(s);
    } else {
      ix.view.copy_(v);
    }
    return;
  }
  const Advanced& a = *ix.advanced;
  Tensor base = flattened_for(ix);
  // x[index] = v as index_add_ of (v - x[index]): the selected rows become v.
  const Tensor current = base.index_select(a.dim, a.index);
  Tensor source = scalar ? full_like(current, s) : v.to(current.dtype()).expand(current.shape()).contiguous();
  base.index_add_(a.dim, a.index, source - current);
}

}  // namespace anvil::python
