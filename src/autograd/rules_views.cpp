// Gradient rules of views, movement, casts and indexing. See Note
// [Autograd recording] in graph.h.
#include "autograd/graph.h"
#include "ops/op_common.h"

namespace anvil::detail {

namespace {
using Grads = std::vector<Tensor>;

// x's gradient when only a view of it received one: zeros elsewhere.
// `place` writes g into the right view of the zero tensor.
template <typename F>
Tensor scatter_into_zeros(const Tensor& g, const Shape& shape, F place) {
  Tensor z = zeros(shape, g.device(), g.dtype());
  place(z).copy_(g);
  return z;
}

// g moved from `dim` to the last dim and back.
Tensor movedim_last(const Tensor& t, int dim) {
  Shape p;
  for (int i = 0; i < t.dim(); ++i)
    if (i != dim) p.push_back(i);
  p.push_back(dim);
  return t.permute(p);
}
Tensor movedim_back(const Tensor& t, int dim) {
  const int nd = t.dim();
  Shape p;
  for (int i = 0; i < nd; ++i) p.push_back(i < dim ? i : (i == dim ? nd - 1 : i - 1));
  return t.permute(p);
}

// one_hot[..., j] = (index[...] == j) as `dtype`, for j in [0, n).
Tensor one_hot(const Tensor& index, std::int64_t n, DType dtype) {
  return (index.unsqueeze(-1) == arange(0, n, 1, index.device(), DType::I64)).to(dtype);
}
}  // namespace

void record_cast(const Tensor& out, const Tensor& x) {
  if (!is_floating(out.dtype()) || !should_record({&x})) return;
  record("ToCopyBackward", out, {&x}, [](const Tensor& g, const std::vector<bool>&) { return Grads{g}; });
}

void record_to_device(const Tensor& out, const Tensor& x) {
  if (!should_record({&x})) return;
  const Device d = x.device();
  record("ToCopyBackward", out, {&x}, [d](const Tensor& g, const std::vector<bool>&) { return Grads{g.to(d)}; });
}

void record_clone(const Tensor& out, const Tensor& x) {
  if (!should_record({&x})) return;
  record("CloneBackward", out, {&x}, [](const Tensor& g, const std::vector<bool>&) { return Grads{g}; });
}

void record_reshape(const char* name, const Tensor& out, const Tensor& x) {
  if (!should_record({&x})) return;
  const Shape s = x.shape();
  record(name, out, {&x}, [s](const Tensor& g, const std::vector<bool>&) { return Grads{g.reshape(s)}; });
}

void record_transpose(const Tensor& out, const Tensor& x, int dim0, int dim1) {
  if (!should_record({&x})) return;
  record("TransposeBackward", out, {&x}, [dim0, dim1](const Tensor& g, const std::vector<bool>&) {
    return Grads{g.dim() == 0 ? g : g.transpose(dim0, dim1)};
  });
}

void record_permute(const Tensor& out, const Tensor& x, const Dims& dims) {
  if (!should_record({&x})) return;
  Shape inverse = Shape::filled(dims.size(), 0);
  for (int i = 0; i < dims.size(); ++i) inverse[wrap_dim(static_cast<int>(dims[i]), dims.size(), "permute")] = i;
  record("PermuteBackward", out, {&x},
         [inverse](const Tensor& g, const std::vector<bool>&) { return Grads{g.permute(inverse)}; });
}

void record_slice(const Tensor& out, const Tensor& x, int dim, std::int64_t start, std::int64_t end,
                  std::int64_t step) {
  if (!should_record({&x})) return;
  const Shape s = x.shape();
  record("SliceBackward", out, {&x}, [s, dim, start, end, step](const Tensor& g, const std::vector<bool>&) {
    return Grads{scatter_into_zeros(g, s, [&](const Tensor& z) { return z.slice(dim, start, end, step); })};
  });
}

void record_select(const Tensor& out, const Tensor& x, int dim, std::int64_t index) {
  if (!should_record({&x})) return;
  const Shape s = x.shape();
  record("SelectBackward", out, {&x}, [s, dim, index](const Tensor& g, const std::vector<bool>&) {
    return Grads{scatter_into_zeros(g, s, [&](const Tensor& z) { return z.select(dim, index); })};
  });
}

void record_expand(const Tensor& out, const Tensor& x) {
  if (!should_record({&x})) return;
  // The engine sums the gradient back to x's shape.
  record("ExpandBackward", out, {&x}, [](const Tensor& g, const std::vector<bool>&) { return Grads{g}; });
}

void record_cat(const Tensor& out, const std::vector<Tensor>& inputs, int dim) {
  bool any = false;
  for (const Tensor& t : inputs) any = any || requires_grad(t);
  if (!any || !grad_mode_enabled()) return;
  std::vector<std::int64_t> sizes;
  for (const Tensor& t : inputs) sizes.push_back(t.shape()[dim]);
  auto fn = [sizes, dim](const Tensor& g, const std::vector<bool>& n) {
    Grads r;
    std::int64_t at = 0;
    for (std::size_t i = 0; i < sizes.size(); ++i) {
      r.push_back(n[i] ? g.narrow(dim, at, sizes[i]) : Tensor());
      at += sizes[i];
    }
    return r;
  };
  std::vector<const Tensor*> ptrs;
  for (const Tensor& t : inputs) ptrs.push_back(&t);
  record("CatBackward", out, ptrs, fn);
}

void record_index_select(const Tensor& out, const Tensor& x, int dim, const Tensor& index) {
  if (!is_floating(out.dtype()) || !should_record({&x})) return;
  const Shape s = x.shape();
  const Tensor si = saved(index);
  record("IndexSelectBackward", out, {&x}, [s, dim, si](const Tensor& g, const std::vector<bool>&) {
    if (s.size() == 0) return Grads{g.sum().reshape(s)};
    // index_add through a one-hot matrix: [.., n_idx] @ [n_idx, size] runs on
    // every backend as one GEMM.
    const Tensor oh = one_hot(si.reshape({-1}), s[dim], g.dtype());
    const Tensor gm = movedim_last(g.dim() == 0 ? g.reshape({1}) : g, dim);
    return Grads{movedim_back(matmul(gm, oh), dim).contiguous()};
  });
}

void record_gather(const Tensor& out, const Tensor& x, int dim, const Tensor& index) {
  if (!is_floating(out.dtype()) || !should_record({&x})) return;
  const Shape s = x.shape();
  const Tensor si = saved(index);
  record("GatherBackward", out, {&x}, [s, dim, si](const Tensor& g, const std::vector<bool>&) {
    // scatter_add through a one-hot expansion along `dim`.
    const Tensor oh = one_hot(si, s[dim], g.dtype());         // index.shape + [n]
    const Tensor contrib = sum(g.unsqueeze(-1) * oh, {dim});  // index.shape without dim + [n]
    const Tensor placed = movedim_back(contrib, dim);         // index.shape with dim -> n
    if (placed.shape() == s) return Grads{placed.contiguous()};
    Tensor z = zeros(s, g.device(), g.dtype());
    Tensor view = z;
    for (int i = 0; i < s.size(); ++i) view = view.narrow(i, 0, placed.shape()[i]);
    view.copy_(placed);
    return Grads{z};
  });
}

}  // namespace anvil::detail
