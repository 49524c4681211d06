#include "ops/op_common.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "core/env_flag.h"
#include "core/observer.h"

namespace anvil::detail {

void check_defined(const char* op, const Tensor& t, int arg) {
  ANVIL_CHECK(t.defined(), ValueError, op, ": argument ", arg,
              " is an undefined tensor; expected a tensor created by a factory or an op, got Tensor()");
}

bool has_fused(const Tensor& x, std::initializer_list<FusedOp> ops) {
  if (env_flag("ANVIL_NO_FUSED")) return false;
  const Device d = x.device();
  for (FusedOp op : ops)
    if (!dispatch::supports_fused(d, op, x.dtype())) return false;
  return true;
}

Device check_same_device(const char* op, std::initializer_list<const Tensor*> tensors) {
  int i = 0;
  for (const Tensor* t : tensors) check_defined(op, *t, i++);
  const Device first = (*tensors.begin())->impl_ref().device();
  i = 0;
  for (const Tensor* t : tensors) {
    const Device d = t->impl_ref().device();
    if (!(d == first)) [[unlikely]] {
      throw DeviceMismatch(cat(op, ": all tensors must be on one device; argument 0 is on ", first, ", argument ", i,
                               " is on ", d, "; move one with .to(", first, ")"));
    }
    ++i;
  }
  return first;
}

Device check_same_device(const char* op, const std::vector<Tensor>& tensors) {
  ANVIL_CHECK(!tensors.empty(), ValueError, op, ": expected a non-empty list of tensors, got an empty list");
  for (std::size_t i = 0; i < tensors.size(); ++i) check_defined(op, tensors[i], static_cast<int>(i));
  const Device first = tensors[0].impl_ref().device();
  for (std::size_t i = 1; i < tensors.size(); ++i) {
    const Device d = tensors[i].impl_ref().device();
    if (!(d == first)) [[unlikely]] {
      throw DeviceMismatch(cat(op, ": all tensors must be on one device; argument 0 is on ", first, ", argument ", i,
                               " is on ", d, "; move one with .to(", first, ")"));
    }
  }
  return first;
}

int wrap_dim(int dim, int ndim, const char* op) {
  const int lo = ndim == 0 ? -1 : -ndim, hi = ndim == 0 ? 0 : ndim - 1;
  ANVIL_CHECK(dim >= lo && dim <= hi, IndexError, op, ": dimension out of range; expected a dim in [", lo, ", ", hi,
              "], got ", dim);
  return dim < 0 ? dim + (ndim == 0 ? 1 : ndim) : dim;
}

void broadcast_strides(const Tensor& t, const Shape& shape, std::int64_t* out) {
  const TensorImpl& impl = t.impl_ref();
  const int nd = shape.size(), td = impl.dim();
  for (int i = 0; i < nd; ++i) {
    const int ti = i - (nd - td);
    out[i] = ti < 0 || impl.shape()[ti] == 1 ? 0 : impl.strides()[ti];
  }
}

ElementwiseArgs elementwise_args(const Tensor& out, std::initializer_list<const Tensor*> inputs,
                                 std::initializer_list<Scalar> scalars, DType scalar_dtype) {
  ElementwiseArgs a;
  const TensorImpl& o = out.impl_ref();
  const Shape& shape = o.shape();
  const int nd = shape.size();
  a.numel = o.numel();
  a.out = operand(out);
  a.nin = static_cast<int>(inputs.size());
  const Scalar* next_scalar = scalars.begin();
  int k = 0;
  for (const Tensor* t : inputs) {
    KernelOperand& op = a.in[k++];
    if (t == nullptr) {
      op.is_scalar = true;
      op.scalar = *next_scalar++;
      op.dtype = scalar_dtype;
      continue;
    }
    const TensorImpl& impl = t->impl_ref();
    op.data = impl.storage()->data();
    op.offset = impl.offset();
    op.dtype = impl.dtype();
    broadcast_strides(*t, shape, op.strides);
  }
  KernelOperand* ops[4] = {&a.out, &a.in[0], &a.in[1], &a.in[2]};
  const int nops = 1 + a.nin;
  // Walk the dims in out's memory order, largest stride first: an op on
  // tensors in a permuted layout (a transposed weight's gradient, summed in
  // place over a recurrent layer's steps) then runs as the dense block it is
  // instead of striding through memory. Every operand's strides follow the
  // same permutation, so the element-by-element meaning is unchanged.
  int order[kMaxDims];
  int dims = 0;
  for (int d = 0; d < nd; ++d)
    if (shape[d] != 1) order[dims++] = d;  // size-1 dims are dropped
  // A stable insertion sort: at most kMaxDims entries, and std::stable_sort
  // would allocate a buffer on every op (a tenth of a small op's time).
  for (int i = 1; i < dims; ++i)
    for (int j = i; j > 0 && a.out.strides[order[j - 1]] < a.out.strides[order[j]]; --j)
      std::swap(order[j - 1], order[j]);
  std::int64_t strides[4][kMaxDims];
  for (int j = 0; j < nops; ++j)
    for (int i = 0; i < dims; ++i) strides[j][i] = ops[j]->strides[order[i]];
  // Coalesce: merge dim i into i+1 when every operand steps through them as
  // one (stride[i] == stride[i+1] * size[i+1]).
  int n = 0;
  for (int i = 0; i < dims; ++i) {
    const std::int64_t size = shape[order[i]];
    if (n > 0) {
      bool merge = true;
      for (int j = 0; j < nops && merge; ++j)
        if (!ops[j]->is_scalar) merge = ops[j]->strides[n - 1] == strides[j][i] * size;
      if (merge) {
        a.shape[n - 1] *= size;
        for (int j = 0; j < nops; ++j) ops[j]->strides[n - 1] = strides[j][i];
        continue;
      }
    }
    a.shape[n] = size;
    for (int j = 0; j < nops; ++j) ops[j]->strides[n] = strides[j][i];
    ++n;
  }
  if (n == 0) {  // a single element
    a.shape[0] = 1;
    for (int j = 0; j < nops; ++j) ops[j]->strides[0] = 1;
    n = 1;
  }
  a.ndim = n;
  return a;
}

bool is_dense_non_overlapping(const Tensor& t) {
  std::vector<std::pair<std::int64_t, std::int64_t>> dims;  // (stride, size), sizes > 1
  for (int d = 0; d < t.dim(); ++d)
    if (t.size(d) != 1) dims.emplace_back(t.strides()[d], t.size(d));
  std::sort(dims.begin(), dims.end());
  std::int64_t expected = 1;
  for (const auto& [stride, size] : dims) {
    if (stride != expected) return false;
    expected *= size;
  }
  return true;
}

MemoryFormat output_format(const Shape& shape, std::initializer_list<const Tensor*> inputs) {
  if (shape.size() != 4) return MemoryFormat::Contiguous;
  for (const Tensor* t : inputs)
    if (t != nullptr && t->shape() == shape) return t->suggest_memory_format();
  return MemoryFormat::Contiguous;
}

Tensor cast(const Tensor& t, DType dtype) {
  if (t.impl_ref().dtype() == dtype) return t;
  Tensor out = make_empty(t.shape(), dtype, t.device(), t.suggest_memory_format());
  copy_into(out, t, "to");
  return out;
}

void copy_into(const Tensor& dst, const Tensor& src, const char* op) {
  if (dst.numel() == 0) return;
  ANVIL_PROFILE_OP(op, &src);
  const Tensor from = unaliased(src, dst);
  dispatch::copy(op, dst.impl_ref().device(), elementwise_args(dst, {&from}));
}

namespace {
// The bytes [begin, end) of a tensor's storage its elements lie in.
std::pair<std::int64_t, std::int64_t> byte_extent(const TensorImpl& t) {
  const auto es = static_cast<std::int64_t>(element_size(t.dtype()));
  std::int64_t lo = t.offset(), hi = t.offset();
  for (int d = 0; d < t.shape().size(); ++d) {
    const std::int64_t reach = (t.shape()[d] - 1) * t.strides()[d];
    (reach < 0 ? lo : hi) += reach;
  }
  return {lo * es, (hi + 1) * es};
}
}  // namespace

Tensor unaliased(const Tensor& input, const Tensor& out, bool elementwise) {
  const TensorImpl& in = input.impl_ref();
  const TensorImpl& o = out.impl_ref();
  if (in.storage() != o.storage() || in.numel() == 0 || o.numel() == 0) return input;
  const bool same_elements =
      in.offset() == o.offset() && in.dtype() == o.dtype() && in.shape() == o.shape() && in.strides() == o.strides();
  if (same_elements && elementwise) return input;
  const auto [in_begin, in_end] = byte_extent(in);
  const auto [out_begin, out_end] = byte_extent(o);
  if (in_end <= out_begin || out_end <= in_begin) return input;
  Tensor copy = make_empty(in.shape(), in.dtype(), in.device(), input.suggest_memory_format());
  dispatch::copy("copy", in.device(), elementwise_args(copy, {&input}));
  return copy;
}

}  // namespace anvil::detail
