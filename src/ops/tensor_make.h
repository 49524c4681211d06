// Tensor handles over the core's TensorImpl, for the op frontend and
// autograd: fresh tensors, views, and the operand a kernel sees.
#pragma once

#include "anvil/tensor.h"
#include "core/tensor_impl.h"

namespace anvil::detail {

// A fresh contiguous tensor (uninitialised memory) on `d`.
Tensor make_empty(const Shape& shape, DType dtype, Device d);
// A fresh tensor laid out in `format` (ChannelsLast: 4-d shapes; any other
// shape, and Preserve, come out contiguous).
Tensor make_empty(const Shape& shape, DType dtype, Device d, MemoryFormat format);
// The strides of a dense channels-last [N, C, H, W]: [H*W*C, 1, W*C, C].
Strides channels_last_strides(const Shape& shape);
// A view of `base`'s storage with another shape/strides/offset/dtype.
Tensor make_view(const Tensor& base, const Shape& shape, const Strides& strides, std::int64_t offset);

// The operand a kernel sees for `t` (strides as stored).
inline KernelOperand operand(const Tensor& t) { return operand(t.impl_ref()); }
// The operand of `t`'s elements seen through other strides (im2col's matrix
// as the six dims its kernels index).
inline KernelOperand operand(const Tensor& t, const Strides& strides) {
  KernelOperand op = operand(t);
  for (int i = 0; i < strides.size(); ++i) op.strides[i] = strides[i];
  return op;
}

}  // namespace anvil::detail
