// What the CPU backend's oneDNN primitives share (cpu_conv.cpp for conv2d,
// cpu_gemm_dnnl.cpp for f32 and bf16 GEMM): the engine, which kernels the
// CPU has, the thread count a call runs on, its temporaries, and the cache
// of created primitives.
#pragma once

#include <omp.h>

#include <cstddef>
#include <list>
#include <map>
#include <mutex>
#include <oneapi/dnnl/dnnl.hpp>
#include <utility>
#include <vector>

#include "anvil/dtype.h"
#include "backends/cpu/threads.h"
#include "core/caching_allocator.h"

namespace anvil::cpu_backend {

// The CPU engine every primitive of this backend runs on.
inline dnnl::engine& dnnl_engine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

// oneDNN's element type for the dtypes it computes here, f32 and bf16.
inline dnnl::memory::data_type dnnl_data_type(DType t) noexcept {
  return t == DType::BF16 ? dnnl::memory::data_type::bf16 : dnnl::memory::data_type::f32;
}

// Whether oneDNN's kernels for `isa` run here (its effective ISA, which
// ONEDNN_MAX_CPU_ISA may lower, contains it).
inline bool dnnl_has_isa(dnnl::cpu_isa isa) noexcept {
  try {
    const auto want = static_cast<unsigned>(isa);
    return (static_cast<unsigned>(dnnl::get_effective_cpu_isa()) & want) == want;
  } catch (const dnnl::error&) {
    return false;
  }
}

// AVX-512 (F, CD, BW, DQ, VL), where oneDNN's f32 kernels beat Debian's
// OpenBLAS 0.3.21 (Note [GEMM through oneDNN], Note [oneDNN convolution in
// the CPU backend]).
inline bool cpu_has_avx512() noexcept {
  static const bool has = dnnl_has_isa(dnnl::cpu_isa::avx512_core);
  return has;
}

// Whether this CPU has bf16 dot-product instructions (AVX512_BF16), where
// oneDNN computes bf16 natively; elsewhere it would emulate them.
inline bool cpu_has_bf16_dot() noexcept {
  static const bool has = dnnl_has_isa(dnnl::cpu_isa::avx512_core_bf16);
  return has;
}

// oneDNN's OpenMP build runs on libgomp, the one pool anvil's loops and
// OpenBLAS share (Note [One thread pool]); it sizes its parallel regions
// from omp_get_max_threads() when a primitive is created and runs them with
// that count. This holds the count at `threads` for its lifetime (a
// primitive's cache key includes it), as BlasThreads does for OpenBLAS.
class DnnlThreads {
 public:
  explicit DnnlThreads(int threads) : bound_(thread_bound()), threads_(threads) { omp_set_num_threads(threads_); }
  ~DnnlThreads() { omp_set_num_threads(bound_); }
  DnnlThreads(const DnnlThreads&) = delete;
  DnnlThreads& operator=(const DnnlThreads&) = delete;
  int threads() const noexcept { return threads_; }

 private:
  int bound_;
  int threads_;
};

// The temporaries of one oneDNN call (its scratchpad, operands reordered
// into or out of oneDNN's blocked layouts), taken from the CPU backend's
// caching allocator and given back when the call ends. oneDNN's own
// allocator gives each one a fresh aligned malloc, which glibc serves
// from mmap above its threshold and unmaps on free, so every call
// page-faulted and zeroed its temporaries again: 8-10% of a ResNet-18
// step's CPU time was in the kernel's page-fault path. From the cache, a
// LeNet step on two threads took 6.8-7.1 ms against 7.7.
class DnnlTemporaries {
 public:
  explicit DnnlTemporaries(detail::CachingAllocator& allocator) : allocator_(allocator) {}
  ~DnnlTemporaries() {
    for (const auto& [data, bytes] : blocks_) allocator_.deallocate(data, bytes);
  }
  DnnlTemporaries(const DnnlTemporaries&) = delete;
  DnnlTemporaries& operator=(const DnnlTemporaries&) = delete;

  // A buffer for `desc`, alive until this object ends.
  dnnl::memory make(const dnnl::memory::desc& desc) {
    const std::size_t bytes = desc.get_size();
    if (bytes == 0) return dnnl::memory(desc, dnnl_engine(), nullptr);
    blocks_.reserve(blocks_.size() + 1);  // so that recording the block cannot throw
    void* data = allocator_.allocate(bytes);
    blocks_.emplace_back(data, bytes);
    return dnnl::memory(desc, dnnl_engine(), data);
  }

 private:
  detail::CachingAllocator& allocator_;
  std::vector<std::pair<void*, std::size_t>> blocks_;
};

// Created primitives by key, the least recently used dropped past
// `capacity`: creating one costs far more than running a small one. Safe
// to call from several threads.
template <typename Key, typename Value>
class DnnlCache {
 public:
  explicit DnnlCache(std::size_t capacity) : capacity_(capacity) {}

  // The cached value for `key`, made by make() when missing.
  template <typename Make>
  Value get(const Key& key, Make make) {
    std::lock_guard lock(mutex_);
    if (auto it = index_.find(key); it != index_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second);
      return it->second->second;
    }
    lru_.emplace_front(key, make());
    index_[key] = lru_.begin();
    if (lru_.size() > capacity_) {
      index_.erase(lru_.back().first);
      lru_.pop_back();
    }
    return lru_.front().second;
  }

 private:
  std::size_t capacity_;
  std::mutex mutex_;
  std::list<std::pair<Key, Value>> lru_;  // most recent first
  std::map<Key, typename std::list<std::pair<Key, Value>>::iterator> index_;
};

}  // namespace anvil::cpu_backend
