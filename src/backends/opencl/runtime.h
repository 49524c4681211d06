// Discovery of OpenCL devices and the state anvil keeps per device: its
// in-order queue, caching allocator, program cache and the commands still
// in flight.
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
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "anvil/device.h"
#include "backends/common/env_flags.h"
#include "backends/opencl/cl_api.h"
#include "backends/opencl/program_cache.h"
#include "core/caching_allocator.h"

namespace anvil::opencl {

struct DeviceEntry {
  cl_platform_id platform = nullptr;
  cl_device_id id = nullptr;
  cl_device_type type = 0;
  bool subdevice = false;
  int platform_slot = 0;  // index into Discovery::platform_devices
  DeviceProperties props;
  std::uint64_t max_alloc = 0;
  std::size_t max_work_group = 1;
  // Its queue is created with CL_QUEUE_PROFILING_ENABLE, so it has a device
  // clock (see Note [Device clocks]): when the device supports it, unless
  // ANVIL_OPENCL_PROFILE=0.
  bool profiling = false;
};

struct Discovery {
  std::vector<DeviceEntry> devices;
  std::vector<std::vector<int>> platform_devices;  // slot -> opencl:N indices
  std::string reason;  // why `devices` is empty
};

// Enumerates platforms and devices; never throws (a broken or missing ICD is
// a reason, not a crash).
Discovery discover() noexcept;

using kernels::env_flag;
using kernels::env_flag_off;

class DeviceState {
 public:
  DeviceState(int index, const DeviceEntry& entry, cl_context context);
  ~DeviceState();
  DeviceState(const DeviceState&) = delete;
  DeviceState& operator=(const DeviceState&) = delete;

  const std::string& label() const noexcept { return label_; }  // "opencl:0"
  const DeviceEntry& entry() const noexcept { return entry_; }
  cl_context context() const noexcept { return context_; }
  bool fp64() const noexcept { return entry_.props.fp64; }
  bool is_cpu() const noexcept { return (entry_.type & CL_DEVICE_TYPE_CPU) != 0; }
  // Work-group size for 1-D elementwise launches.
  std::size_t local_size() const noexcept { return local_size_; }

  // Held while setting kernel arguments and enqueueing (a cl_kernel's
  // arguments are shared state) and while touching the in-flight list.
  std::mutex mutex;
  cl_command_queue queue = nullptr;
  ProgramCache programs;
  detail::CachingAllocator allocator;

  // Records an enqueued command (lock held): its event lets a later sync
  // name the op that failed; `staging` is host memory the command reads,
  // freed once it completed. With ANVIL_SYNC=1 this waits for it.
  void track_locked(cl_event event, const char* op, std::unique_ptr<std::byte[]> staging = nullptr);
  // clFinish, then report the first device error since the last sync
  // (BackendError naming the op) or an out-of-range index seen by an index
  // kernel (IndexError). Lock held.
  void finish_locked();
  // The device buffer index kernels flag out-of-range indices in ({flag,
  // index} as two i64), and a note that op `op` used it. Lock held.
  cl_mem index_error_buffer_locked(const char* op, std::int64_t dim_size);

  // The last enqueued command's event (retained; caller releases), or null.
  cl_event last_event_locked();
  // Commands enqueued on this device so far.
  std::uint64_t enqueued_locked() const noexcept { return enqueued_; }

 private:
  struct InFlight {
    cl_event event;
    const char* op;
    std::unique_ptr<std::byte[]> staging;
  };
  void retire_completed_locked(bool all);

  std::string label_;
  DeviceEntry entry_;
  cl_context context_;
  std::size_t local_size_ = 64;
  bool sync_every_op_ = false;
  std::deque<InFlight> in_flight_;
  std::uint64_t enqueued_ = 0;
  const char* failed_op_ = nullptr;
  cl_int failed_status_ = CL_SUCCESS;
  cl_mem index_error_ = nullptr;
  struct IndexUse {
    const char* op;
    std::int64_t dim_size;
  };
  std::vector<IndexUse> index_uses_;
};

}  // namespace anvil::opencl
