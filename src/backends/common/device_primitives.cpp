#include "backends/common/device_primitives.h"

namespace anvil::device_common {

EwLayout ew_layout(const detail::ElementwiseArgs& a) {
  EwLayout L{};
  L.ndim = a.ndim;
  L.numel = a.numel;
  for (int d = 0; d < a.ndim; ++d) L.shape[d] = a.shape[d];
  const detail::KernelOperand* ops[4] = {&a.out, &a.in[0], &a.in[1], &a.in[2]};
  for (int k = 0; k <= a.nin && k < 4; ++k) {
    if (ops[k]->is_scalar) {
      L.scalar_mask |= std::int64_t{1} << k;
      continue;
    }
    L.offset[k] = ops[k]->offset;
    for (int d = 0; d < a.ndim; ++d) L.stride[k][d] = ops[k]->strides[d];
  }
  return L;
}

namespace {
// Drops size-1 dims and merges neighbours that are contiguous in every
// stride array given, so most reductions index with one or two dims.
struct Dims {
  int n = 0;
  std::int64_t shape[kMaxDims];
  std::int64_t stride[2][kMaxDims];
};
Dims coalesce(const std::int64_t* shape, const std::int64_t* s0, const std::int64_t* s1, int ndim, int nstrides) {
  Dims d;
  for (int i = 0; i < ndim; ++i) {
    if (shape[i] == 1) continue;
    if (d.n > 0) {
      const int p = d.n - 1;
      bool merge = true;
      const std::int64_t* src[2] = {s0, s1};
      for (int k = 0; k < nstrides; ++k) merge = merge && d.stride[k][p] == src[k][i] * shape[i];
      if (merge) {
        d.shape[p] *= shape[i];
        for (int k = 0; k < nstrides; ++k) d.stride[k][p] = src[k][i];
        continue;
      }
    }
    d.shape[d.n] = shape[i];
    d.stride[0][d.n] = s0[i];
    d.stride[1][d.n] = nstrides > 1 ? s1[i] : 0;
    ++d.n;
  }
  return d;
}
}  // namespace

ReduceLayout reduce_layout(const detail::ReduceArgs& a, detail::ReduceOp op) {
  ReduceLayout L{};
  const Dims kept = coalesce(a.shape, a.in.strides, a.out.strides, a.nkept, 2);
  const Dims red = coalesce(a.shape + a.nkept, a.in.strides + a.nkept, nullptr, a.nreduced, 1);
  L.nkept = kept.n;
  for (int d = 0; d < kept.n; ++d) {
    L.kshape[d] = kept.shape[d];
    L.kstride[d] = kept.stride[0][d];
    L.ostride[d] = kept.stride[1][d];
  }
  L.nred = red.n;
  for (int d = 0; d < red.n; ++d) {
    L.rshape[d] = red.shape[d];
    L.rstride[d] = red.stride[0][d];
  }
  L.out_numel = a.out_numel;
  L.red_numel = a.reduce_numel;
  L.in_offset = a.in.offset;
  L.out_offset = a.out.offset;
  L.has_scale = (op == detail::ReduceOp::Sum || op == detail::ReduceOp::SumSquares) && a.scale != 1.0;
  return L;
}

IndexLayout index_layout(const detail::IndexArgs& a) {
  IndexLayout L{};
  L.ndim = a.ndim;
  L.dim = a.dim;
  L.numel = detail::is_scatter(a.op) ? a.numel / a.shape[a.dim] : a.numel;
  L.src_dim_size = a.src_dim_size;
  L.out_offset = a.out.offset;
  L.src_offset = a.src.offset;
  L.idx_offset = a.index.offset;
  for (int d = 0; d < a.ndim; ++d) {
    L.shape[d] = a.shape[d];
    L.out_stride[d] = a.out.strides[d];
    L.src_stride[d] = a.src.strides[d];
    // index_select's, index_add's and index_copy's index is 1-D: its one stride applies along `dim`.
    if (a.op == detail::IndexOp::IndexSelect || a.op == detail::IndexOp::IndexAdd || a.op == detail::IndexOp::IndexCopy)
      L.idx_stride[d] = d == a.dim ? a.index.strides[0] : 0;
    else
      L.idx_stride[d] = a.index.strides[d];
  }
  return L;
}

GemmLayout gemm_layout(const detail::GemmArgs& a) {
  GemmLayout L{};
  L.m = a.m;
  L.n = a.n;
  L.k = a.k;
  L.batch = a.batch;
  auto strides = [](const detail::GemmMatrix& x, std::int64_t& rs, std::int64_t& cs) {
    rs = x.trans ? 1 : x.ld;
    cs = x.trans ? x.ld : 1;
  };
  L.a_offset = a.a.offset;
  strides(a.a, L.a_rs, L.a_cs);
  L.a_bstride = a.a.batch_stride;
  L.b_offset = a.b.offset;
  strides(a.b, L.b_rs, L.b_cs);
  L.b_bstride = a.b.batch_stride;
  L.c_offset = a.c.offset;
  L.c_rs = a.c.ld;
  L.c_bstride = a.c.batch_stride;
  L.beta_zero = a.beta == 0.0;
  return L;
}

namespace {
// The geometry and the image's strides; the rest filled by the callers. A
// dimension of size 1 gets stride 1: its coordinate is 0 whatever the
// stride, and the kernels divide by the strides of the operand they write.
std::int64_t stride_of(const detail::KernelOperand& o, int d, std::int64_t size) {
  return size == 1 ? 1 : o.strides[d];
}
WindowLayout window_geometry(const detail::Window2dGeometry& g, const detail::KernelOperand& image) {
  WindowLayout L{};
  L.n = g.n, L.c = g.c, L.h = g.h, L.w = g.w, L.kh = g.kh, L.kw = g.kw, L.sh = g.sh, L.sw = g.sw;
  L.ph = g.ph, L.pw = g.pw, L.oh = g.oh, L.ow = g.ow, L.dh = g.dh, L.dw = g.dw;
  L.img_offset = image.offset;
  L.img_sn = stride_of(image, 0, g.n), L.img_sc = stride_of(image, 1, g.c);
  L.img_sh = stride_of(image, 2, g.h), L.img_sw = stride_of(image, 3, g.w);
  return L;
}
}  // namespace

WindowLayout window_layout(const detail::Im2colArgs& a) {
  const detail::Window2dGeometry& g = a.g;
  WindowLayout L = window_geometry(g, a.image);
  L.out_offset = a.cols.offset;
  L.out_sn = stride_of(a.cols, 0, g.n), L.out_sc = stride_of(a.cols, 1, g.c);
  L.out_si = stride_of(a.cols, 2, g.kh), L.out_sj = stride_of(a.cols, 3, g.kw);
  L.out_sh = stride_of(a.cols, 4, g.oh), L.out_sw = stride_of(a.cols, 5, g.ow);
  return L;
}

WindowLayout window_layout(const detail::Pool2dArgs& a) {
  const detail::Window2dGeometry& g = a.g;
  WindowLayout L = window_geometry(g, a.image);
  L.out_offset = a.out.offset, L.idx_offset = a.indices.offset;
  L.out_sn = stride_of(a.out, 0, g.n), L.out_sc = stride_of(a.out, 1, g.c);
  L.out_sh = stride_of(a.out, 2, g.oh), L.out_sw = stride_of(a.out, 3, g.ow);
  L.out_si = L.out_sj = 1;
  L.idx_sn = stride_of(a.indices, 0, g.n), L.idx_sc = stride_of(a.indices, 1, g.c);
  L.idx_sh = stride_of(a.indices, 2, g.oh), L.idx_sw = stride_of(a.indices, 3, g.ow);
  return L;
}

}  // namespace anvil::device_common
