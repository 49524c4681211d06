// Bytes between devices: what Tensor::to and copy_to do once the source is
// contiguous, and what the collectives use to fill the host staging buffers
// they reuse. Counted by the ledger and reported to the observer as a copy.
#pragma once

#include "core/tensor_impl.h"

namespace anvil::detail {

// Copies `src` into `dst`: both contiguous, of one dtype and size, on any
// devices. Within one backend a direct copy where it can; across backends
// (or contexts) through a host buffer. A read from a device waits for it
// (a host sync, under SyncGuard's rule).
void transfer_into(const TensorImpl& dst, const TensorImpl& src);

}  // namespace anvil::detail
