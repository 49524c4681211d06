// The ledger's process-wide counters (DESIGN §4.8). Recorded by the op
// frontend's transfer paths and by every host wait on a device; the work
// counters (Note [What a launch is], anvil/ledger.h) by the backends.
#pragma once

#include <atomic>
#include <cstdint>

#include "anvil/device.h"

namespace anvil::detail {

void record_copy(Device from, Device to, std::uint64_t bytes);
// A host wait on `d`; waits on the CPU are not syncs and are ignored.
void record_sync(Device d);
// A collective over `bytes` of tensors on `d` (anvil::dist).
void record_collective(Device d, std::uint64_t bytes);

// One device's work counters: relaxed atomics, always on, a few adds per
// launch (a backend may keep the reference: it never moves).
struct WorkCounters {
  std::atomic<std::uint64_t> launches{0}, allocations{0}, bytes_allocated{0}, bytes_read{0}, bytes_written{0};

  void launch(std::uint64_t n = 1) noexcept { launches.fetch_add(n, std::memory_order_relaxed); }
  void traffic(std::uint64_t read, std::uint64_t written) noexcept {
    bytes_read.fetch_add(read, std::memory_order_relaxed);
    bytes_written.fetch_add(written, std::memory_order_relaxed);
  }
  void allocation(std::uint64_t bytes) noexcept {
    allocations.fetch_add(1, std::memory_order_relaxed);
    bytes_allocated.fetch_add(bytes, std::memory_order_relaxed);
  }
};

// Devices of index 0..kCountedDevices-1 of each type are counted; a higher
// index gets a sink that no report reads.
inline constexpr int kCountedDevices = 64;
WorkCounters& work_counters(Device d) noexcept;

}  // namespace anvil::detail
