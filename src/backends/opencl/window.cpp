// The optional fused window kernels (core/backend.h, FusedOp) for conv2d and
// max_pool2d: src/kernels/window.kern, for f32 and (where the device has it)
// f64.
#include "anvil/error.h"
#include "backends/opencl/launch.h"
#include "backends/opencl/opencl_backend.h"

namespace anvil::opencl {

namespace {

struct WindowLayout {
  std::int64_t n, c, h, w, kh, kw, sh, sw, ph, pw, oh, ow;
  std::int64_t img_offset, img_sn, img_sc, img_sh, img_sw;
  std::int64_t out_offset, idx_offset;
};
static_assert(sizeof(WindowLayout) == 8 * 19);

WindowLayout window_layout(const detail::Window2dGeometry& g, const detail::KernelOperand& image,
                           std::int64_t out_offset, std::int64_t idx_offset) {
  return {g.n,  g.c,  g.h,  g.w,  g.kh, g.kw, g.sh, g.sw, g.ph, g.pw, g.oh, g.ow, image.offset, image.strides[0],
          image.strides[1], image.strides[2], image.strides[3], out_offset, idx_offset};
}

// What an image written by col2im / max_pool2d_backward looks like: contiguous.
detail::KernelOperand contiguous_image(const detail::KernelOperand& img, const detail::Window2dGeometry& g) {
  detail::KernelOperand o = img;
  o.strides[3] = 1;
  o.strides[2] = g.w;
  o.strides[1] = g.h * g.w;
  o.strides[0] = g.c * g.h * g.w;
  return o;
}

constexpr const char* kWindowNames[] = {"im2col", "col2im", "max_pool2d", "max_pool2d_backward"};

cl_kernel window_kernel(DeviceState& s, detail::FusedOp op, DType t) {
  return s.programs.kernel(kernel_key(Family::Gemm, 16 + static_cast<int>(op), 0, dt(t)), [&] {
    const std::string prefix = std::string("window_") + (t == DType::F64 ? "f64" : "f32");
    return KernelSpec{"window.kern", " -DKPREFIX=" + prefix + " -DT=" + cl_type(t),
                      prefix + "_" + kWindowNames[static_cast<int>(op)]};
  });
}

}  // namespace

bool OpenCLBackend::supports_fused(detail::FusedOp, DType t, int index) noexcept {
  return t == DType::F32 || (t == DType::F64 && supports("fused", t, index));
}

void OpenCLBackend::im2col(int index, const detail::Im2colArgs& a) {
  OpScope scope("im2col");
  const std::int64_t total = a.g.n * a.g.c * a.g.kh * a.g.kw * a.g.oh * a.g.ow;
  if (total <= 0) return;
  DeviceState& s = state(index);
  std::lock_guard lock(s.mutex);
  const WindowLayout L = window_layout(a.g, a.image, a.cols.offset, 0);
  Launch(s, window_kernel(s, detail::FusedOp::Im2col, a.dtype))
      .buffer(a.cols.data)
      .buffer(a.image.data)
      .arg(total)
      .arg(L)
      .run(total, "im2col");
}

void OpenCLBackend::col2im(int index, const detail::Im2colArgs& a) {
  OpScope scope("col2im");
  const std::int64_t total = a.g.n * a.g.c * a.g.h * a.g.w;
  if (total <= 0) return;
  DeviceState& s = state(index);
  std::lock_guard lock(s.mutex);
  const WindowLayout L = window_layout(a.g, contiguous_image(a.image, a.g), a.cols.offset, 0);
  Launch(s, window_kernel(s, detail::FusedOp::Col2im, a.dtype))
      .buffer(a.image.data)
      .buffer(a.cols.data)
      .arg(total)
      .arg(L)
      .run(total, "col2im");
}

void OpenCLBackend::max_pool2d(int index, const detail::Pool2dArgs& a) {
  OpScope scope("max_pool2d");
  const std::int64_t total = a.g.n * a.g.c * a.g.oh * a.g.ow;
  if (total <= 0) return;
  DeviceState& s = state(index);
  std::lock_guard lock(s.mutex);
  const WindowLayout L = window_layout(a.g, a.image, a.out.offset, a.indices.offset);
  Launch(s, window_kernel(s, detail::FusedOp::MaxPool2d, a.dtype))
      .buffer(a.out.data)
      .buffer(a.indices.data)
      .buffer(a.image.data)
      .arg(total)
      .arg(L)
      .run(total, "max_pool2d");
}

void OpenCLBackend::max_pool2d_backward(int index, const detail::Pool2dArgs& a) {
  OpScope scope("max_pool2d_backward");
  const std::int64_t total = a.g.n * a.g.c * a.g.h * a.g.w;
  if (total <= 0) return;
  DeviceState& s = state(index);
  std::lock_guard lock(s.mutex);
  const WindowLayout L = window_layout(a.g, contiguous_image(a.image, a.g), a.out.offset, a.indices.offset);
  Launch(s, window_kernel(s, detail::FusedOp::MaxPool2dBackward, a.dtype))
      .buffer(a.image.data)
      .buffer(a.out.data)
      .buffer(a.indices.data)
      .arg(total)
      .arg(L)
      .run(total, "max_pool2d_backward");
}

}  // namespace anvil::opencl
