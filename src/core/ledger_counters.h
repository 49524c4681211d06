// The ledger's process-wide counters (DESIGN §4.8). Recorded by the op
// frontend's transfer paths and by every host wait on a device.
#pragma once

#include <cstdint>

#include "anvil/device.h"

namespace anvil::detail {

void record_copy(Device from, Device to, std::uint64_t bytes);
// A host wait on `d`; waits on the CPU are not syncs and are ignored.
void record_sync(Device d);
// A collective over `bytes` of tensors on `d` (anvil::dist).
void record_collective(Device d, std::uint64_t bytes);

}  // namespace anvil::detail
