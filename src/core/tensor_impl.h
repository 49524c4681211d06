// Storage and TensorImpl: the tensor is a view over separately owned bytes.
//
// Note [Storage owns device memory]
// A Storage owns `nbytes` on exactly one device, obtained from that device's
// backend allocator and returned to it when the last view dies. Views
// (reshape, transpose, slice, expand…) share the Storage and differ only in
// shape, strides, offset. Nothing but the Storage frees device memory, so a
// view can never outlive its bytes.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>

#include "anvil/device.h"
#include "anvil/dtype.h"
#include "anvil/shape.h"
#include "core/backend.h"

namespace anvil::detail {

class Storage {
 public:
  // Allocates `nbytes` on `device` through its backend (OutOfMemory on failure).
  Storage(Device device, std::size_t nbytes);
  // Adopts `nbytes` at `data` (the backend's handle), memory that someone
  // else owns: a NumPy array or a DLPack producer's buffer. `release` runs
  // when the last view dies, instead of the backend's deallocate. What
  // anvil::from_dlpack (anvil/dlpack.h) builds on.
  Storage(Device device, std::size_t nbytes, void* data, std::function<void()> release);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  Device device() const noexcept { return device_; }
  std::size_t nbytes() const noexcept { return nbytes_; }
  void* data() const noexcept { return data_; }  // the backend's handle
  Backend& backend() const noexcept { return *backend_; }

 private:
  Device device_;
  std::size_t nbytes_;
  void* data_ = nullptr;
  Backend* backend_;
  std::function<void()> release_;  // set for adopted memory
};

struct AutogradMeta;  // defined by src/autograd; null for tensors that need no grad

class TensorImpl {
 public:
  TensorImpl(std::shared_ptr<Storage> storage, const Shape& shape, const Strides& strides, std::int64_t offset,
             DType dtype);

  const std::shared_ptr<Storage>& storage() const noexcept { return storage_; }
  Device device() const noexcept { return storage_->device(); }
  Backend& backend() const noexcept { return storage_->backend(); }
  const Shape& shape() const noexcept { return shape_; }
  const Strides& strides() const noexcept { return strides_; }
  std::int64_t offset() const noexcept { return offset_; }
  DType dtype() const noexcept { return dtype_; }
  std::int64_t numel() const noexcept { return numel_; }
  bool is_contiguous() const noexcept { return contiguous_; }
  int dim() const noexcept { return shape_.size(); }

  std::shared_ptr<AutogradMeta> autograd;

  // Views `other`'s data (storage, shape, strides, offset, dtype) in place;
  // `autograd` is kept. See Tensor::set_data.
  void set_data(const TensorImpl& other) {
    storage_ = other.storage_;
    shape_ = other.shape_;
    strides_ = other.strides_;
    offset_ = other.offset_;
    numel_ = other.numel_;
    dtype_ = other.dtype_;
    contiguous_ = other.contiguous_;
  }

 private:
  std::shared_ptr<Storage> storage_;
  Shape shape_;
  Strides strides_;
  std::int64_t offset_;
  std::int64_t numel_;
  DType dtype_;
  bool contiguous_;
};

// The operand a kernel sees for `t` (strides as stored). The Tensor
// handle's overload, with make_empty and make_view, is in ops/tensor_make.h:
// the core knows TensorImpl only.
KernelOperand operand(const TensorImpl& t) noexcept;

bool is_contiguous(const Shape& shape, const Strides& strides) noexcept;

}  // namespace anvil::detail
