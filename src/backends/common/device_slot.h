// One device's state inside the shared device backend (device_backend.h):
// its runtime queue, caching allocator, the ops in flight for error reports,
// and the index-error check. The shared primitives (device_primitives.h) run
// on it; a runtime's vendor-library hooks receive it.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "anvil/error.h"
#include "backends/common/env_flags.h"
#include "backends/common/op_scope.h"
#include "core/backend.h"
#include "core/caching_allocator.h"
#include "core/kernel_traffic.h"

namespace anvil::device_common {

// What a runtime's discovery found: devices in the order of their index, or
// why there are none.
template <class Entry>
struct DeviceList {
  std::vector<Entry> devices;
  std::string reason;  // why `devices` is empty
};

// What a runtime's wait found: the first failure since the last wait.
struct DeviceFault {
  std::string status;        // "CL_OUT_OF_RESOURCES (-5)"; empty when nothing failed
  const char* op = nullptr;  // the op that failed, when the runtime can tell
  explicit operator bool() const noexcept { return !status.empty(); }
};

// One device's state: its runtime queue, caching allocator, and what the
// host knows about the work in flight. It is also the device type the
// shared primitives of device_primitives.h run on. Members are declared in
// construction order (label_ before the queue, which keeps a reference to
// it; raw_ before the allocator), hence the alternating sections.
template <class R>
class DeviceSlot {
 public:
  using Queue = typename R::Queue;

  DeviceSlot(R& runtime, int index, const typename R::Entry& entry)
      : label_(Device(R::kType, index).str()),
        queue(runtime, index, entry, label_),
        raw_(queue.raw_allocator()),
        allocator(label_, raw_, entry.props.memory_total),
        work(detail::work_counters(Device(R::kType, index))),
        sync_every_op_(env_flag("ANVIL_SYNC")) {
    allocator.set_limit(detail::memory_limit_from_env(Device(R::kType, index)));
  }
  ~DeviceSlot() {
    // Runs at most at exit (backends are leaked on purpose); the driver may
    // be going away, so nothing here reports.
    try {
      queue.make_current();
      (void)queue.wait();
    } catch (...) {
    }
    if (index_error_ != nullptr) raw_.release(index_error_, kIndexErrorBytes);
  }
  DeviceSlot(const DeviceSlot&) = delete;
  DeviceSlot& operator=(const DeviceSlot&) = delete;

  const std::string& label() const noexcept { return label_; }  // "opencl:0"

 private:
  std::string label_;  // before queue: the queue keeps a reference

 public:
  // Held while enqueueing (a kernel's arguments are shared state) and while
  // touching the bookkeeping below.
  std::mutex mutex;
  Queue queue;

 private:
  detail::CachingAllocator::Raw raw_;

 public:
  detail::CachingAllocator allocator;
  // The ledger's counters for this device (Note [What a launch is]): every
  // launch() and copy_within() below counts one; a vendor-library call
  // counts itself where the backend makes it.
  detail::WorkCounters& work;

  // Notes that primitive `op` was enqueued (lock held); with ANVIL_SYNC=1
  // waits for it, so an error names the op that caused it.
  void enqueued_locked(const char* op) {
    ++ops_since_wait_;
    if (nrecent_ < kRecent &&
        std::none_of(recent_, recent_ + nrecent_, [op](const char* r) { return r == op || std::strcmp(r, op) == 0; }))
      recent_[nrecent_++] = op;
    if (sync_every_op_) finish_locked();
  }

  // Waits for everything enqueued, then reports the first device error since
  // the last wait (BackendError naming the op, or the ops since the last
  // wait when the runtime cannot tell which) or an out-of-range index seen
  // by an index kernel (IndexError). Lock held.
  void finish_locked() {
    const DeviceFault fault = queue.wait();
    const std::uint64_t count = ops_since_wait_;
    const int nrecent = nrecent_;
    ops_since_wait_ = 0;
    nrecent_ = 0;
    if (fault) {
      std::string ops;
      for (int i = 0; i < nrecent; ++i) ops += (i == 0 ? "" : ", ") + std::string(recent_[i]);
      const char* op = fault.op != nullptr ? fault.op : count == 1 && nrecent == 1 ? recent_[0] : current_op();
      throw BackendError(detail::cat(op, ": the device reported ", fault.status, " on ", label_,
                                     "; it surfaced at the next sync, after ", count, " op(s) [", ops,
                                     "]; run with ANVIL_SYNC=1 to stop at the failing op"));
    }
    if (index_uses_.empty()) return;
    std::int64_t flag[2] = {0, 0};
    queue.copy_to_host(flag, index_error_, 0, sizeof flag);
    const std::vector<IndexUse> uses = std::move(index_uses_);
    index_uses_.clear();
    if (flag[0] == 0) return;
    queue.zero(index_error_, sizeof flag);
    std::string ops;
    for (const IndexUse& x : uses)
      if (ops.find(x.op) == std::string::npos) ops += (ops.empty() ? "" : " or ") + std::string(x.op);
    throw IndexError(detail::cat(ops, ": index out of range on ", label_, "; expected 0 <= index < ",
                                 uses.front().dim_size, ", got ", flag[1],
                                 " (found by the device, reported at the next sync; the output holds 0 there)"));
  }

  const char* current_op() const noexcept { return current_op_or(R::kName); }

  // ---- what device_primitives.h needs of a device (lock held) ----------------
  template <class Request>
  typename R::Kernel kernel(const Request& r) {
    return queue.programs.kernel(r);
  }
  // Each Launch made here is run once (device_primitives.h).
  typename R::Launch launch(typename R::Kernel k) {
    work.launch();
    return typename R::Launch(queue, k);
  }
  void copy_within(void* dst, std::size_t dst_byte, const void* src, std::size_t src_byte, std::size_t bytes,
                   const char* op) {
    work.launch();
    queue.copy_within(dst, dst_byte, src, src_byte, bytes, op);
  }
  // The device block index kernels flag out-of-range indices in ({flag,
  // index} as two i64), and a note that op `op` used it.
  void* index_error_buffer_locked(const char* op, std::int64_t dim_size) {
    if (index_error_ == nullptr) {
      void* p = raw_.allocate(kIndexErrorBytes);
      ANVIL_CHECK(p != nullptr, BackendError, op, ": could not allocate ", kIndexErrorBytes, " bytes on ", label_,
                  " for the index check; expected free device memory, got none");
      try {
        queue.zero(p, kIndexErrorBytes);
      } catch (...) {
        raw_.release(p, kIndexErrorBytes);
        throw;
      }
      index_error_ = p;
    }
    // One entry per op name: a loop that never syncs must not grow this.
    if (std::none_of(index_uses_.begin(), index_uses_.end(), [&](const IndexUse& u) { return u.op == op; }))
      index_uses_.push_back({op, dim_size});
    return index_error_;
  }
  bool fp64() const noexcept { return queue.fp64(); }
  bool is_cpu() const noexcept { return queue.is_cpu(); }
  int compute_units() const noexcept { return queue.compute_units(); }
  std::size_t local_size() const noexcept { return queue.local_size(); }
  std::size_t max_work_group() const noexcept { return queue.max_work_group(); }
  // The alignment in bytes the runtime guarantees for a buffer handle's first
  // element (Note [Vector loads]).
  std::size_t base_alignment(const void* handle) const noexcept { return queue.base_alignment(handle); }

 private:
  static constexpr std::size_t kIndexErrorBytes = 2 * sizeof(std::int64_t);
  static constexpr int kRecent = 8;
  struct IndexUse {
    const char* op;
    std::int64_t dim_size;
  };

  bool sync_every_op_ = false;
  std::uint64_t ops_since_wait_ = 0;
  const char* recent_[kRecent] = {};  // distinct ops since the last wait, for error messages
  int nrecent_ = 0;
  void* index_error_ = nullptr;
  std::vector<IndexUse> index_uses_;
};

}  // namespace anvil::device_common
