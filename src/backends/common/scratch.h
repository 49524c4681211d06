// A block of device memory for one call, from the device's caching allocator
// and back to it at scope exit: the workspace and scratch buffers of the
// shared primitives and of vendor-library paths (cuDNN).
//
// Freeing it while kernels queued on the device still use it is safe: a
// block is handed out again only on the same device, whose queue is in
// order, so its next user runs behind every earlier one (Note [Asynchronous
// CUDA execution], cuda/runtime.h).
#pragma once

#include <cstddef>

#include "core/caching_allocator.h"

namespace anvil::device_common {

class Scratch {
 public:
  // `bytes` may be 0: no block, get() is null.
  Scratch(detail::CachingAllocator& allocator, std::size_t bytes)
      : allocator_(allocator), bytes_(bytes), data_(bytes > 0 ? allocator.allocate(bytes) : nullptr) {}
  ~Scratch() {
    if (data_ != nullptr) allocator_.deallocate(data_, bytes_);
  }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;

  void* get() const noexcept { return data_; }
  template <class T>
  T* as() const noexcept {
    return static_cast<T*>(data_);
  }
  std::size_t size() const noexcept { return bytes_; }

 private:
  detail::CachingAllocator& allocator_;
  std::size_t bytes_;
  void* data_;
};

}  // namespace anvil::device_common
