#include "core/tensor_impl.h"

#include "anvil/error.h"

namespace anvil::detail {

Storage::Storage(Device device, std::size_t nbytes)
    : device_(device), nbytes_(nbytes), backend_(&backend_checked(device, "allocate")) {
  if (nbytes_ > 0) data_ = backend_->allocate(device.index(), nbytes_);
}

Storage::~Storage() {
  if (data_ != nullptr) backend_->deallocate(device_.index(), data_, nbytes_);
}

bool is_contiguous(const Shape& shape, const Strides& strides) noexcept {
  std::int64_t expected = 1;
  for (int i = shape.size() - 1; i >= 0; --i) {
    if (shape[i] == 1) continue;
    if (shape[i] == 0) return true;
    if (strides[i] != expected) return false;
    expected *= shape[i];
  }
  return true;
}

TensorImpl::TensorImpl(std::shared_ptr<Storage> storage, const Shape& shape, const Strides& strides,
                       std::int64_t offset, DType dtype)
    : storage_(std::move(storage)),
      shape_(shape),
      strides_(strides),
      offset_(offset),
      numel_(shape.numel()),
      dtype_(dtype),
      contiguous_(detail::is_contiguous(shape, strides)) {}

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

KernelOperand operand(const Tensor& t) {
  const TensorImpl& impl = t.impl_ref();
  KernelOperand op;
  op.data = impl.storage()->data();
  op.offset = impl.offset();
  op.dtype = impl.dtype();
  for (int i = 0; i < impl.dim(); ++i) op.strides[i] = impl.strides()[i];
  return op;
}

}  // namespace anvil::detail
