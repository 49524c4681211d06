// A per-device caching allocator, shared by every backend (DESIGN §4.9).
//
// Freed blocks are kept in size classes (four per power of two) and handed
// out again, so a loop that allocates a same-sized result every step touches
// the device allocator (or, on the CPU, the page-fault path) once. A backend
// gives it two raw functions; everything else — caching, the limit, the
// statistics and the OutOfMemory message — lives here once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "anvil/runtime.h"

namespace anvil::detail {

class CachingAllocator {
 public:
  struct Raw {
    std::function<void*(std::size_t)> allocate;  // nullptr on failure, never throws
    std::function<void(void*, std::size_t)> release;
  };
  // `device_name` appears in OutOfMemory messages; `memory_total` too (0 if
  // unknown). `max_cached` bounds the bytes kept for reuse (0 = no bound).
  CachingAllocator(std::string device_name, Raw raw, std::uint64_t memory_total, std::uint64_t max_cached = 0);
  ~CachingAllocator();
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  // Never returns null; `bytes` must be > 0. Throws OutOfMemory.
  void* allocate(std::size_t bytes);
  // `bytes` is the size passed to allocate().
  void deallocate(void* p, std::size_t bytes) noexcept;

  MemoryStats stats() const;
  void reset_peak();
  void empty_cache();
  void set_limit(std::uint64_t bytes);
  void set_memory_total(std::uint64_t bytes) { memory_total_ = bytes; }

  // The size class a request is served from.
  static std::size_t round_size(std::size_t bytes) noexcept;

 private:
  struct Bucket {
    std::vector<void*> free;
    std::uint64_t live = 0;
  };
  void release_cached_locked();
  [[noreturn]] void throw_oom_locked(std::size_t bytes, std::size_t rounded, const char* why);

  std::string device_name_;
  Raw raw_;
  std::uint64_t memory_total_;
  std::uint64_t max_cached_;
  mutable std::mutex mutex_;
  std::unordered_map<std::size_t, Bucket> buckets_;
  MemoryStats stats_;
  std::uint64_t cached_bytes_ = 0;
};

// Parses ANVIL_MEMORY_LIMIT ("opencl:0=512M,cpu=8G") for `d`; 0 when unset.
// A malformed value raises ValueError naming the variable.
std::uint64_t memory_limit_from_env(Device d);

// "64.0 MiB"
std::string format_bytes(std::uint64_t bytes);

}  // namespace anvil::detail
