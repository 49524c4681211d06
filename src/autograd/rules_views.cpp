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
  const auto place = [dim, start, end, step](const Tensor& z) { return z.slice(dim, start, end, step); };
  record_view(
      "SliceBackward", out, x,
      [s, place](const Tensor& g, const std::vector<bool>&) { return Grads{scatter_into_zeros(g, s, place)}; }, place);
}

void record_select(const Tensor& out, const Tensor& x, int dim, std::int64_t index) {
  if (!should_record({&x})) return;
  const Shape s = x.shape();
  const auto place = [dim, index](const Tensor& z) { return z.select(dim, index); };
  record_view(
      "SelectBackward", out, x,
      [s, place](const Tensor& g, const std::vector<bool>&) { return Grads{scatter_into_zeros(g, s, place)}; }, place);
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

// index_select and gather are the transposes of index_add and scatter_add,
// and the other way round: each gradient is one pass of the other primitive,
// O(numel) memory, where a one-hot matrix would be index.numel() * size.
void record_index_select(const Tensor& out, const Tensor& x, int dim, const Tensor& index) {
  if (!is_floating(out.dtype()) || !should_record({&x})) return;
  const Shape s = x.shape();
  const Tensor si = saved(index);
  record("IndexSelectBackward", out, {&x}, [s, dim, si](const Tensor& g, const std::vector<bool>&) {
    return Grads{index_add(zeros(s, g.device(), g.dtype()), dim, si, g)};
  });
}

void record_gather(const Tensor& out, const Tensor& x, int dim, const Tensor& index) {
  if (!is_floating(out.dtype()) || !should_record({&x})) return;
  const Shape s = x.shape();
  const Tensor si = saved(index);
  record("GatherBackward", out, {&x}, [s, dim, si](const Tensor& g, const std::vector<bool>&) {
    return Grads{scatter_add(zeros(s, g.device(), g.dtype()), dim, si, g)};
  });
}

void record_index_add(const Tensor& out, const Tensor& x, const Tensor& source, int dim, const Tensor& index,
                      double alpha) {
  if (!is_floating(out.dtype()) || !should_record({&x, &source})) return;
  const Tensor si = saved(index);
  record("IndexAddBackward", out, {&x, &source}, [dim, si, alpha](const Tensor& g, const std::vector<bool>& n) {
    Tensor gs;
    if (n[1]) {
      gs = index_select(g, dim, si);
      if (alpha != 1.0) gs = gs * alpha;
    }
    return Grads{n[0] ? g : Tensor(), gs};
  });
}

void record_index_copy(const Tensor& out, const Tensor& x, const Tensor& source, int dim, const Tensor& index) {
  if (!is_floating(out.dtype()) || !should_record({&x, &source})) return;
  const Tensor si = saved(index);
  const Shape ss = source.shape();
  const std::int64_t n = x.shape()[dim];
  record("IndexCopyBackward", out, {&x, &source}, [dim, si, ss, n](const Tensor& g, const std::vector<bool>& need) {
    Tensor gx, gs;
    if (need[0]) gx = index_copy(g, dim, si, zeros(ss, g.device(), g.dtype()));
    if (need[1]) {
      // Row i of source was the last write to its target when the target's
      // last writer (index_copy of the positions) is i.
      const std::int64_t m = si.numel();
      const Tensor pos = arange(Scalar(0), Scalar(m), Scalar(1), g.device(), DType::I64);
      const Tensor last = index_copy(zeros({n}, g.device(), DType::I64), 0, si, pos);
      Shape along(std::vector<std::int64_t>(static_cast<std::size_t>(ss.size()), 1));
      along[dim] = m;
      const Tensor kept = eq(index_select(last, 0, si), pos).reshape(along);
      gs = where(kept, index_select(g, dim, si), Scalar(0.0));
    }
    return Grads{gx, gs};
  });
}

void record_scatter_add(const Tensor& out, const Tensor& x, const Tensor& src, int dim, const Tensor& index) {
  if (!is_floating(out.dtype()) || !should_record({&x, &src})) return;
  const Tensor si = saved(index);
  const Shape ss = src.shape();
  record("ScatterAddBackward", out, {&x, &src}, [dim, si, ss](const Tensor& g, const std::vector<bool>& n) {
    Tensor gs;
    if (n[1]) {
      gs = gather(g, dim, si);  // index's shape; src beyond it received nothing
      if (gs.shape() != ss) {
        Tensor z = zeros(ss, g.device(), g.dtype());
        Tensor view = z;
        for (int i = 0; i < ss.size(); ++i) view = view.narrow(i, 0, gs.shape()[i]);
        view.copy_(gs);
        gs = z;
      }
    }
    return Grads{n[0] ? g : Tensor(), gs};
  });
}

}  // namespace anvil::detail
