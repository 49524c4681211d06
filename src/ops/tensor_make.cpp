#include "ops/tensor_make.h"

#include <memory>

#include "anvil/error.h"

namespace anvil::detail {

Tensor make_empty(const Shape& shape, DType dtype, Device d) {
  for (int i = 0; i < shape.size(); ++i)
    ANVIL_CHECK(shape[i] >= 0, ShapeError, "empty: negative dimension; expected sizes >= 0, got ", shape);
  const std::int64_t numel = shape.numel();
  const std::int64_t nbytes = checked_mul(numel, static_cast<std::int64_t>(element_size(dtype)), "empty");
  auto storage = std::make_shared<Storage>(d, static_cast<std::size_t>(nbytes));
  return Tensor(std::make_shared<TensorImpl>(std::move(storage), shape, contiguous_strides(shape), 0, dtype));
}

Strides channels_last_strides(const Shape& shape) {
  ANVIL_ASSERT(shape.size() == 4, "channels_last_strides: a 4-d shape, got ", shape);
  const std::int64_t c = shape[1], h = shape[2], w = shape[3];
  return Strides{h * w * c, 1, w * c, c};
}

Tensor make_empty(const Shape& shape, DType dtype, Device d, MemoryFormat format) {
  Tensor t = make_empty(shape, dtype, d);
  if (format != MemoryFormat::ChannelsLast || shape.size() != 4) return t;
  TensorImpl& impl = t.impl_ref();
  return Tensor(std::make_shared<TensorImpl>(impl.storage(), shape, channels_last_strides(shape), 0, dtype));
}

Tensor make_view(const Tensor& base, const Shape& shape, const Strides& strides, std::int64_t offset) {
  const TensorImpl& b = base.impl_ref();
  return Tensor(std::make_shared<TensorImpl>(b.storage(), shape, strides, offset, b.dtype()));
}

}  // namespace anvil::detail
