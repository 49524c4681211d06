#include "core/transfer.h"

#include "anvil/error.h"
#include "core/backend.h"
#include "core/ledger_counters.h"
#include "core/observer.h"

namespace anvil::detail {

void transfer_into(const TensorImpl& dst_impl, const TensorImpl& src_impl) {
  // Both contiguous, or both dense in one other layout (channels-last): the
  // callers allocate `dst` like `src`, so the bytes move as they lie.
  ANVIL_ASSERT((dst_impl.is_contiguous() && src_impl.is_contiguous()) ||
                   (dst_impl.shape() == src_impl.shape() && dst_impl.strides() == src_impl.strides()),
               "transfer_into: tensors of one layout");
  ANVIL_ASSERT(dst_impl.dtype() == src_impl.dtype() && dst_impl.numel() == src_impl.numel(),
               "transfer_into: tensors of one dtype and size");
  const Device dst = dst_impl.device(), from = src_impl.device();
  const std::size_t elem = element_size(dst_impl.dtype());
  const std::size_t bytes = static_cast<std::size_t>(dst_impl.numel()) * elem;
  if (bytes == 0) return;
  CopySpan copy_span(from, dst, bytes);
  const std::size_t src_off = static_cast<std::size_t>(src_impl.offset()) * elem;
  const std::size_t dst_off = static_cast<std::size_t>(dst_impl.offset()) * elem;
  void* dst_data = dst_impl.storage()->data();
  const void* src_data = src_impl.storage()->data();
  Backend& dst_backend = dst_impl.backend();
  Backend& src_backend = src_impl.backend();
  if (from.type() == dst.type() && src_backend.can_copy_direct(dst.index(), from.index())) {
    dst_backend.copy_device(dst.index(), dst_data, dst_off, from.index(), src_data, src_off, bytes);
  } else if (from.is_cpu()) {
    dst_backend.copy_from_host(dst.index(), dst_data, dst_off, static_cast<const char*>(src_data) + src_off, bytes);
  } else if (dst.is_cpu()) {
    {
      const SyncSpan wait(from);
      src_backend.copy_to_host(from.index(), static_cast<char*>(dst_data) + dst_off, src_data, src_off, bytes);
    }
    record_sync(from);
  } else {  // across backends or contexts: through the host
    Storage staging(cpu(), bytes);
    {
      const SyncSpan wait(from);
      src_backend.copy_to_host(from.index(), staging.data(), src_data, src_off, bytes);
    }
    record_sync(from);
    dst_backend.copy_from_host(dst.index(), dst_data, dst_off, staging.data(), bytes);
  }
  record_copy(from, dst, bytes);
}

}  // namespace anvil::detail
