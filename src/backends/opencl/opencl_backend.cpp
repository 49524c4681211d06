// Enumeration, memory, movement and synchronisation of the OpenCL backend;
// the primitives are in primitives.cpp and gemm.cpp.
#include "backends/opencl/opencl_backend.h"

#include <cstdint>
#include <cstring>

#include "anvil/error.h"

namespace anvil::detail {
Backend* make_opencl_backend() { return &opencl::backend(); }
}  // namespace anvil::detail

namespace anvil::opencl {

OpenCLBackend& backend() {
  // Leaked on purpose: tensors with static storage duration may be freed
  // after any destructor of ours would run, and the OpenCL driver may already
  // be unloaded at exit.
  static OpenCLBackend* instance = new OpenCLBackend();
  return *instance;
}

OpenCLBackend::~OpenCLBackend() = default;

const Discovery& OpenCLBackend::discovery() noexcept {
  std::call_once(discovered_, [this] {
    discovery_ = discover();
    contexts_.assign(discovery_.platform_devices.size(), nullptr);
    state_once_ = std::make_unique<std::once_flag[]>(discovery_.devices.size());
    states_.resize(discovery_.devices.size());
  });
  return discovery_;
}

int OpenCLBackend::device_count() noexcept { return static_cast<int>(discovery().devices.size()); }

std::string OpenCLBackend::unavailable_reason() noexcept {
  try {
    return discovery().reason;
  } catch (...) {
    return "out of memory";
  }
}

bool OpenCLBackend::is_accelerator(int index) noexcept {
  const Discovery& d = discovery();
  if (index < 0 || index >= static_cast<int>(d.devices.size())) return false;
  if (d.devices[index].type & (CL_DEVICE_TYPE_GPU | CL_DEVICE_TYPE_ACCELERATOR)) return true;
  return env_flag("ANVIL_OPENCL_CPU");
}

DeviceProperties OpenCLBackend::properties(int index) {
  const Discovery& d = discovery();
  ANVIL_CHECK(index >= 0 && index < static_cast<int>(d.devices.size()), DeviceError,
              "properties: device opencl:", index, " does not exist; expected an index below ", d.devices.size(),
              ", got ", index);
  return d.devices[index].props;
}

cl_context OpenCLBackend::context_for_slot(int slot) {
  std::lock_guard lock(contexts_mutex_);
  if (contexts_[slot] != nullptr) return contexts_[slot];
  std::vector<cl_device_id> ids;
  for (int i : discovery_.platform_devices[slot]) ids.push_back(discovery_.devices[i].id);
  const cl_context_properties props[] = {
      CL_CONTEXT_PLATFORM,
      reinterpret_cast<cl_context_properties>(discovery_.devices[discovery_.platform_devices[slot][0]].platform), 0};
  cl_int err = CL_SUCCESS;
  cl_context ctx = nullptr;
  ANVIL_CL_CHECK(Device(DeviceType::OpenCL, discovery_.platform_devices[slot][0]).str(),
                 (ctx = clCreateContext(props, static_cast<cl_uint>(ids.size()), ids.data(), nullptr, nullptr, &err),
                  err));
  contexts_[slot] = ctx;
  return ctx;
}

DeviceState& OpenCLBackend::state(int index) {
  const Discovery& d = discovery();
  ANVIL_CHECK(index >= 0 && index < static_cast<int>(d.devices.size()), DeviceError, current_op(), ": device opencl:",
              index, " does not exist; expected an index below ", d.devices.size(), ", got ", index);
  std::call_once(state_once_[index], [&] {
    const DeviceEntry& e = d.devices[index];
    states_[index] = std::make_unique<DeviceState>(index, e, context_for_slot(e.platform_slot));
  });
  return *states_[index];
}

// ---- memory ---------------------------------------------------------------------

// A zero-byte tensor still gets a real (one-byte) buffer, so every storage
// has a valid cl_mem to pass to kernels.
void* OpenCLBackend::allocate(int index, std::size_t bytes) {
  OpScope scope("allocate");
  return state(index).allocator.allocate(bytes == 0 ? 1 : bytes);
}

void OpenCLBackend::deallocate(int index, void* data, std::size_t bytes) noexcept {
  if (data == nullptr || index < 0 || index >= static_cast<int>(states_.size()) || !states_[index]) return;
  states_[index]->allocator.deallocate(data, bytes == 0 ? 1 : bytes);
}

MemoryStats OpenCLBackend::memory_stats(int index) { return state(index).allocator.stats(); }
void OpenCLBackend::reset_peak_memory_stats(int index) { state(index).allocator.reset_peak(); }
void OpenCLBackend::empty_cache(int index) { state(index).allocator.empty_cache(); }
void OpenCLBackend::set_memory_limit(int index, std::uint64_t bytes) { state(index).allocator.set_limit(bytes); }

// ---- movement -------------------------------------------------------------------

namespace {
// Writes up to this size are staged in host memory we own and enqueued
// without waiting; larger ones wait (the caller's buffer may die on return,
// and a second full copy of a large buffer costs more than the wait).
constexpr std::size_t kMaxStagedWrite = std::size_t{4} << 20;

cl_mem mem(const void* handle) { return static_cast<cl_mem>(const_cast<void*>(handle)); }
}  // namespace

void OpenCLBackend::copy_from_host(int index, void* dst, std::size_t dst_offset, const void* src, std::size_t bytes) {
  OpScope scope("copy_from_host");
  if (bytes == 0) return;
  DeviceState& s = state(index);
  std::lock_guard lock(s.mutex);
  cl_event ev = nullptr;
  if (bytes <= kMaxStagedWrite) {
    auto staging = std::make_unique<std::byte[]>(bytes);
    std::memcpy(staging.get(), src, bytes);
    ANVIL_CL_CHECK(s.label(), clEnqueueWriteBuffer(s.queue, mem(dst), CL_FALSE, dst_offset, bytes, staging.get(), 0,
                                                   nullptr, &ev));
    s.track_locked(ev, "copy_from_host", std::move(staging));
  } else {
    ANVIL_CL_CHECK(s.label(),
                   clEnqueueWriteBuffer(s.queue, mem(dst), CL_TRUE, dst_offset, bytes, src, 0, nullptr, &ev));
    s.track_locked(ev, "copy_from_host");
  }
}

void OpenCLBackend::copy_to_host(int index, void* dst, const void* src, std::size_t src_offset, std::size_t bytes) {
  OpScope scope("copy_to_host");
  DeviceState& s = state(index);
  std::lock_guard lock(s.mutex);
  s.finish_locked();  // report earlier failures before reading what they wrote
  if (bytes == 0) return;
  ANVIL_CL_CHECK(s.label(),
                 clEnqueueReadBuffer(s.queue, mem(src), CL_TRUE, src_offset, bytes, dst, 0, nullptr, nullptr));
}

bool OpenCLBackend::can_copy_direct(int dst_index, int src_index) noexcept {
  const Discovery& d = discovery();
  const int n = static_cast<int>(d.devices.size());
  if (dst_index < 0 || src_index < 0 || dst_index >= n || src_index >= n) return false;
  return d.devices[dst_index].platform_slot == d.devices[src_index].platform_slot;
}

void OpenCLBackend::copy_device(int dst_index, void* dst, std::size_t dst_offset, int src_index, const void* src,
                                std::size_t src_offset, std::size_t bytes) {
  OpScope scope("copy_device");
  if (bytes == 0) return;
  ANVIL_ASSERT(can_copy_direct(dst_index, src_index), "copy_device between opencl:", src_index, " and opencl:",
               dst_index, " which share no context");
  DeviceState& d = state(dst_index);
  if (dst_index == src_index) {
    std::lock_guard lock(d.mutex);
    cl_event ev = nullptr;
    ANVIL_CL_CHECK(d.label(), clEnqueueCopyBuffer(d.queue, mem(src), mem(dst), src_offset, dst_offset, bytes, 0,
                                                  nullptr, &ev));
    d.track_locked(ev, "copy_device");
    return;
  }
  // Two queues of one context: the copy runs on the destination's queue
  // after everything queued on the source so far, and the source queue waits
  // for the copy before it runs anything else (which may reuse the block).
  DeviceState& s = state(src_index);
  std::scoped_lock lock(d.mutex, s.mutex);
  cl_event ready = nullptr, copied = nullptr, after = nullptr;
  ANVIL_CL_CHECK(s.label(), clEnqueueMarkerWithWaitList(s.queue, 0, nullptr, &ready));
  ANVIL_CL_CHECK(s.label(), clFlush(s.queue));
  const cl_int st = clEnqueueCopyBuffer(d.queue, mem(src), mem(dst), src_offset, dst_offset, bytes, 1, &ready, &copied);
  clReleaseEvent(ready);
  ANVIL_CL_CHECK(d.label(), st);
  d.track_locked(copied, "copy_device");
  ANVIL_CL_CHECK(d.label(), clFlush(d.queue));
  ANVIL_CL_CHECK(s.label(), clEnqueueBarrierWithWaitList(s.queue, 1, &copied, &after));
  s.track_locked(after, "copy_device");
}

void OpenCLBackend::synchronize(int index) {
  OpScope scope("synchronize");
  DeviceState& s = state(index);
  std::lock_guard lock(s.mutex);
  s.finish_locked();
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

bool OpenCLBackend::has_device_clock(int index) noexcept {
  const Discovery& d = discovery();
  return index >= 0 && index < static_cast<int>(d.devices.size()) && d.devices[index].profiling;
}

void* OpenCLBackend::record_timestamp(int index) {
  OpScope scope("record_timestamp");
  DeviceState& s = state(index);
  std::lock_guard lock(s.mutex);
  cl_event marker = nullptr;
  ANVIL_CL_CHECK(s.label(), clEnqueueMarkerWithWaitList(s.queue, 0, nullptr, &marker));
  return marker;
}

double OpenCLBackend::timestamp_elapsed(int index, void* start, void* end) {
  OpScope scope("timestamp_elapsed");
  DeviceState& s = state(index);
  const cl_event markers[2] = {static_cast<cl_event>(start), static_cast<cl_event>(end)};
  // Not under the device's mutex: other threads may enqueue while we wait.
  const cl_int waited = clWaitForEvents(2, markers);
  if (waited != CL_SUCCESS) {
    // A command before a marker failed: name it as synchronize() would.
    std::lock_guard lock(s.mutex);
    s.finish_locked();
    ANVIL_CL_CHECK(s.label(), waited);
  }
  cl_ulong ns[2] = {0, 0};
  for (int i = 0; i < 2; ++i)
    ANVIL_CL_CHECK(s.label(),
                   clGetEventProfilingInfo(markers[i], CL_PROFILING_COMMAND_END, sizeof ns[i], &ns[i], nullptr));
  // Signed: `end` may have been recorded first.
  return static_cast<double>(static_cast<std::int64_t>(ns[1] - ns[0])) * 1e-9;
}

void OpenCLBackend::release_timestamp(int, void* stamp) noexcept {
  if (stamp != nullptr) clReleaseEvent(static_cast<cl_event>(stamp));
}

// ---- capabilities ---------------------------------------------------------------

bool OpenCLBackend::supports(const char* op, DType t, int index) noexcept {
  const Discovery& d = discovery();
  if (index < 0 || index >= static_cast<int>(d.devices.size())) return false;
  const bool fp64 = d.devices[index].props.fp64;
  if (t == DType::F64 && !fp64) return false;
  // Philox's normals are computed in double on every device (philox.h).
  if (op != nullptr && std::strncmp(op, "rand", 4) == 0 && !fp64) return false;
  return true;
}

}  // namespace anvil::opencl
