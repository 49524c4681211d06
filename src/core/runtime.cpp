// anvil/runtime.h's memory controls, asked of each device's backend; the
// thread controls are the CPU backend's (backends/cpu/cpu_runtime.cpp).
#include "anvil/runtime.h"

#include <ostream>

#include "core/backend.h"
#include "core/caching_allocator.h"

namespace anvil {

std::ostream& operator<<(std::ostream& os, const MemoryStats& s) {
  using detail::format_bytes;
  os << "allocated " << format_bytes(s.allocated) << ", reserved " << format_bytes(s.reserved) << ", peak "
     << format_bytes(s.peak_allocated) << ", " << s.num_allocs << " allocations (" << s.cache_hits << " from cache), "
     << s.num_frees << " frees";
  if (s.limit) os << ", limit " << format_bytes(s.limit);
  return os;
}

MemoryStats memory_stats(Device d) { return detail::backend_checked(d, "memory_stats").memory_stats(d.index()); }
void reset_peak_memory_stats(Device d) {
  detail::backend_checked(d, "reset_peak_memory_stats").reset_peak_memory_stats(d.index());
}
void empty_cache(Device d) { detail::backend_checked(d, "empty_cache").empty_cache(d.index()); }
void set_memory_limit(Device d, std::uint64_t bytes) {
  detail::backend_checked(d, "set_memory_limit").set_memory_limit(d.index(), bytes);
}

}  // namespace anvil
