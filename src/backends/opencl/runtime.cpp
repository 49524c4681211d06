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
  p.kind = (e.type & CL_DEVICE_TYPE_GPU) ? "gpu" : (e.type & CL_DEVICE_TYPE_ACCELERATOR) ? "accelerator" : "cpu";
  p.memory_total = device_value<cl_ulong>(id, CL_DEVICE_GLOBAL_MEM_SIZE);
  p.memory_free = 0;  // OpenCL has no portable query for it
  p.compute_units = static_cast<int>(device_value<cl_uint>(id, CL_DEVICE_MAX_COMPUTE_UNITS));
  p.clock_mhz = static_cast<int>(device_value<cl_uint>(id, CL_DEVICE_MAX_CLOCK_FREQUENCY));
  p.driver_version = device_string(id, CL_DRIVER_VERSION);
  p.runtime_version = device_string(id, CL_DEVICE_VERSION);
  const std::string extensions = device_string(id, CL_DEVICE_EXTENSIONS);
  // ANVIL_OPENCL_NO_FP64=1 hides fp64, so tests see what a user of a GPU
  // without it sees (test_capabilities).
  p.fp64 = (device_value<cl_device_fp_config>(id, CL_DEVICE_DOUBLE_FP_CONFIG) != 0 ||
            extensions.find("cl_khr_fp64") != std::string::npos) &&
           !env_flag("ANVIL_OPENCL_NO_FP64");
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

device_common::DeviceList<DeviceEntry> Runtime::discover() noexcept {
  device_common::DeviceList<DeviceEntry> out;
  std::vector<std::vector<cl_device_id>> platform_ids;
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
      if (clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, 0, nullptr, &ndevices) != CL_SUCCESS || ndevices == 0) continue;
      std::vector<cl_device_id> ids(ndevices);
      if (clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, ndevices, ids.data(), nullptr) != CL_SUCCESS) continue;
      const int slot = static_cast<int>(platform_ids.size());
      std::vector<cl_device_id> members;
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
          members.push_back(out.devices[i].id);
        }
      }
      if (!members.empty()) platform_ids.push_back(std::move(members));
    }
    if (out.devices.empty())
      out.reason = "the OpenCL platforms report no available device (for a CPU device install pocl-opencl-icd)";
  } catch (const std::exception& e) {
    out.devices.clear();
    platform_ids.clear();
    out.reason = std::string("OpenCL discovery failed: ") + e.what();
  }
  platform_ids_ = std::move(platform_ids);
  contexts_.assign(platform_ids_.size(), nullptr);
  return out;
}

bool Runtime::is_accelerator(const DeviceEntry& e) noexcept {
  return (e.type & (CL_DEVICE_TYPE_GPU | CL_DEVICE_TYPE_ACCELERATOR)) != 0 || env_flag("ANVIL_OPENCL_CPU");
}

cl_context Runtime::context_for(const DeviceEntry& e, const std::string& label) {
  std::lock_guard lock(contexts_mutex_);
  cl_context& ctx = contexts_[e.platform_slot];
  if (ctx != nullptr) return ctx;
  const std::vector<cl_device_id>& ids = platform_ids_[e.platform_slot];
  const cl_context_properties props[] = {CL_CONTEXT_PLATFORM, reinterpret_cast<cl_context_properties>(e.platform), 0};
  cl_int err = CL_SUCCESS;
  cl_context created = nullptr;
  ANVIL_CL_CHECK(
      label,
      (created = clCreateContext(props, static_cast<cl_uint>(ids.size()), ids.data(), nullptr, nullptr, &err), err));
  ctx = created;
  return ctx;
}

// ---- Queue ----------------------------------------------------------------------

namespace {
cl_mem mem(const void* handle) { return static_cast<cl_mem>(const_cast<void*>(handle)); }

// Writes up to this size are staged in host memory we own and enqueued
// without waiting; larger ones wait (the caller's buffer may die on return,
// and a second full copy of a large buffer costs more than the wait).
constexpr std::size_t kMaxStagedWrite = std::size_t{4} << 20;
}  // namespace

Queue::Queue(Runtime& runtime, int, const DeviceEntry& entry, const std::string& label)
    : programs(ClCompiler(runtime.context_for(entry, label), entry.id, label, entry.props.fp64)),
      first_runs(entry.id),
      label_(label),
      entry_(entry),
      context_(runtime.context_for(entry, label)) {
  cl_int err = CL_SUCCESS;
  // Profiling gives the device clock Event uses (Note [Device clocks]); it
  // costs a few timestamps per command.
  const cl_command_queue_properties props = entry.profiling ? CL_QUEUE_PROFILING_ENABLE : 0;
  ANVIL_CL_CHECK(label_, (handle = clCreateCommandQueue(context_, entry.id, props, &err), err));
  // Big groups let PoCL vectorise across work-items; GPUs like 256.
  local_size_ = std::min<std::size_t>(is_cpu() ? 1024 : 256, entry.max_work_group);
}

Queue::~Queue() {
  if (handle != nullptr) clFinish(handle);
  retire_completed(true);
  if (handle != nullptr) clReleaseCommandQueue(handle);
}

detail::CachingAllocator::Raw Queue::raw_allocator() const {
  cl_context context = context_;
  return {[context](std::size_t bytes) -> void* {
            cl_int err = CL_SUCCESS;
            cl_mem m = clCreateBuffer(context, CL_MEM_READ_WRITE, bytes, nullptr, &err);
            return err == CL_SUCCESS ? static_cast<void*>(m) : nullptr;
          },
          [](void* p, std::size_t) { clReleaseMemObject(static_cast<cl_mem>(p)); }};
}

bool Queue::copy_from_host(void* dst, std::size_t dst_offset, const void* src, std::size_t bytes) {
  cl_event ev = nullptr;
  if (bytes <= kMaxStagedWrite) {
    auto staging = std::make_unique<std::byte[]>(bytes);
    std::memcpy(staging.get(), src, bytes);
    ANVIL_CL_CHECK(label_,
                   clEnqueueWriteBuffer(handle, mem(dst), CL_FALSE, dst_offset, bytes, staging.get(), 0, nullptr, &ev));
    track(ev, "copy_from_host", std::move(staging));
  } else {
    ANVIL_CL_CHECK(label_, clEnqueueWriteBuffer(handle, mem(dst), CL_TRUE, dst_offset, bytes, src, 0, nullptr, &ev));
    track(ev, "copy_from_host");
  }
  return false;
}

void Queue::copy_to_host(void* dst, const void* src, std::size_t src_offset, std::size_t bytes) {
  ANVIL_CL_CHECK(label_, clEnqueueReadBuffer(handle, mem(src), CL_TRUE, src_offset, bytes, dst, 0, nullptr, nullptr));
}

void Queue::copy_within(void* dst, std::size_t dst_byte, const void* src, std::size_t src_byte, std::size_t bytes,
                        const char* op) {
  cl_event ev = nullptr;
  ANVIL_CL_CHECK(label_, clEnqueueCopyBuffer(handle, mem(src), mem(dst), src_byte, dst_byte, bytes, 0, nullptr, &ev));
  track(ev, op);
}

// Two queues of one context: the copy runs on the destination's queue after
// everything queued on the source so far, and the source queue waits for
// the copy before it runs anything else (which may reuse the block).
void Queue::copy_between(Queue& d, void* dst, std::size_t dst_offset, Queue& s, const void* src, std::size_t src_offset,
                         std::size_t bytes) {
  cl_event ready = nullptr, copied = nullptr, after = nullptr;
  ANVIL_CL_CHECK(s.label_, clEnqueueMarkerWithWaitList(s.handle, 0, nullptr, &ready));
  ANVIL_CL_CHECK(s.label_, clFlush(s.handle));
  const cl_int st =
      clEnqueueCopyBuffer(d.handle, mem(src), mem(dst), src_offset, dst_offset, bytes, 1, &ready, &copied);
  clReleaseEvent(ready);
  ANVIL_CL_CHECK(d.label_, st);
  d.track(copied, "copy_device");
  ANVIL_CL_CHECK(d.label_, clFlush(d.handle));
  ANVIL_CL_CHECK(s.label_, clEnqueueBarrierWithWaitList(s.handle, 1, &copied, &after));
  s.track(after, "copy_device");
}

// Enqueued like any command (a blocking write would wait for everything
// queued before it): the index check's flag block, when created and after
// an error.
void Queue::zero(void* block, std::size_t bytes) {
  const cl_uchar pattern = 0;  // copied by the call
  cl_event ev = nullptr;
  ANVIL_CL_CHECK(label_, clEnqueueFillBuffer(handle, mem(block), &pattern, sizeof pattern, 0, bytes, 0, nullptr, &ev));
  track(ev, current_op());
}

void Queue::track(cl_event event, const char* op, std::unique_ptr<std::byte[]> staging) {
  in_flight_.push_back({event, op, std::move(staging)});
  ++enqueued_;
  // Keep the list short in long runs without syncs: drop what completed.
  if (in_flight_.size() >= 512) retire_completed(false);
}

void Queue::retire_completed(bool all) {
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

device_common::DeviceFault Queue::wait() {
  const cl_int finish_status = clFinish(handle);
  retire_completed(true);
  device_common::DeviceFault fault;
  if (failed_op_ == nullptr && finish_status == CL_SUCCESS) return fault;
  const cl_int status = failed_op_ != nullptr ? failed_status_ : finish_status;
  fault.status = detail::cat(status_name(status), " (", status, ")");
  fault.op = failed_op_;  // null when only clFinish failed: the shared backend names the running op
  failed_op_ = nullptr;
  failed_status_ = CL_SUCCESS;
  return fault;
}

cl_event Queue::last_event() {
  if (in_flight_.empty()) return nullptr;
  clRetainEvent(in_flight_.back().event);
  return in_flight_.back().event;
}

// ---- device clock ---------------------------------------------------------------
// See Note [Device clocks]. A timestamp is a marker (clEnqueueMarkerWithWaitList,
// OpenCL 1.2) on the device's profiling queue: on an in-order queue it
// completes when everything queued before it has, and CL_PROFILING_COMMAND_END
// says when, in nanoseconds of the device's clock. PoCL 3.1 (pthread) fills a
// marker's profiling info like any command's: QUEUED <= SUBMIT <= START <= END,
// and a marker queued after a 64 MiB copy ends ~20 us after the copy does
// (checked by hand; test_timer checks that a long op gives a longer interval
// than an empty one). The marker is not flushed: waiting for it flushes, and
// the device time between two markers does not depend on when they left the
// host. A driver that gave markers no profiling info would surface here as
// CL_PROFILING_INFO_NOT_AVAILABLE; ANVIL_OPENCL_PROFILE=0 then falls back to
// the host clock.

void* Queue::record_timestamp() {
  cl_event marker = nullptr;
  ANVIL_CL_CHECK(label_, clEnqueueMarkerWithWaitList(handle, 0, nullptr, &marker));
  return marker;
}

double Queue::elapsed_seconds(void* start, void* end, const std::function<void()>& report_device_fault) {
  const cl_event markers[2] = {static_cast<cl_event>(start), static_cast<cl_event>(end)};
  const cl_int waited = clWaitForEvents(2, markers);
  if (waited != CL_SUCCESS) {
    report_device_fault();  // a command before a marker failed: name it as synchronize() would
    ANVIL_CL_CHECK(label_, waited);
  }
  cl_ulong ns[2] = {0, 0};
  for (int i = 0; i < 2; ++i)
    ANVIL_CL_CHECK(label_,
                   clGetEventProfilingInfo(markers[i], CL_PROFILING_COMMAND_END, sizeof ns[i], &ns[i], nullptr));
  // Signed: `end` may have been recorded first.
  return static_cast<double>(static_cast<std::int64_t>(ns[1] - ns[0])) * 1e-9;
}

void Queue::release_timestamp(const DeviceEntry&, void* stamp) noexcept {
  clReleaseEvent(static_cast<cl_event>(stamp));
}

}  // namespace anvil::opencl
