// interpolate (torch.nn.functional.interpolate over [N, C, H, W]): the
// arguments are checked here once, the output size and the source step per
// output pixel worked out as PyTorch does, then the backend's kernels run it
// (Note [Interpolation] in core/backend.h). A backend without them (or
// ANVIL_NO_FUSED=1) gets the composite below, from primitives every backend
// has: nearest as two index_selects, bilinear as two GEMMs with
// interpolation matrices built on x's device. Its gradient is the adjoint:
// the backend's gather kernel, or the composite's own autograd.
#include <cmath>
#include <limits>
#include <string>

#include "anvil/autograd.h"
#include "autograd/graph.h"
#include "core/observer.h"
#include "ops/op_common.h"

namespace anvil {

namespace {

using detail::InterpMode;
using detail::InterpolateArgs;

// The source step per output pixel, as the kernels use it (Note
// [Interpolation]): PyTorch's area_pixel_compute_scale for bilinear, in f64
// for f64 and f32 otherwise, and its nearest_idx's scale, always in f32.
// `factor` is the scale_factor that maps pixels, 0 when the sizes' ratio does.
double source_step(std::int64_t in, std::int64_t out, double factor, InterpMode mode, bool align_corners, bool wide) {
  const bool f64 = wide && mode == InterpMode::Bilinear;
  if (mode == InterpMode::Bilinear && align_corners) {
    if (out <= 1) return 0.0;
    return f64 ? static_cast<double>(in - 1) / static_cast<double>(out - 1)
               : static_cast<double>(static_cast<float>(in - 1) / static_cast<float>(out - 1));
  }
  if (factor > 0) return f64 ? 1.0 / factor : static_cast<double>(static_cast<float>(1.0 / factor));
  return f64 ? static_cast<double>(in) / static_cast<double>(out)
             : static_cast<double>(static_cast<float>(in) / static_cast<float>(out));
}

InterpMode parse_mode(const std::string& mode) {
  if (mode == "nearest") return InterpMode::Nearest;
  if (mode == "bilinear") return InterpMode::Bilinear;
  ANVIL_CHECK(mode != "bicubic" && mode != "area" && mode != "nearest-exact", NotSupported, "interpolate: mode '", mode,
              "' is not implemented; expected 'nearest' or 'bilinear', got '", mode, "'");
  ANVIL_CHECK(mode != "linear" && mode != "trilinear", ValueError, "interpolate: mode '", mode, "' is for ",
              mode == "linear" ? "3-D" : "5-D", " inputs; expected 'bilinear' for [N, C, H, W], got '", mode, "'");
  throw ValueError(detail::cat("interpolate: unknown mode; expected 'nearest' or 'bilinear', got '", mode, "'"));
}

// Validates x and the options; the geometry, operands unset.
InterpolateArgs interpolate_shape(const Tensor& x, const InterpolateOptions& o) {
  detail::check_defined("interpolate", x);
  ANVIL_CHECK(x.dim() == 4, ShapeError, "interpolate: input must be [N, C, H, W]; expected 4 dims, got ", x.shape());
  ANVIL_CHECK(is_floating(x.dtype()), DTypeError,
              "interpolate: input must be floating; expected f16, bf16, f32 or f64, got ", x.dtype());
  const InterpMode mode = parse_mode(o.mode);
  ANVIL_CHECK(mode == InterpMode::Bilinear || !o.align_corners.has_value(), ValueError,
              "interpolate: align_corners applies to bilinear only; expected it unset for mode 'nearest', got ",
              *o.align_corners ? "true" : "false");
  const bool has_size = o.size[0] != 0 || o.size[1] != 0;
  const bool has_factor = o.scale_factor[0] != 0 || o.scale_factor[1] != 0;
  ANVIL_CHECK(has_size != has_factor, ValueError,
              "interpolate: give exactly one of size and scale_factor; expected one, got ",
              has_size ? "both" : "neither");
  InterpolateArgs a;
  a.dtype = x.dtype();
  a.mode = mode;
  a.align_corners = o.align_corners.value_or(false);
  a.n = x.size(0), a.c = x.size(1), a.h = x.size(2), a.w = x.size(3);
  ANVIL_CHECK(a.h > 0 && a.w > 0, ShapeError,
              "interpolate: input must have a non-empty H and W; expected H, W > 0, got ", x.shape());
  double factor[2] = {0, 0};
  if (has_size) {
    a.oh = o.size[0], a.ow = o.size[1];
  } else {
    for (double f : o.scale_factor)
      ANVIL_CHECK(f > 0 && std::isfinite(f), ValueError,
                  "interpolate: scale_factor must be positive and finite; expected e.g. {2, 2}, got {",
                  o.scale_factor[0], ", ", o.scale_factor[1], "}");
    // Python's math.floor(float(H) * scale_factor), in double.
    a.oh = static_cast<std::int64_t>(std::floor(static_cast<double>(a.h) * o.scale_factor[0]));
    a.ow = static_cast<std::int64_t>(std::floor(static_cast<double>(a.w) * o.scale_factor[1]));
    if (!o.recompute_scale_factor) factor[0] = o.scale_factor[0], factor[1] = o.scale_factor[1];
  }
  ANVIL_CHECK(a.oh > 0 && a.ow > 0, ValueError,
              "interpolate: the output size must be positive; expected OH, OW > 0, got [", a.oh, ", ", a.ow,
              "] for input ", x.shape());
  const bool wide = x.dtype() == DType::F64;
  a.scale_h = source_step(a.h, a.oh, factor[0], mode, a.align_corners, wide);
  a.scale_w = source_step(a.w, a.ow, factor[1], mode, a.align_corners, wide);
  return a;
}

// ---- the composite, from primitives ------------------------------------------------

// [out] source indices of nearest along one dim (Note [Interpolation]), i64,
// computed in f32 on `d` as the kernels do.
Tensor nearest_indices(std::int64_t in, std::int64_t out, double step, Device d) {
  if (out == 2 * in) step = 0.5;                                                // o >> 1, whatever scale_factor said
  const Tensor src = (arange(0, out, 1, d, DType::F32) * step).to(DType::I64);  // >= 0: the cast floors
  return minimum(src, Scalar(in - 1));
}

// [out, in] bilinear weights along one dim, in `t` (f32 or f64), on `d`:
// row o holds 1 - l at i0 and l at i1 (both at i0 == i1).
Tensor bilinear_matrix(std::int64_t in, std::int64_t out, double step, bool align_corners, Device d, DType t) {
  const Tensor o = arange(0, out, 1, d, t);
  const Tensor src = align_corners ? o * step : maximum((o + 0.5) * step - 0.5, Scalar(0.0));
  const Tensor i0 = floor(src);
  const Tensor i1 = minimum(i0 + 1, Scalar(static_cast<double>(in - 1)));
  const Tensor l = (src - i0).unsqueeze(1);
  const Tensor j = arange(0, in, 1, d, t).unsqueeze(0);
  return eq(j, i0.unsqueeze(1)).to(t) * (1.0 - l) + eq(j, i1.unsqueeze(1)).to(t) * l;
}

// Differentiable through index_select and matmul. A dim whose size does not
// change is left as it is (PyTorch's copy). Bilinear's GEMMs multiply every
// pixel of a row, so an inf anywhere in a row gives NaN in the whole output
// row here, where the kernels give it only near the inf.
Tensor interpolate_composite(const Tensor& x, const InterpolateArgs& a) {
  const Device d = x.device();
  if (a.mode == InterpMode::Nearest) {
    Tensor y = x;
    if (a.oh != a.h) y = index_select(y, 2, nearest_indices(a.h, a.oh, a.scale_h, d));
    if (a.ow != a.w) y = index_select(y, 3, nearest_indices(a.w, a.ow, a.scale_w, d));
    return a.oh == a.h && a.ow == a.w ? x.clone() : y;
  }
  const DType t = a.dtype == DType::F64 ? DType::F64 : DType::F32;
  Tensor y = x.to(t);
  if (a.ow != a.w) y = matmul(y, bilinear_matrix(a.w, a.ow, a.scale_w, a.align_corners, d, t).t());
  if (a.oh != a.h) y = matmul(bilinear_matrix(a.h, a.oh, a.scale_h, a.align_corners, d, t), y);
  if (a.oh == a.h && a.ow == a.w) y = y.clone();
  return y.to(a.dtype);
}

// The backend's kernel (Note [Interpolation]); its gradient is the adjoint kernel.
Tensor interpolate_fused(const Tensor& x, const InterpolateArgs& shape) {
  InterpolateArgs a = shape;
  Tensor out = detail::make_empty({a.n, a.c, a.oh, a.ow}, x.dtype(), x.device());
  a.image = detail::operand(x), a.out = detail::operand(out);
  if (out.numel() > 0) detail::dispatch::interpolate(x.device(), a);
  detail::record_interpolate(out, x, shape);
  return out;
}

}  // namespace

namespace detail {

Tensor interpolate_backward(const Tensor& grad, const InterpolateArgs& shape) {
  ANVIL_PROFILE_OP("interpolate_backward", &grad);
  ANVIL_ASSERT(grad.shape() == Shape({shape.n, shape.c, shape.oh, shape.ow}), "interpolate_backward: unexpected grad ",
               grad.shape());
  InterpolateArgs a = shape;
  const Tensor g = grad.dtype() == a.dtype ? grad.contiguous() : grad.to(a.dtype).contiguous();
  Tensor image = make_empty({a.n, a.c, a.h, a.w}, a.dtype, grad.device());
  a.image = operand(image), a.out = operand(g);
  if (image.numel() > 0) dispatch::interpolate_backward(grad.device(), a);
  return image;
}

}  // namespace detail

Tensor interpolate(const Tensor& x, const InterpolateOptions& options) {
  ANVIL_PROFILE_OP("interpolate", &x);
  const InterpolateArgs shape = interpolate_shape(x, options);
  if (detail::has_fused(x, {detail::FusedOp::Interpolate, detail::FusedOp::InterpolateBackward}))
    return interpolate_fused(x, shape);
  return interpolate_composite(x, shape);
}

}  // namespace anvil
