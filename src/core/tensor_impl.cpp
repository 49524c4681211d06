#include "core/tensor_impl.h"

#include "anvil/error.h"
#include "core/ledger_counters.h"
#include "core/observer.h"

namespace anvil::detail {

Storage::Storage(Device device, std::size_t nbytes)
    : device_(device), nbytes_(nbytes), backend_(&backend_checked(device, "allocate")) {
  if (nbytes_ > 0) data_ = backend_->allocate(device.index(), nbytes_);
  work_counters(device_).allocation(nbytes_);
  observe_memory(device_, static_cast<std::int64_t>(nbytes_));
}

Storage::Storage(Device device, std::size_t nbytes, void* data, std::function<void()> release)
    : device_(device),
      nbytes_(nbytes),
      data_(data),
      backend_(&backend_checked(device, "adopt memory")),
      release_(std::move(release)) {}

Storage::~Storage() {
  if (release_) {
    release_();
  } else {
    if (data_ != nullptr) backend_->deallocate(device_.index(), data_, nbytes_);
    observe_memory(device_, -static_cast<std::int64_t>(nbytes_));
  }
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

KernelOperand operand(const TensorImpl& t) noexcept {
  KernelOperand op;
  op.data = t.storage()->data();
  op.offset = t.offset();
  op.dtype = t.dtype();
  for (int i = 0; i < t.dim(); ++i) op.strides[i] = t.strides()[i];
  return op;
}

}  // namespace anvil::detail
