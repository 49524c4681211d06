#include "core/caching_allocator.h"

#include <algorithm>
#include <bit>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string_view>

#include "anvil/error.h"

namespace anvil::detail {

CachingAllocator::CachingAllocator(std::string device_name, Raw raw, std::uint64_t memory_total,
                                   std::uint64_t max_cached)
    : device_name_(std::move(device_name)),
      raw_(std::move(raw)),
      memory_total_(memory_total),
      max_cached_(max_cached) {}

CachingAllocator::~CachingAllocator() {
  std::lock_guard lock(mutex_);
  release_cached_locked();
}

std::size_t CachingAllocator::round_size(std::size_t bytes) noexcept {
  constexpr std::size_t kMin = 512;
  if (bytes <= kMin) return kMin;
  // Four classes per power of two: at most 25% wasted.
  const int top = std::bit_width(bytes - 1) - 1;  // 2^top < bytes <= 2^(top+1)
  const std::size_t quarter = std::size_t{1} << (top - 2);
  return (bytes + quarter - 1) / quarter * quarter;
}

void* CachingAllocator::allocate(std::size_t bytes) {
  const std::size_t rounded = round_size(bytes);
  std::lock_guard lock(mutex_);
  Bucket& bucket = buckets_[rounded];
  void* p = nullptr;
  if (!bucket.free.empty()) {
    p = bucket.free.back();
    bucket.free.pop_back();
    cached_bytes_ -= rounded;
    ++stats_.cache_hits;
  } else {
    const bool over_limit = stats_.limit != 0 && stats_.reserved + rounded > stats_.limit;
    if (!over_limit) p = raw_.allocate(rounded);
    if (p == nullptr) {
      // Free what the cache holds and try once more (DESIGN §4.9).
      release_cached_locked();
      const bool still_over = stats_.limit != 0 && stats_.reserved + rounded > stats_.limit;
      if (still_over) throw_oom_locked(bytes, rounded, "the memory limit");
      p = raw_.allocate(rounded);
      if (p == nullptr) throw_oom_locked(bytes, rounded, "the device allocator");
    }
    stats_.reserved += rounded;
  }
  ++bucket.live;
  ++stats_.num_allocs;
  stats_.allocated += rounded;
  stats_.peak_allocated = std::max(stats_.peak_allocated, stats_.allocated);
  return p;
}

void CachingAllocator::deallocate(void* p, std::size_t bytes) noexcept {
  const std::size_t rounded = round_size(bytes);
  std::lock_guard lock(mutex_);
  Bucket& bucket = buckets_[rounded];
  --bucket.live;
  ++stats_.num_frees;
  stats_.allocated -= rounded;
  if (max_cached_ != 0 && cached_bytes_ + rounded > max_cached_) {
    raw_.release(p, rounded);
    stats_.reserved -= rounded;
    return;
  }
  try {
    bucket.free.push_back(p);
    cached_bytes_ += rounded;
  } catch (...) {  // no memory for the free list: give the block back instead
    raw_.release(p, rounded);
    stats_.reserved -= rounded;
  }
}

void CachingAllocator::release_cached_locked() {
  for (auto& [size, bucket] : buckets_) {
    for (void* p : bucket.free) raw_.release(p, size);
    stats_.reserved -= size * bucket.free.size();
    bucket.free.clear();
  }
  cached_bytes_ = 0;
}

void CachingAllocator::throw_oom_locked(std::size_t bytes, std::size_t rounded, const char* why) {
  std::vector<std::pair<std::size_t, std::uint64_t>> live;
  for (const auto& [size, bucket] : buckets_)
    if (bucket.live > 0) live.emplace_back(size, bucket.live);
  std::sort(live.begin(), live.end(), [](auto& a, auto& b) { return a.first > b.first; });
  std::ostringstream os;
  os << "allocate: out of memory on " << device_name_ << "; tried to allocate " << format_bytes(bytes) << " ("
     << format_bytes(rounded) << " block), refused by " << why << "; device total "
     << (memory_total_ ? format_bytes(memory_total_) : std::string("unknown"));
  if (stats_.limit) os << ", limit " << format_bytes(stats_.limit);
  os << ", free " << format_bytes(memory_total_ > stats_.reserved ? memory_total_ - stats_.reserved : 0)
     << "; anvil holds " << format_bytes(stats_.allocated) << " allocated, " << format_bytes(stats_.reserved)
     << " reserved";
  if (!live.empty()) {
    os << "; largest live tensors:";
    for (std::size_t i = 0; i < live.size() && i < 5; ++i)
      os << (i ? "," : "") << ' ' << live[i].second << " x " << format_bytes(live[i].first);
  }
  os << "; free tensors you no longer need, or raise the limit with set_memory_limit";
  throw OutOfMemory(os.str());
}

MemoryStats CachingAllocator::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

void CachingAllocator::reset_peak() {
  std::lock_guard lock(mutex_);
  stats_.peak_allocated = stats_.allocated;
}

void CachingAllocator::empty_cache() {
  std::lock_guard lock(mutex_);
  release_cached_locked();
}

void CachingAllocator::set_limit(std::uint64_t bytes) {
  std::lock_guard lock(mutex_);
  stats_.limit = bytes;
}

std::string format_bytes(std::uint64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024.0 && u < 4) {
    v /= 1024.0;
    ++u;
  }
  char buf[32];
  if (u == 0)
    std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(bytes));
  else
    std::snprintf(buf, sizeof buf, "%.1f %s", v, units[u]);
  return buf;
}

static std::uint64_t parse_size(std::string_view text) {
  std::size_t pos = 0;
  std::uint64_t value = 0;
  while (pos < text.size() && text[pos] >= '0' && text[pos] <= '9') {
    ANVIL_CHECK(value <= (UINT64_MAX - 9) / 10, ValueError, "ANVIL_MEMORY_LIMIT: size too large: ", text);
    value = value * 10 + static_cast<std::uint64_t>(text[pos++] - '0');
  }
  ANVIL_CHECK(pos > 0, ValueError, "ANVIL_MEMORY_LIMIT: expected a size like 512M, got '", text, "'");
  std::string_view suffix = text.substr(pos);
  std::uint64_t mult = 1;
  if (suffix.empty() || suffix == "B")
    mult = 1;
  else if (suffix == "K" || suffix == "KiB")
    mult = 1ull << 10;
  else if (suffix == "M" || suffix == "MiB")
    mult = 1ull << 20;
  else if (suffix == "G" || suffix == "GiB")
    mult = 1ull << 30;
  else
    throw ValueError(cat("ANVIL_MEMORY_LIMIT: unknown size suffix; expected B, K, M or G, got '", suffix, "'"));
  ANVIL_CHECK(value <= UINT64_MAX / mult, ValueError, "ANVIL_MEMORY_LIMIT: size too large: ", text);
  return value * mult;
}

std::uint64_t memory_limit_from_env(Device d) {
  const char* env = std::getenv("ANVIL_MEMORY_LIMIT");
  if (env == nullptr || *env == '\0') return 0;
  std::string_view rest(env);
  while (!rest.empty()) {
    const std::size_t comma = rest.find(',');
    std::string_view item = rest.substr(0, comma);
    rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
    const std::size_t eq = item.find('=');
    ANVIL_CHECK(eq != std::string_view::npos, ValueError,
                "ANVIL_MEMORY_LIMIT: expected device=size items like 'opencl:0=512M', got '", item, "'");
    if (Device(item.substr(0, eq)) == d) return parse_size(item.substr(eq + 1));
  }
  return 0;
}

}  // namespace anvil::detail
