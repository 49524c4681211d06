// The gradient rule of interpolate's kernel path (src/ops/interpolate.cpp,
// Note [Interpolation]): interpolate is linear in x, so its gradient is the
// adjoint, the backend's interpolate_backward. PyTorch's node names, without
// its version suffix.
#include "autograd/graph.h"
#include "ops/op_common.h"

namespace anvil::detail {

void record_interpolate(const Tensor& out, const Tensor& x, const InterpolateArgs& shape) {
  if (!should_record({&x})) return;
  const bool bilinear = shape.mode == InterpMode::Bilinear;
  record(bilinear ? "UpsampleBilinear2DBackward" : "UpsampleNearest2DBackward", out, {&x},
         [shape](const Tensor& g, const std::vector<bool>&) {
           return std::vector<Tensor>{interpolate_backward(g, shape)};
         });
}

}  // namespace anvil::detail
