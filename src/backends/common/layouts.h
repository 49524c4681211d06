// Host mirrors of the argument blocks in src/kernels/layout.kern (and window.kern). Every
// field is 64-bit, so the layouts agree without packing pragmas; the
// static_asserts catch a field added on one side only.
#pragma once

#include <cstdint>

#include "anvil/shape.h"

namespace anvil::device_common {

// The kernels' ANVIL_MAX_DIMS is defined from this by assemble_source
// (kernel_sources.cpp): one limit, anvil::kMaxDims, for tensors, the
// primitives' argument blocks and the kernels.
inline constexpr int kLayoutDims = kMaxDims;

struct EwLayout {
  std::int64_t shape[kLayoutDims];
  std::int64_t stride[4][kLayoutDims];
  std::int64_t offset[4];
  std::int64_t ndim;
  std::int64_t numel;
  std::int64_t scalar_mask;
};
static_assert(sizeof(EwLayout) == 8 * (kLayoutDims + 4 * kLayoutDims + 4 + 3));

struct ReduceLayout {
  std::int64_t kshape[kLayoutDims];
  std::int64_t kstride[kLayoutDims];
  std::int64_t ostride[kLayoutDims];
  std::int64_t rshape[kLayoutDims];
  std::int64_t rstride[kLayoutDims];
  std::int64_t nkept, nred;
  std::int64_t out_numel, red_numel;
  std::int64_t in_offset, out_offset;
  std::int64_t parts;
  std::int64_t has_scale;
};
static_assert(sizeof(ReduceLayout) == 8 * (5 * kLayoutDims + 8));

struct IndexLayout {
  std::int64_t shape[kLayoutDims];
  std::int64_t out_stride[kLayoutDims];
  std::int64_t src_stride[kLayoutDims];
  std::int64_t idx_stride[kLayoutDims];
  std::int64_t out_offset, src_offset, idx_offset;
  std::int64_t ndim, dim, numel, src_dim_size;
};
static_assert(sizeof(IndexLayout) == 8 * (4 * kLayoutDims + 7));

struct GemmLayout {
  std::int64_t m, n, k, batch;
  std::int64_t a_offset, a_rs, a_cs, a_bstride;
  std::int64_t b_offset, b_rs, b_cs, b_bstride;
  std::int64_t c_offset, c_rs, c_bstride;
  std::int64_t beta_zero;
};
static_assert(sizeof(GemmLayout) == 8 * 16);

struct WindowLayout {
  std::int64_t n, c, h, w, kh, kw, sh, sw, ph, pw, oh, ow;
  std::int64_t img_offset, img_sn, img_sc, img_sh, img_sw;
  std::int64_t out_offset, idx_offset;
  std::int64_t dh, dw;
  std::int64_t out_sn, out_sc, out_si, out_sj, out_sh, out_sw;
  std::int64_t idx_sn, idx_sc, idx_sh, idx_sw;
};
static_assert(sizeof(WindowLayout) == 8 * 31);

// interpolate.kern's anvil_interp_layout.
struct InterpLayout {
  std::int64_t n, c, h, w, oh, ow;
  std::int64_t img_offset, img_sn, img_sc, img_sh, img_sw;
  std::int64_t out_offset;
  std::int64_t bilinear, align_corners;
};
static_assert(sizeof(InterpLayout) == 8 * 14);

}  // namespace anvil::device_common
