#include "backends/opencl/runtime.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "anvil/error.h"

namespace anvil::opencl {

namespace {

std::string device_string(cl_device_id d, cl_device_info what) {
  std::size_t size = 0;
  if (clGetDeviceInfo(d, what, 0, nullptr, &size) != CL_SUCCESS || size == 0) return "";
  std::string s(size, '\0');
  if (clGetDeviceInfo(d, what, size, s.data(), nullptr) != CL_SUCCESS) return "";
  while (!s.empty() && (s.back() == '\0' || s.back() == ' ')) s.pop_back();
  return s;
}

template <typename T>
T device_value(cl_device_id d, cl_device_info what, T fallback = T{}) {
  T v{};
  return clGetDeviceInfo(d, what, sizeof v, &v, nullptr) == CL_SUCCESS ? v : fallback;
}

DeviceEntry describe(cl_platform_id platform, cl_device_id id, bool subdevice, int sub_index, int sub_count) {
  DeviceEntry e;
  e.platform = platform;
  e.id = id;
  e.subdevice = subdevice;
  e.type = device_value<cl_device_type>(id, CL_DEVICE_TYPE);
  DeviceProperties& p = e.props;
  p.name = device_string(id, CL_DEVICE_NAME);
  if (subdevice) p.name += detail::cat(" (sub-device ", sub_index, " of ", sub_count, ")");
  p.vendor = device_string(id, CL_DEVICE_VENDOR);
  p.kind = (e.type & CL_DEVICE_TYPE_GPU)           ? "gpu"
           : (e.type & CL_DEVICE_TYPE_ACCELERATOR) ? "accelerator"
                                                   : "cpu";
  p.memory_total = device_value<cl_ulong>(id, CL_DEVICE_GLOBAL_MEM_SIZE);
  p.memory_free = 0;  // OpenCL has no portable query for it
  p.compute_units = static_cast<int>(device_value<cl_uint>(id, CL_DEVICE_MAX_COMPUTE_UNITS));
  p.clock_mhz = static_cast<int>(device_value<cl_uint>(id, CL_DEVICE_MAX_CLOCK_FREQUENCY));
  p.driver_version = device_string(id, CL_DRIVER_VERSION);
  p.runtime_version = device_string(id, CL_DEVICE_VERSION);
  const std::string extensions = device_string(id, CL_DEVICE_EXTENSIONS);
  p.fp64 = device_value<cl_device_fp_config>(id, CL_DEVICE_DOUBLE_FP_CONFIG) != 0 ||
           extensions.find("cl_khr_fp64") != std::string::npos;
  p.fp16 = extensions.find("cl_khr_fp16") != std::string::npos;
  e.max_alloc = device_value<cl_ulong>(id, CL_DEVICE_MAX_MEM_ALLOC_SIZE);
  e.max_work_group = std::max<std::size_t>(1, device_value<std::size_t>(id, CL_DEVICE_MAX_WORK_GROUP_SIZE, 1));
  // OpenCL 1.2 requires every device to support profiling; ask anyway.
  e.profiling =
      (device_value<cl_command_queue_properties>(id, CL_DEVICE_QUEUE_PROPERTIES) & CL_QUEUE_PROFILING_ENABLE) != 0 &&
      !env_flag_off("ANVIL_OPENCL_PROFILE");
  return e;
}

// The one-core sub-devices of `id`, or empty when it cannot be split.
std::vector<cl_device_id> split_into_cores(cl_device_id id) {
  if (device_value<cl_uint>(id, CL_DEVICE_MAX_COMPUTE_UNITS) < 2) return {};
  const cl_device_partition_property props[] = {CL_DEVICE_PARTITION_EQUALLY, 1, 0};
  cl_uint n = 0;
  if (clCreateSubDevices(id, props, 0, nullptr, &n) != CL_SUCCESS || n == 0) return {};
  std::vector<cl_device_id> subs(n);
  if (clCreateSubDevices(id, props, n, subs.data(), nullptr) != CL_SUCCESS) return {};
  return subs;
}

}  // namespace

Discovery discover() noexcept {
  Discovery out;
  try {
    cl_uint nplatforms = 0;
    const cl_int status = clGetPlatformIDs(0, nullptr, &nplatforms);
    if (status == -1001 /* CL_PLATFORM_NOT_FOUND_KHR */ || (status == CL_SUCCESS && nplatforms == 0)) {
      out.reason = "no OpenCL platform found (install an OpenCL driver, e.g. pocl-opencl-icd)";
      return out;
    }
    if (status != CL_SUCCESS) {
      out.reason = "clGetPlatformIDs failed with " + status_name(status) +
                   " (check the OpenCL ICD loader and the drivers in /etc/OpenCL/vendors)";
      return out;
    }
    std::vector<cl_platform_id> platforms(nplatforms);
    if (clGetPlatformIDs(nplatforms, platforms.data(), nullptr) != CL_SUCCESS) {
      out.reason = "clGetPlatformIDs failed listing the platforms";
      return out;
    }
    const bool split = env_flag("ANVIL_OPENCL_SUBDEVICES");
    for (cl_platform_id platform : platforms) {
      cl_uint ndevices = 0;
      if (clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, 0, nullptr, &ndevices) != CL_SUCCESS || ndevices == 0)
        continue;
      std::vector<cl_device_id> ids(ndevices);
      if (clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, ndevices, ids.data(), nullptr) != CL_SUCCESS) continue;
      const int slot = static_cast<int>(out.platform_devices.size());
      std::vector<int> members;
      for (cl_device_id id : ids) {
        if (device_value<cl_bool>(id, CL_DEVICE_AVAILABLE) == CL_FALSE) continue;
        std::vector<cl_device_id> subs;
        if (split && (device_value<cl_device_type>(id, CL_DEVICE_TYPE) & CL_DEVICE_TYPE_CPU))
          subs = split_into_cores(id);
        const std::size_t before = out.devices.size();
        if (subs.empty()) out.devices.push_back(describe(platform, id, false, 0, 0));
        for (std::size_t s = 0; s < subs.size(); ++s)
          out.devices.push_back(describe(platform, subs[s], true, static_cast<int>(s), static_cast<int>(subs.size())));
        for (std::size_t i = before; i < out.devices.size(); ++i) {
          out.devices[i].platform_slot = slot;
          members.push_back(static_cast<int>(i));
        }
      }
      if (!members.empty()) out.platform_devices.push_back(std::move(members));
    }
    if (out.devices.empty())
      out.reason = "the OpenCL platforms report no available device (for a CPU device install pocl-opencl-icd)";
  } catch (const std::exception& e) {
    out.devices.clear();
    out.platform_devices.clear();
    out.reason = std::string("OpenCL discovery failed: ") + e.what();
  }
  return out;
}

// ---- DeviceState ----------------------------------------------------------------

namespace {
detail::CachingAllocator::Raw raw_allocator(cl_context context) {
  return {[context](std::size_t bytes) -> void* {
            cl_int err = CL_SUCCESS;
            cl_mem m = clCreateBuffer(context, CL_MEM_READ_WRITE, bytes, nullptr, &err);
            return err == CL_SUCCESS ? static_cast<void*>(m) : nullptr;
          },
          [](void* p, std::size_t) { clReleaseMemObject(static_cast<cl_mem>(p)); }};
}
}  // namespace

DeviceState::DeviceState(int index, const DeviceEntry& entry, cl_context context)
    : programs(context, entry.id, Device(DeviceType::OpenCL, index).str(), entry.props.fp64),
      allocator(Device(DeviceType::OpenCL, index).str(), raw_allocator(context), entry.props.memory_total),
      label_(Device(DeviceType::OpenCL, index).str()),
      entry_(entry),
      context_(context) {
  cl_int err = CL_SUCCESS;
  // Profiling gives the device clock Event uses (Note [Device clocks]); it
  // costs a few timestamps per command.
  const cl_command_queue_properties props = entry.profiling ? CL_QUEUE_PROFILING_ENABLE : 0;
  ANVIL_CL_CHECK(label_, (queue = clCreateCommandQueue(context, entry.id, props, &err), err));
  sync_every_op_ = env_flag("ANVIL_SYNC");
  // Big groups let PoCL vectorise across work-items; GPUs like 256.
  local_size_ = std::min<std::size_t>(is_cpu() ? 1024 : 256, entry.max_work_group);
  allocator.set_limit(detail::memory_limit_from_env(Device(DeviceType::OpenCL, index)));
}

DeviceState::~DeviceState() {
  if (queue != nullptr) clFinish(queue);
  retire_completed_locked(true);
  if (index_error_ != nullptr) clReleaseMemObject(index_error_);
  if (queue != nullptr) clReleaseCommandQueue(queue);
}

void DeviceState::track_locked(cl_event event, const char* op, std::unique_ptr<std::byte[]> staging) {
  in_flight_.push_back({event, op, std::move(staging)});
  ++enqueued_;
  if (sync_every_op_) {
    finish_locked();
    return;
  }
  // Keep the list short in long runs without syncs: drop what completed.
  if (in_flight_.size() >= 512) retire_completed_locked(false);
}

void DeviceState::retire_completed_locked(bool all) {
  while (!in_flight_.empty()) {
    InFlight& f = in_flight_.front();
    cl_int status = CL_COMPLETE;
    if (clGetEventInfo(f.event, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof status, &status, nullptr) != CL_SUCCESS)
      status = CL_COMPLETE;
    if (status > CL_COMPLETE && !all) break;  // still queued or running: so is everything after it
    if (status < 0 && failed_op_ == nullptr) {
      failed_op_ = f.op;
      failed_status_ = status;
    }
    clReleaseEvent(f.event);
    in_flight_.pop_front();
  }
}

void DeviceState::finish_locked() {
  const cl_int finish_status = clFinish(queue);
  retire_completed_locked(true);
  if (failed_op_ == nullptr && finish_status != CL_SUCCESS) {
    failed_op_ = current_op();
    failed_status_ = finish_status;
  }
  if (failed_op_ != nullptr) {
    const char* op = failed_op_;
    const cl_int status = failed_status_;
    failed_op_ = nullptr;
    failed_status_ = CL_SUCCESS;
    throw BackendError(detail::cat(op, ": the device reported ", status_name(status), " (", status, ") on ", label_,
                                   "; it surfaced at the next sync; run with ANVIL_SYNC=1 to stop at the failing op"));
  }
  if (!index_uses_.empty()) {
    std::int64_t flag[2] = {0, 0};
    ANVIL_CL_CHECK(label_, clEnqueueReadBuffer(queue, index_error_, CL_TRUE, 0, sizeof flag, flag, 0, nullptr, nullptr));
    const std::vector<IndexUse> uses = std::move(index_uses_);
    index_uses_.clear();
    if (flag[0] != 0) {
      const std::int64_t zero[2] = {0, 0};
      ANVIL_CL_CHECK(label_,
                     clEnqueueWriteBuffer(queue, index_error_, CL_TRUE, 0, sizeof zero, zero, 0, nullptr, nullptr));
      const IndexUse& u = uses.front();
      std::string ops;
      for (const IndexUse& x : uses)
        if (ops.find(x.op) == std::string::npos) ops += (ops.empty() ? "" : " or ") + std::string(x.op);
      throw IndexError(detail::cat(ops, ": index out of range on ", label_, "; expected 0 <= index < ", u.dim_size,
                                   ", got ", flag[1],
                                   " (found by the device, reported at the next sync; the output holds 0 there)"));
    }
  }
}

cl_mem DeviceState::index_error_buffer_locked(const char* op, std::int64_t dim_size) {
  if (index_error_ == nullptr) {
    cl_int err = CL_SUCCESS;
    const std::int64_t zero[2] = {0, 0};
    ANVIL_CL_CHECK(label_, (index_error_ = clCreateBuffer(context_, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR,
                                                          sizeof zero, const_cast<std::int64_t*>(zero), &err),
                            err));
  }
  // One entry per op name: a loop that never syncs must not grow this.
  if (std::none_of(index_uses_.begin(), index_uses_.end(), [&](const IndexUse& u) { return u.op == op; }))
    index_uses_.push_back({op, dim_size});
  return index_error_;
}

cl_event DeviceState::last_event_locked() {
  if (in_flight_.empty()) return nullptr;
  clRetainEvent(in_flight_.back().event);
  return in_flight_.back().event;
}

}  // namespace anvil::opencl
