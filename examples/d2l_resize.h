// Bilinear image resize on the host, as the book's transforms.Resize, shared
// by the examples that train at the book's 96x96 (resnet.cpp, vit.cpp).
//
//   anvil::Tensor big = d2l::resize_bilinear(batch, 96);   // [N, C, 28, 28] -> [N, C, 96, 96]
//
// anvil has no resize op; this runs per batch on the CPU before the batch
// moves to its device, so the datasets stay at 28x28 in memory.
#pragma once

#include <algorithm>
#include <cstdint>

#include "anvil/anvil.h"

namespace d2l {

// Bilinear resize of a CPU [N, C, H, W] f32 batch to size x size, with
// PyTorch's half-pixel centres (interpolate(..., align_corners=False)).
inline anvil::Tensor resize_bilinear(const anvil::Tensor& images, std::int64_t size) {
  ANVIL_CHECK(images.dim() == 4 && images.dtype() == anvil::f32 && images.device().is_cpu(), anvil::ValueError,
              "resize_bilinear: the batch has the wrong kind; expected a cpu f32 [N, C, H, W] tensor, got ",
              images.device(), " ", images.dtype(), " ", images.shape());
  ANVIL_CHECK(size > 0, anvil::ValueError, "resize_bilinear: the size must be positive; expected > 0, got ", size);
  const anvil::Tensor x = images.contiguous();
  const std::int64_t planes = x.size(0) * x.size(1), h = x.size(2), w = x.size(3);
  anvil::Tensor out = anvil::empty({x.size(0), x.size(1), size, size});
  const float* src = x.data_ptr<float>();
  float* dst = out.data_ptr<float>();
  auto taps = [size](std::int64_t in, std::int64_t i, std::int64_t& i0, std::int64_t& i1, float& frac) {
    const double s =
        std::max(0.0, (static_cast<double>(i) + 0.5) * static_cast<double>(in) / static_cast<double>(size) - 0.5);
    i0 = std::min(static_cast<std::int64_t>(s), in - 1);
    i1 = std::min(i0 + 1, in - 1);
    frac = static_cast<float>(s - static_cast<double>(i0));
  };
  for (std::int64_t p = 0; p < planes; ++p) {
    const float* plane = src + p * h * w;
    for (std::int64_t oy = 0; oy < size; ++oy) {
      std::int64_t y0, y1;
      float fy;
      taps(h, oy, y0, y1, fy);
      for (std::int64_t ox = 0; ox < size; ++ox) {
        std::int64_t x0, x1;
        float fx;
        taps(w, ox, x0, x1, fx);
        const float top = plane[y0 * w + x0] * (1 - fx) + plane[y0 * w + x1] * fx;
        const float bottom = plane[y1 * w + x0] * (1 - fx) + plane[y1 * w + x1] * fx;
        dst[(p * size + oy) * size + ox] = top * (1 - fy) + bottom * fy;
      }
    }
  }
  return out;
}

}  // namespace d2l
