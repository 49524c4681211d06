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

Tensor make_view(const Tensor& base, const Shape& shape, const Strides& strides, std::int64_t offset) {
  const TensorImpl& b = base.impl_ref();
  return Tensor(std::make_shared<TensorImpl>(b.storage(), shape, strides, offset, b.dtype()));
}

}  // namespace anvil::detail
