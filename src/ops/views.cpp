// Views (share storage, DESIGN §4.3) and the movement ops built on them.
#include <algorithm>
#include <string>

#include "anvil/autograd.h"
#include "autograd/graph.h"
#include "core/ledger_counters.h"
#include "core/observer.h"
#include "ops/op_common.h"

namespace anvil {

using detail::check_defined;
using detail::make_view;
using detail::wrap_dim;

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  const int nd = std::max(a.size(), b.size());
  Shape out = Shape::filled(nd, 1);
  for (int i = 0; i < nd; ++i) {
    const int ia = i - (nd - a.size()), ib = i - (nd - b.size());
    const std::int64_t da = ia >= 0 ? a[ia] : 1, db = ib >= 0 ? b[ib] : 1;
    ANVIL_CHECK(da == db || da == 1 || db == 1, ShapeError, op,
                ": shapes cannot be broadcast; expected sizes equal or 1 in dim ", i, ", got ", a, " and ", b);
    out[i] = da == 1 ? db : da;
  }
  return out;
}

namespace {
// Resolves one -1 and checks the element count.
Shape infer_shape(const char* op, const Shape& requested, std::int64_t numel) {
  Shape s = requested;
  int infer = -1;
  std::int64_t known = 1;
  for (int i = 0; i < s.size(); ++i) {
    if (s[i] == -1) {
      ANVIL_CHECK(infer < 0, ShapeError, op, ": only one dimension can be -1; expected at most one, got ", requested);
      infer = i;
    } else {
      ANVIL_CHECK(s[i] >= 0, ShapeError, op, ": invalid size; expected sizes >= 0 or -1, got ", requested);
      known = checked_mul(known, s[i], op);
    }
  }
  if (infer >= 0) {
    ANVIL_CHECK(known != 0 && numel % known == 0, ShapeError, op, ": shape ", requested, " is invalid for ", numel,
                " elements; expected sizes whose product divides ", numel);
    s[infer] = numel / known;
  } else {
    ANVIL_CHECK(known == numel, ShapeError, op, ": shape ", requested, " is invalid for ", numel,
                " elements; expected sizes whose product is ", numel, ", got ", known);
  }
  return s;
}

// Strides for viewing (shape, strides) as `target` without copying, if
// possible (PyTorch's computeStride): each group of old dims that is
// contiguous within itself may be re-split freely.
bool view_strides(const Shape& shape, const Strides& strides, const Shape& target, Strides& out) {
  out = Shape::filled(target.size(), 1);
  std::int64_t numel = shape.numel();
  if (numel == 0 || shape.size() == 0) {  // empty, or a 0-dim tensor (one element: any ones-shape)
    out = contiguous_strides(target);
    return true;
  }
  int view_d = target.size() - 1;
  std::int64_t chunk_base_stride = strides.size() ? strides.back() : 1;
  std::int64_t tensor_numel = 1, view_numel = 1;
  for (int d = shape.size() - 1; d >= 0; --d) {
    tensor_numel *= shape[d];
    if (d == 0 || (shape[d - 1] != 1 && strides[d - 1] != tensor_numel * chunk_base_stride)) {
      while (view_d >= 0 && (view_numel < tensor_numel || target[view_d] == 1)) {
        out[view_d] = view_numel * chunk_base_stride;
        view_numel *= target[view_d];
        --view_d;
      }
      if (view_numel != tensor_numel) return false;
      if (d > 0) {
        chunk_base_stride = strides[d - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  return view_d == -1;
}
}  // namespace

Tensor view(const Tensor& x, const Shape& shape) {
  check_defined("view", x);
  const Shape target = infer_shape("view", shape, x.numel());
  Strides st;
  ANVIL_CHECK(view_strides(x.shape(), x.strides(), target, st), ShapeError,
              "view: size is not compatible with the tensor's strides; expected a shape that keeps its memory layout, "
              "got ",
              target, " for a tensor of shape ", x.shape(), " and strides ", x.strides(),
              "; use reshape() (it copies when it must)");
  Tensor r = make_view(x, target, st, x.offset());
  detail::record_reshape("ViewBackward", r, x);
  return r;
}

Tensor reshape(const Tensor& x, const Shape& shape) {
  check_defined("reshape", x);
  const Shape target = infer_shape("reshape", shape, x.numel());
  Strides st;
  if (view_strides(x.shape(), x.strides(), target, st)) {
    Tensor r = make_view(x, target, st, x.offset());
    detail::record_reshape("ReshapeBackward", r, x);
    return r;
  }
  return view(contiguous(x), target);
}

Tensor transpose(const Tensor& x, int dim0, int dim1) {
  check_defined("transpose", x);
  const int nd = x.dim();
  dim0 = wrap_dim(dim0, nd, "transpose");
  dim1 = wrap_dim(dim1, nd, "transpose");
  Shape s = x.shape();
  Strides st = x.strides();
  if (nd == 0) return make_view(x, s, st, x.offset());
  std::swap(s[dim0], s[dim1]);
  std::swap(st[dim0], st[dim1]);
  Tensor r = make_view(x, s, st, x.offset());
  detail::record_transpose(r, x, dim0, dim1);
  return r;
}

Tensor permute(const Tensor& x, const Dims& dims) {
  check_defined("permute", x);
  const int nd = x.dim();
  ANVIL_CHECK(dims.size() == nd, ShapeError, "permute: number of dims does not match; expected ", nd, ", got ", dims);
  Shape s = x.shape();
  Strides st = x.strides();
  bool seen[kMaxDims] = {};
  for (int i = 0; i < nd; ++i) {
    const int d = wrap_dim(static_cast<int>(dims[i]), nd, "permute");
    ANVIL_CHECK(!seen[d], ShapeError, "permute: repeated dim; expected a permutation of 0..", nd - 1, ", got ", dims);
    seen[d] = true;
    s[i] = x.shape()[d];
    st[i] = x.strides()[d];
  }
  Tensor r = make_view(x, s, st, x.offset());
  detail::record_permute(r, x, dims);
  return r;
}

Tensor t(const Tensor& x) {
  check_defined("t", x);
  ANVIL_CHECK(x.dim() <= 2, ShapeError, "t: expects a tensor with <= 2 dims; expected <= 2, got ", x.dim(), " (shape ",
              x.shape(), "); use transpose(dim0, dim1)");
  return x.dim() < 2 ? x : transpose(x, 0, 1);
}

Tensor slice(const Tensor& x, int dim, std::int64_t start, std::int64_t end, std::int64_t step) {
  check_defined("slice", x);
  ANVIL_CHECK(x.dim() > 0, IndexError,
              "slice: cannot slice a 0-dim tensor; expected a tensor with >= 1 dim, got shape []");
  dim = wrap_dim(dim, x.dim(), "slice");
  ANVIL_CHECK(step > 0, ValueError, "slice: step must be positive; expected step > 0, got ", step);
  const std::int64_t n = x.shape()[dim];
  auto clampi = [n](std::int64_t v) { return v < 0 ? std::max<std::int64_t>(v + n, 0) : std::min(v, n); };
  start = clampi(start);
  end = clampi(end);
  if (end < start) end = start;
  Shape s = x.shape();
  Strides st = x.strides();
  s[dim] = (end - start + step - 1) / step;
  st[dim] = x.strides()[dim] * step;
  Tensor r = make_view(x, s, st, x.offset() + start * x.strides()[dim]);
  detail::record_slice(r, x, dim, start, end, step);
  return r;
}

Tensor narrow(const Tensor& x, int dim, std::int64_t start, std::int64_t length) {
  check_defined("narrow", x);
  dim = wrap_dim(dim, x.dim(), "narrow");
  const std::int64_t n = x.shape()[dim];
  if (start < 0) start += n;
  ANVIL_CHECK(start >= 0 && length >= 0 && start + length <= n, IndexError, "narrow: range out of bounds; expected ",
              "0 <= start and start + length <= ", n, ", got start ", start, " and length ", length);
  return slice(x, dim, start, start + length);
}

Tensor select(const Tensor& x, int dim, std::int64_t index) {
  check_defined("select", x);
  ANVIL_CHECK(x.dim() > 0, IndexError, "select: cannot index a 0-dim tensor; expected >= 1 dim, got shape []");
  dim = wrap_dim(dim, x.dim(), "select");
  const std::int64_t n = x.shape()[dim];
  ANVIL_CHECK(index >= -n && index < n, IndexError, "select: index ", index, " is out of range for dim ", dim,
              " of size ", n, "; expected an index in [", -n, ", ", n, "), got ", index);
  if (index < 0) index += n;
  Shape s = x.shape();
  Strides st = x.strides();
  const std::int64_t off = x.offset() + index * st[dim];
  s.erase(dim);
  st.erase(dim);
  Tensor r = make_view(x, s, st, off);
  detail::record_select(r, x, dim, index);
  return r;
}

Tensor expand(const Tensor& x, const Shape& shape) {
  check_defined("expand", x);
  const int nd = shape.size(), xd = x.dim();
  ANVIL_CHECK(nd >= xd, ShapeError, "expand: the target has fewer dims than the tensor; expected >= ", xd,
              " dims, got ", shape);
  Shape s = shape;
  Strides st = Shape::filled(nd, 0);
  for (int i = 0; i < nd; ++i) {
    const int xi = i - (nd - xd);
    if (xi < 0) {
      ANVIL_CHECK(shape[i] >= 0, ShapeError, "expand: -1 is not allowed for a new leading dim; got ", shape);
      continue;
    }
    const std::int64_t xs = x.shape()[xi];
    if (shape[i] == -1 || shape[i] == xs) {
      s[i] = xs;
      st[i] = x.strides()[xi];
    } else {
      ANVIL_CHECK(xs == 1, ShapeError, "expand: cannot expand dim ", xi, " of size ", xs, "; expected size 1 or ",
                  shape[i], ", got ", x.shape(), " -> ", shape);
      st[i] = 0;
    }
  }
  Tensor r = make_view(x, s, st, x.offset());
  detail::record_expand(r, x);
  return r;
}

// torch.repeat: x tiled sizes[i] times along dim i, leading 1s added to x's
// shape. Each dim becomes a pair [r_i, s_i] expanded from [1, s_i], so one
// copy makes the result and expand's rule (a sum) is the gradient.
Tensor repeat(const Tensor& x, const Shape& sizes) {
  check_defined("repeat", x);
  const int nd = sizes.size(), xd = x.dim();
  ANVIL_CHECK(nd >= xd, ShapeError, "repeat: fewer repeat sizes than tensor dims; expected at least ", xd,
              " sizes, got ", sizes, " for a tensor of shape ", x.shape());
  Shape pairs, tiled, result;
  for (int i = 0; i < nd; ++i) {
    ANVIL_CHECK(sizes[i] >= 0, ShapeError, "repeat: sizes must be non-negative; expected >= 0, got ", sizes);
    const std::int64_t s = i < nd - xd ? 1 : x.size(i - (nd - xd));
    pairs.push_back(1);
    pairs.push_back(s);
    tiled.push_back(sizes[i]);
    tiled.push_back(s);
    result.push_back(sizes[i] * s);
  }
  return clone(x.reshape(pairs).expand(tiled)).view(result);
}

Tensor flip(const Tensor& x, const Dims& dims) {
  check_defined("flip", x);
  std::vector<bool> flipped(static_cast<std::size_t>(x.dim()), dims.size() == 0);
  for (int i = 0; i < dims.size(); ++i) {
    const int d = wrap_dim(static_cast<int>(dims[i]), x.dim(), "flip");
    ANVIL_CHECK(!flipped[static_cast<std::size_t>(d)], ValueError, "flip: dim ", d,
                " appears more than once; expected distinct dims, got ", dims);
    flipped[static_cast<std::size_t>(d)] = true;
  }
  // One index_select per dim: a kernel every backend has, and its gradient.
  Tensor out = x;
  for (int d = 0; d < x.dim(); ++d) {
    const std::int64_t n = x.shape()[d];
    if (!flipped[static_cast<std::size_t>(d)] || n <= 1) continue;
    out = index_select(out, d, arange(Scalar(n - 1), Scalar(-1), Scalar(-1), x.device(), DType::I64));
  }
  return out.is_same(x) ? clone(x) : out;
}

Tensor squeeze(const Tensor& x) {
  check_defined("squeeze", x);
  Shape s;
  Strides st;
  for (int i = 0; i < x.dim(); ++i)
    if (x.shape()[i] != 1) {
      s.push_back(x.shape()[i]);
      st.push_back(x.strides()[i]);
    }
  Tensor r = make_view(x, s, st, x.offset());
  detail::record_reshape("SqueezeBackward", r, x);
  return r;
}

Tensor squeeze(const Tensor& x, const Dims& dims) {
  check_defined("squeeze", x);
  bool seen[kMaxDims] = {}, drop[kMaxDims] = {};
  for (std::int64_t d : dims) {
    const int w = wrap_dim(static_cast<int>(d), x.dim(), "squeeze");
    if (x.dim() == 0) continue;
    ANVIL_CHECK(!seen[w], IndexError, "squeeze: dim ", w, " appears more than once; expected distinct dims, got ",
                dims);
    seen[w] = true;
    drop[w] = x.shape()[w] == 1;
  }
  Shape s;
  Strides st;
  for (int i = 0; i < x.dim(); ++i)
    if (!drop[i]) {
      s.push_back(x.shape()[i]);
      st.push_back(x.strides()[i]);
    }
  Tensor r = make_view(x, s, st, x.offset());
  detail::record_reshape("SqueezeBackward", r, x);
  return r;
}

Tensor unsqueeze(const Tensor& x, int dim) {
  check_defined("unsqueeze", x);
  dim = wrap_dim(dim, x.dim() + 1, "unsqueeze");
  Shape s = x.shape();
  Strides st = x.strides();
  const std::int64_t stride = dim < x.dim() ? x.strides()[dim] * x.shape()[dim] : 1;
  s.insert(dim, 1);
  st.insert(dim, stride);
  Tensor r = make_view(x, s, st, x.offset());
  detail::record_reshape("UnsqueezeBackward", r, x);
  return r;
}

Tensor flatten(const Tensor& x, int start_dim, int end_dim) {
  check_defined("flatten", x);
  if (x.dim() == 0) return reshape(x, {1});
  start_dim = wrap_dim(start_dim, x.dim(), "flatten");
  end_dim = wrap_dim(end_dim, x.dim(), "flatten");
  ANVIL_CHECK(start_dim <= end_dim, ShapeError,
              "flatten: start_dim must not come after end_dim; expected start <= end, got ", start_dim, " > ", end_dim);
  Shape s;
  for (int i = 0; i < start_dim; ++i) s.push_back(x.shape()[i]);
  std::int64_t n = 1;
  for (int i = start_dim; i <= end_dim; ++i) n *= x.shape()[i];
  s.push_back(n);
  for (int i = end_dim + 1; i < x.dim(); ++i) s.push_back(x.shape()[i]);
  return reshape(x, s);
}

Tensor contiguous(const Tensor& x) {
  check_defined("contiguous", x);
  if (x.is_contiguous()) return x;
  return clone(x, MemoryFormat::Contiguous);
}

Tensor contiguous(const Tensor& x, MemoryFormat format) {
  check_defined("contiguous", x);
  ANVIL_CHECK(format != MemoryFormat::Preserve, ValueError,
              "contiguous: expected MemoryFormat::Contiguous or ChannelsLast, got Preserve");
  if (format == MemoryFormat::Contiguous) return contiguous(x);
  ANVIL_CHECK(x.dim() == 4, ShapeError, "contiguous: ChannelsLast is a layout of 4-d [N, C, H, W] tensors; got ",
              x.dim(), "-d ", x.shape());
  if (x.is_contiguous(format)) return x;
  return clone(x, format);
}

Tensor clone(const Tensor& x, MemoryFormat format) {
  check_defined("clone", x);
  if (format == MemoryFormat::Preserve) format = x.suggest_memory_format();
  ANVIL_CHECK(format != MemoryFormat::ChannelsLast || x.dim() == 4, ShapeError,
              "clone: ChannelsLast is a layout of 4-d [N, C, H, W] tensors; got ", x.dim(), "-d ", x.shape());
  Tensor out = detail::make_empty(x.shape(), x.dtype(), x.device(), format);
  detail::copy_into(out, x);
  detail::record_clone(out, x);
  detail::record_copy(x.device(), x.device(), out.nbytes());  // a same-device copy, in the ledger
  return out;
}

Tensor to_dtype(const Tensor& x, DType t) {
  check_defined("to", x);
  Tensor r = detail::cast(x, t);
  if (!r.is_same(x)) detail::record_cast(r, x);
  return r;
}

Tensor cat(const std::vector<Tensor>& tensors, int dim) {
  detail::check_same_device("cat", tensors);
  const Tensor& first = tensors[0];
  DType t = first.dtype();
  for (const Tensor& x : tensors) t = promote(t, x.dtype());
  const int nd = first.dim();
  ANVIL_CHECK(nd > 0, ShapeError,
              "cat: zero-dimensional tensors cannot be concatenated; expected >= 1 dim, got shape []");
  dim = wrap_dim(dim, nd, "cat");
  Shape out_shape = first.shape();
  std::int64_t total = 0;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const Shape& s = tensors[i].shape();
    ANVIL_CHECK(s.size() == nd, ShapeError, "cat: tensors must have the same number of dims; expected ", nd, ", got ",
                s.size(), " for tensor ", i);
    for (int d = 0; d < nd; ++d)
      ANVIL_CHECK(d == dim || s[d] == out_shape[d], ShapeError, "cat: sizes must match except in dim ", dim,
                  "; expected ", out_shape, ", got ", s, " for tensor ", i);
    total += s[dim];
  }
  out_shape[dim] = total;
  Tensor out = detail::make_empty(out_shape, t, first.device());
  std::int64_t at = 0;
  for (const Tensor& x : tensors) {
    const std::int64_t n = x.shape()[dim];
    if (n > 0) detail::copy_into(narrow(out, dim, at, n), x);
    at += n;
  }
  detail::record_cat(out, tensors, dim);
  return out;
}

Tensor stack(const std::vector<Tensor>& tensors, int dim) {
  detail::check_same_device("stack", tensors);
  dim = wrap_dim(dim, tensors[0].dim() + 1, "stack");
  std::vector<Tensor> expanded;
  expanded.reserve(tensors.size());
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    ANVIL_CHECK(tensors[i].shape() == tensors[0].shape(), ShapeError,
                "stack: all tensors must have one shape; expected ", tensors[0].shape(), ", got ", tensors[i].shape(),
                " for tensor ", i);
    expanded.push_back(unsqueeze(tensors[i], dim));
  }
  return cat(expanded, dim);
}

std::vector<Tensor> split(const Tensor& x, std::int64_t split_size, int dim) {
  check_defined("split", x);
  dim = wrap_dim(dim, x.dim(), "split");
  ANVIL_CHECK(split_size > 0, ValueError, "split: split_size must be positive; expected > 0, got ", split_size);
  std::vector<Tensor> out;
  const std::int64_t n = x.shape()[dim];
  for (std::int64_t at = 0; at < n; at += split_size) out.push_back(narrow(x, dim, at, std::min(split_size, n - at)));
  if (n == 0) out.push_back(x);
  return out;
}

std::vector<Tensor> split(const Tensor& x, const std::vector<std::int64_t>& sizes, int dim) {
  check_defined("split", x);
  dim = wrap_dim(dim, x.dim(), "split");
  const std::int64_t n = x.shape()[dim];
  std::string listed = "[";
  std::int64_t total = 0;
  bool negative = false;
  for (const std::int64_t s : sizes) {
    listed += (listed.size() > 1 ? ", " : "") + std::to_string(s);
    negative = negative || s < 0;
    total += s;
  }
  listed += "]";
  ANVIL_CHECK(!negative, ValueError, "split: sizes must not be negative; expected sizes >= 0, got ", listed);
  ANVIL_CHECK(total == n, ValueError, "split: sizes must add up to dim ", dim, "'s size; expected a sum of ", n,
              ", got ", listed, " (", total, ")");
  std::vector<Tensor> out;
  std::int64_t at = 0;
  for (const std::int64_t s : sizes) {
    out.push_back(narrow(x, dim, at, s));
    at += s;
  }
  return out;
}

std::vector<Tensor> chunk(const Tensor& x, std::int64_t chunks, int dim) {
  check_defined("chunk", x);
  ANVIL_CHECK(chunks > 0, ValueError, "chunk: number of chunks must be positive; expected > 0, got ", chunks);
  dim = wrap_dim(dim, x.dim(), "chunk");
  const std::int64_t n = x.shape()[dim];
  return split(x, std::max<std::int64_t>(1, (n + chunks - 1) / chunks), dim);
}

namespace {
detail::IndexArgs index_args(detail::IndexOp op, const Tensor& out, const Tensor& x, const Tensor& index, int dim) {
  detail::IndexArgs a;
  a.op = op;
  a.ndim = out.dim();
  a.dim = dim;
  for (int i = 0; i < a.ndim; ++i) a.shape[i] = out.shape()[i];
  a.numel = out.numel();
  a.src_dim_size = x.shape()[dim];
  a.out = detail::operand(out);
  a.src = detail::operand(x);
  a.index = detail::operand(index);
  return a;
}
}  // namespace

Tensor index_select(const Tensor& x, int dim, const Tensor& index) {
  const Device d = detail::check_same_device("index_select", {&x, &index});
  ANVIL_CHECK(is_integral(index.dtype()), DTypeError,
              "index_select: index must be an integer tensor; expected i64 or i32, got ", index.dtype());
  ANVIL_CHECK(index.dim() <= 1, ShapeError, "index_select: index must be 1-D; expected 1 dim, got ", index.shape());
  const Tensor xx = x.dim() == 0 ? x.reshape({1}) : x;
  dim = wrap_dim(dim, xx.dim(), "index_select");
  const Tensor idx = detail::cast(index.reshape({-1}), DType::I64);
  Shape s = xx.shape();
  s[dim] = idx.numel();
  ANVIL_PROFILE_OP("index_select", &x, &index);
  Tensor out = detail::make_empty(s, x.dtype(), d);
  if (out.numel() > 0 || idx.numel() > 0) {
    ANVIL_CHECK(xx.shape()[dim] > 0 || idx.numel() == 0, IndexError, "index_select: cannot select from an empty dim; ",
                "expected a dim of size > 0, got ", xx.shape());
    if (out.numel() > 0)
      detail::dispatch::index("index_select", d, index_args(detail::IndexOp::IndexSelect, out, xx, idx, dim));
  }
  detail::record_index_select(out, xx, dim, idx);
  return x.dim() == 0 ? out.reshape(index.dim() == 0 ? Shape{} : Shape{idx.numel()}) : out;
}

Tensor gather(const Tensor& x, int dim, const Tensor& index) {
  const Device d = detail::check_same_device("gather", {&x, &index});
  ANVIL_CHECK(index.dtype() == DType::I64 || index.dtype() == DType::I32, DTypeError,
              "gather: index must be an integer tensor; expected i64, got ", index.dtype());
  ANVIL_CHECK(index.dim() == x.dim(), ShapeError, "gather: index must have as many dims as the input; expected ",
              x.dim(), ", got ", index.dim());
  dim = wrap_dim(dim, x.dim(), "gather");
  for (int i = 0; i < x.dim(); ++i)
    ANVIL_CHECK(i == dim || index.shape()[i] <= x.shape()[i], ShapeError,
                "gather: index is larger than the input in dim ", i, "; expected index.size(", i, ") <= ", x.shape()[i],
                ", got ", index.shape());
  const Tensor idx = detail::cast(index, DType::I64);
  ANVIL_PROFILE_OP("gather", &x, &index);
  Tensor out = detail::make_empty(index.shape(), x.dtype(), d);
  if (out.numel() > 0) detail::dispatch::index("gather", d, index_args(detail::IndexOp::Gather, out, x, idx, dim));
  detail::record_gather(out, x, dim, idx);
  return out;
}

namespace {
// The checks both forms of index_add share; returns the 1-D i64 index and
// wraps `dim`. x and source are at least 1-D here.
Tensor check_index_add(const char* op, const Tensor& x, int& dim, const Tensor& index, const Tensor& source) {
  ANVIL_CHECK(is_integral(index.dtype()) && index.dtype() != DType::Bool, DTypeError, op,
              ": index must be an integer tensor; expected i64 or i32, got ", index.dtype());
  ANVIL_CHECK(index.dim() <= 1, ShapeError, op, ": index must be 1-D; expected 1 dim, got ", index.shape());
  ANVIL_CHECK(source.dtype() == x.dtype(), DTypeError, op, ": source must have the input's dtype; expected ", x.dtype(),
              ", got ", source.dtype());
  dim = wrap_dim(dim, x.dim(), op);
  Shape want = x.shape();
  want[dim] = index.numel();
  ANVIL_CHECK(source.shape() == want, ShapeError, op,
              ": source must have the input's shape with index.numel() along dim; expected ", want, ", got ",
              source.shape());
  return detail::cast(index.reshape({-1}), DType::I64);
}

// out[c with c[dim] = index[k]] += src[c, k] (= for IndexCopy), in place, on
// `out`'s device.
void accumulate(detail::IndexOp op, const Tensor& out, const Tensor& src, const Tensor& idx, int dim) {
  ANVIL_PROFILE_OP(detail::name(op), &out, &src);
  if (out.numel() == 0 || src.numel() == 0) return;
  detail::dispatch::index(detail::name(op), out.device(), index_args(op, out, src, idx, dim));
}

Tensor scaled(const Tensor& source, const Scalar& alpha) {
  NoGradGuard no_grad;  // alpha's factor is in the recorded gradient
  return alpha.to_double() == 1.0 ? source : source * alpha;
}

// The checks both forms of scatter_add share; returns the i64 index.
Tensor check_scatter_add(const char* op, const Tensor& x, int& dim, const Tensor& index, const Tensor& src) {
  ANVIL_CHECK(index.dtype() == DType::I64 || index.dtype() == DType::I32, DTypeError, op,
              ": index must be an integer tensor; expected i64, got ", index.dtype());
  ANVIL_CHECK(src.dtype() == x.dtype(), DTypeError, op, ": src must have the input's dtype; expected ", x.dtype(),
              ", got ", src.dtype());
  ANVIL_CHECK(index.dim() == x.dim() && src.dim() == x.dim(), ShapeError, op,
              ": index and src must have as many dims as the input; expected ", x.dim(), ", got ", index.dim(), " and ",
              src.dim());
  dim = wrap_dim(dim, std::max(x.dim(), 1), op);
  for (int i = 0; i < x.dim(); ++i) {
    ANVIL_CHECK(index.shape()[i] <= src.shape()[i] && (i == dim || index.shape()[i] <= x.shape()[i]), ShapeError, op,
                ": index is larger than src or the input in dim ", i, "; expected index.size(", i,
                ") <= ", src.shape()[i], i == dim ? "" : detail::cat(" and <= ", x.shape()[i]), ", got ",
                index.shape());
  }
  return detail::cast(index, DType::I64);
}

// scatter_add's adds into `out`: the blocks of out and src that index covers.
void scatter_accumulate(const Tensor& out, const Tensor& src, const Tensor& idx, int dim) {
  if (idx.numel() == 0) return;
  Tensor o = out, s = src;
  for (int i = 0; i < idx.dim(); ++i) {
    s = s.narrow(i, 0, idx.shape()[i]);
    if (i != dim) o = o.narrow(i, 0, idx.shape()[i]);
  }
  accumulate(detail::IndexOp::ScatterAdd, o, s, idx, dim);
}
}  // namespace

Tensor index_add(const Tensor& x, int dim, const Tensor& index, const Tensor& source, const Scalar& alpha) {
  const Device d = detail::check_same_device("index_add", {&x, &index, &source});
  const Tensor xx = x.dim() == 0 ? x.reshape({1}) : x;
  const Tensor ss = source.dim() == 0 ? source.reshape({1}) : source;
  const Tensor idx = check_index_add("index_add", xx, dim, index, ss);
  Tensor out = detail::make_empty(xx.shape(), x.dtype(), d);
  detail::copy_into(out, xx);
  accumulate(detail::IndexOp::IndexAdd, out, scaled(ss, alpha), idx, dim);
  detail::record_index_add(out, xx, ss, dim, idx, alpha.to_double());
  return x.dim() == 0 ? out.reshape({}) : out;
}

Tensor index_copy(const Tensor& x, int dim, const Tensor& index, const Tensor& source) {
  const Device d = detail::check_same_device("index_copy", {&x, &index, &source});
  const Tensor xx = x.dim() == 0 ? x.reshape({1}) : x;
  const Tensor ss = source.dim() == 0 ? source.reshape({1}) : source;
  const Tensor idx = check_index_add("index_copy", xx, dim, index, ss);
  Tensor out = detail::make_empty(xx.shape(), x.dtype(), d);
  detail::copy_into(out, xx);
  accumulate(detail::IndexOp::IndexCopy, out, ss, idx, dim);
  detail::record_index_copy(out, xx, ss, dim, idx);
  return x.dim() == 0 ? out.reshape({}) : out;
}

Tensor scatter_add(const Tensor& x, int dim, const Tensor& index, const Tensor& src) {
  detail::check_same_device("scatter_add", {&x, &index, &src});
  const Tensor idx = check_scatter_add("scatter_add", x, dim, index, src);
  Tensor out = detail::make_empty(x.shape(), x.dtype(), x.device());
  detail::copy_into(out, x);
  scatter_accumulate(out.dim() == 0 ? out.reshape({1}) : out, src.dim() == 0 ? src.reshape({1}) : src,
                     idx.dim() == 0 ? idx.reshape({1}) : idx, dim);
  detail::record_scatter_add(out, x, src, dim, idx);
  return out;
}

Tensor& Tensor::index_add_(int dim, const Tensor& index, const Tensor& source, const Scalar& alpha) {
  detail::check_same_device("index_add_", {this, &index, &source});
  detail::check_inplace("index_add_", *this, &source);
  const Tensor xx = this->dim() == 0 ? reshape({1}) : *this;
  // Rows go elsewhere than they come from: a source in this tensor's memory
  // is read from a copy (Note [Overlapping operands]).
  const Tensor ss = detail::unaliased(source.dim() == 0 ? source.reshape({1}) : source, *this, false);
  const Tensor idx = check_index_add("index_add_", xx, dim, index, ss);
  accumulate(detail::IndexOp::IndexAdd, xx, scaled(ss, alpha), idx, dim);
  return *this;
}

Tensor& Tensor::index_copy_(int dim, const Tensor& index, const Tensor& source) {
  detail::check_same_device("index_copy_", {this, &index, &source});
  detail::check_inplace("index_copy_", *this, &source);
  const Tensor xx = this->dim() == 0 ? reshape({1}) : *this;
  const Tensor ss = detail::unaliased(source.dim() == 0 ? source.reshape({1}) : source, *this, false);
  const Tensor idx = check_index_add("index_copy_", xx, dim, index, ss);
  accumulate(detail::IndexOp::IndexCopy, xx, ss, idx, dim);
  return *this;
}

Tensor& Tensor::scatter_add_(int dim, const Tensor& index, const Tensor& src) {
  detail::check_same_device("scatter_add_", {this, &index, &src});
  detail::check_inplace("scatter_add_", *this, &src);
  const Tensor idx = check_scatter_add("scatter_add_", *this, dim, index, src);
  const Tensor from = detail::unaliased(src, *this, false);
  scatter_accumulate(this->dim() == 0 ? reshape({1}) : *this, from.dim() == 0 ? from.reshape({1}) : from,
                     idx.dim() == 0 ? idx.reshape({1}) : idx, dim);
  return *this;
}

// --- Tensor members that are views -------------------------------------------------
Tensor Tensor::reshape(const Shape& s) const { return anvil::reshape(*this, s); }
Tensor Tensor::view(const Shape& s) const { return anvil::view(*this, s); }
Tensor Tensor::transpose(int d0, int d1) const { return anvil::transpose(*this, d0, d1); }
Tensor Tensor::permute(const Dims& dims) const { return anvil::permute(*this, dims); }
Tensor Tensor::t() const { return anvil::t(*this); }
Tensor Tensor::slice(int dim, std::int64_t start, std::int64_t end, std::int64_t step) const {
  return anvil::slice(*this, dim, start, end, step);
}
Tensor Tensor::narrow(int dim, std::int64_t start, std::int64_t length) const {
  return anvil::narrow(*this, dim, start, length);
}
Tensor Tensor::select(int dim, std::int64_t index) const { return anvil::select(*this, dim, index); }
Tensor Tensor::expand(const Shape& s) const { return anvil::expand(*this, s); }
Tensor Tensor::repeat(const Shape& sizes) const { return anvil::repeat(*this, sizes); }
Tensor Tensor::squeeze() const { return anvil::squeeze(*this); }
Tensor Tensor::squeeze(const Dims& dims) const { return anvil::squeeze(*this, dims); }
Tensor Tensor::index_select(int dim, const Tensor& index) const { return anvil::index_select(*this, dim, index); }
Tensor Tensor::gather(int dim, const Tensor& index) const { return anvil::gather(*this, dim, index); }
Tensor Tensor::index_add(int dim, const Tensor& index, const Tensor& source, const Scalar& alpha) const {
  return anvil::index_add(*this, dim, index, source, alpha);
}
Tensor Tensor::scatter_add(int dim, const Tensor& index, const Tensor& src) const {
  return anvil::scatter_add(*this, dim, index, src);
}
Tensor Tensor::index_copy(int dim, const Tensor& index, const Tensor& source) const {
  return anvil::index_copy(*this, dim, index, source);
}
Tensor Tensor::flip(const Dims& dims) const { return anvil::flip(*this, dims); }
std::vector<Tensor> Tensor::split(std::int64_t split_size, int dim) const {
  return anvil::split(*this, split_size, dim);
}
std::vector<Tensor> Tensor::split(const std::vector<std::int64_t>& sizes, int dim) const {
  return anvil::split(*this, sizes, dim);
}
std::vector<Tensor> Tensor::chunk(std::int64_t chunks, int dim) const { return anvil::chunk(*this, chunks, dim); }
Tensor Tensor::unsqueeze(int dim) const { return anvil::unsqueeze(*this, dim); }
Tensor Tensor::flatten(int start_dim, int end_dim) const { return anvil::flatten(*this, start_dim, end_dim); }
Tensor Tensor::contiguous() const { return anvil::contiguous(*this); }
Tensor Tensor::contiguous(MemoryFormat format) const { return anvil::contiguous(*this, format); }
Tensor Tensor::clone(MemoryFormat format) const { return anvil::clone(*this, format); }

}  // namespace anvil
