// The OpenCL runtime under the shared device backend (DESIGN §2, see
// backends/common/device_backend.h): discovery, and per device an in-order
// queue with its program cache and the commands still in flight.
//
// Note [Asynchronous OpenCL execution]
// Each opencl:N has one in-order queue. Every primitive and copy is enqueued
// without waiting and returns; the host waits only in copy_to_host,
// synchronize and (with ANVIL_SYNC=1) after every op. Errors the device
// raises surface at the next of those waits, naming the op: every command's
// event is kept with its op until it completes (Queue::wait). Memory freed
// while a queued command still uses it is safe: a block is only handed out
// again on the same device, so its next user is queued behind every earlier
// user; and cross-device copies make the source queue wait for the copy
// (Queue::copy_between).
//
// Note [OpenCL device numbering]
// opencl:N counts the devices of every platform the ICD loader reports, in
// platform order, then device order. With ANVIL_OPENCL_SUBDEVICES=1 each
// CPU-type device that can be partitioned is replaced by its one-core
// sub-devices (clCreateSubDevices, CL_DEVICE_PARTITION_EQUALLY 1), so two
// opencl:N really run in parallel on two cores. All devices of one platform
// share one context, so copies between them stay on the device side.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "anvil/device.h"
#include "backends/common/device_backend.h"
#include "backends/common/env_flags.h"
#include "backends/opencl/cl_api.h"
#include "backends/opencl/first_runs.h"
#include "backends/opencl/program_cache.h"
#include "core/caching_allocator.h"

namespace anvil::opencl {

struct DeviceEntry {
  cl_platform_id platform = nullptr;
  cl_device_id id = nullptr;
  cl_device_type type = 0;
  bool subdevice = false;
  int platform_slot = 0;  // which platform's context it shares
  DeviceProperties props;
  std::uint64_t max_alloc = 0;
  std::size_t max_work_group = 1;
  // Its queue is created with CL_QUEUE_PROFILING_ENABLE, so it has a device
  // clock (see Note [Device clocks]): when the device supports it, unless
  // ANVIL_OPENCL_PROFILE=0.
  bool profiling = false;
};

using device_common::env_flag;
using device_common::env_flag_off;

class Launch;
class Queue;

// What the shared backend needs of OpenCL as a whole.
class Runtime {
 public:
  static constexpr DeviceType kType = DeviceType::OpenCL;
  static constexpr const char* kName = "opencl";
  using Entry = DeviceEntry;
  using Queue = opencl::Queue;
  using Kernel = cl_kernel;
  using Launch = opencl::Launch;  // launch.h

  // Enumerates platforms and devices; never throws (a broken or missing ICD
  // is a reason, not a crash). ANVIL_OPENCL_NO_FP64=1 makes every device
  // report no fp64, to test what a user of such a device sees.
  device_common::DeviceList<DeviceEntry> discover() noexcept;
  // GPUs and accelerators; CPU devices only with ANVIL_OPENCL_CPU=1.
  static bool is_accelerator(const DeviceEntry& e) noexcept;
  // Devices of one platform share a context, so copies stay on the device side.
  bool can_copy_direct(const std::vector<DeviceEntry>& devices, int dst, int src) noexcept {
    return devices[dst].platform_slot == devices[src].platform_slot;
  }
  // The context of `e`'s platform, created on first use.
  cl_context context_for(const DeviceEntry& e, const std::string& label);

 private:
  std::mutex contexts_mutex_;
  std::vector<std::vector<cl_device_id>> platform_ids_;  // slot -> its devices
  std::vector<cl_context> contexts_;                     // per slot, null until used
};

// One device's in-order queue. Every member is called with the device's
// lock held (device_common::DeviceSlot::mutex).
class Queue {
 public:
  Queue(Runtime& runtime, int index, const DeviceEntry& entry, const std::string& label);
  ~Queue();
  Queue(const Queue&) = delete;
  Queue& operator=(const Queue&) = delete;

  const std::string& label() const noexcept { return label_; }  // "opencl:0"
  const DeviceEntry& entry() const noexcept { return entry_; }
  cl_context context() const noexcept { return context_; }
  bool fp64() const noexcept { return entry_.props.fp64; }
  bool is_cpu() const noexcept { return (entry_.type & CL_DEVICE_TYPE_CPU) != 0; }
  int compute_units() const noexcept { return entry_.props.compute_units; }
  // Work-group size for 1-D elementwise launches.
  std::size_t local_size() const noexcept { return local_size_; }
  std::size_t max_work_group() const noexcept { return entry_.max_work_group; }
  // Every buffer is a whole cl_mem, aligned to CL_DEVICE_MEM_BASE_ADDR_ALIGN:
  // at least the largest built-in type in OpenCL 1.2 (long16, or int16 on
  // an embedded profile: 64 bytes).
  static std::size_t base_alignment(const void*) noexcept { return 64; }
  void make_current() const noexcept {}                        // OpenCL calls name their queue
  void update_properties(DeviceProperties&) const noexcept {}  // no portable free-memory query

  detail::CachingAllocator::Raw raw_allocator() const;
  // Small writes are staged and return at once; large ones wait (returns false either way).
  bool copy_from_host(void* dst, std::size_t dst_offset, const void* src, std::size_t bytes);
  void copy_to_host(void* dst, const void* src, std::size_t src_offset, std::size_t bytes);
  void copy_within(void* dst, std::size_t dst_byte, const void* src, std::size_t src_byte, std::size_t bytes,
                   const char* op);
  static void copy_between(Queue& dst_q, void* dst, std::size_t dst_offset, Queue& src_q, const void* src,
                           std::size_t src_offset, std::size_t bytes);
  void zero(void* block, std::size_t bytes);

  // CLBlast (gemm.cpp); false when it does not take these operands.
  bool gemm_blas(const detail::GemmArgs& a, detail::CachingAllocator& allocator);

  // clFinish, then the first command that failed since the last wait.
  device_common::DeviceFault wait();

  // Timestamps on the device's clock (Note [Device clocks]).
  static bool has_device_clock(const DeviceEntry& e) noexcept { return e.profiling; }
  void* record_timestamp();
  double elapsed_seconds(void* start, void* end, const std::function<void()>& report_device_fault);
  static void release_timestamp(const DeviceEntry&, void* stamp) noexcept;

  // Records an enqueued command: its event lets a later wait name the op
  // that failed; `staging` is host memory the command reads, freed once it
  // completed.
  void track(cl_event event, const char* op, std::unique_ptr<std::byte[]> staging = nullptr);
  // The last enqueued command's event (retained; caller releases), or null.
  cl_event last_event();
  // Commands enqueued on this device so far.
  std::uint64_t enqueued() const noexcept { return enqueued_; }

  cl_command_queue handle = nullptr;
  ProgramCache programs;
  FirstRuns first_runs;  // launch.h, gemm.cpp

 private:
  struct InFlight {
    cl_event event;
    const char* op;
    std::unique_ptr<std::byte[]> staging;
  };
  void retire_completed(bool all);

  const std::string& label_;
  DeviceEntry entry_;
  cl_context context_;
  std::size_t local_size_ = 64;
  std::deque<InFlight> in_flight_;
  std::uint64_t enqueued_ = 0;
  const char* failed_op_ = nullptr;
  cl_int failed_status_ = CL_SUCCESS;
};

}  // namespace anvil::opencl

namespace anvil {
extern template class device_common::DeviceBackend<opencl::Runtime>;  // opencl_backend.cpp
}  // namespace anvil

namespace anvil::opencl {
// The OpenCL backend: the shared device backend over this runtime.
inline device_common::DeviceBackend<Runtime>& backend() { return device_common::backend_instance<Runtime>(); }
}  // namespace anvil::opencl
