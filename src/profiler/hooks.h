// The profiler's hooks (anvil/profiler.h): the calls the op frontend, the
// autograd engine, copies, syncs and the allocator make so a profile sees
// them. Each is a no-op unless a profile records.
//
//   Tensor binary_op(BinaryOp op, const Tensor& a, const Tensor& b) {
//     ANVIL_PROFILE_OP(name(op), a.device(), &a, &b);   // a span for this op
//     ...
//
// Note [Profiler off]
// An op pays for the profiler only what recording() costs: one relaxed load
// of a global atomic and a branch the predictor learns at once; the work of
// recording lives out of line behind it. The sync hooks also read the
// SyncGuard mode, but a sync waits for a device anyway. Measured with a loop
// of `a + b` on 2x3 f32 CPU tensors, alternating runs on a 2-core machine at
// load 13-20: 809-1005 ns/op before these hooks, 970-1027 ns/op after, i.e.
// within the noise (docs/profiling.md); the off path in binary_op is a load
// of the flag, a test and a branch.
#pragma once

#include <anvil/source_location.h>

#include <atomic>
#include <cstdint>
#include <initializer_list>
#include <string_view>

#include "anvil/device.h"

namespace anvil {
class Tensor;
}

namespace anvil::profiler::detail {

extern std::atomic<bool> g_recording;
inline bool recording() noexcept { return g_recording.load(std::memory_order_relaxed); }

enum class Kind : std::uint8_t { Op, Backward, Copy, Sync, Optimizer, Collective, User };
const char* category_name(Kind kind) noexcept;

// A span's handle: the slot of its record on this thread, or -1 when none was
// opened (off, or the same op already open: binary_op inside add's span).
struct Slot {
  int index = -1;
  std::uint32_t generation = 0;
};

// `device`: where the op runs; when null, the device of the first defined
// input (read only when recording, so an op pays nothing for it when off).
Slot begin_op(Kind kind, const char* name, const Device* device, std::initializer_list<const Tensor*> inputs) noexcept;
Slot begin_named(Kind kind, std::string_view name, Device d) noexcept;
void end_span(Slot slot, std::uint64_t bytes = 0) noexcept;

// An op (or backward node) from here to the end of the scope.
class OpSpan {
 public:
  OpSpan(Kind kind, const char* name, const Device* device, std::initializer_list<const Tensor*> inputs) noexcept {
    if (recording()) [[unlikely]]
      slot_ = begin_op(kind, name, device, inputs);
  }
  ~OpSpan() {
    if (slot_.index >= 0) [[unlikely]]
      end_span(slot_);
  }
  OpSpan(const OpSpan&) = delete;
  OpSpan& operator=(const OpSpan&) = delete;

 private:
  Slot slot_;
};

#define ANVIL_PROFILE_CONCAT_(a, b) a##b
#define ANVIL_PROFILE_CONCAT(a, b) ANVIL_PROFILE_CONCAT_(a, b)
// A span named `name` (a string literal or name(op)) for the op whose tensor
// inputs are the pointers that follow (null: a scalar); it runs on the
// first defined input's device.
#define ANVIL_PROFILE_OP(name, ...)                                                    \
  ::anvil::profiler::detail::OpSpan ANVIL_PROFILE_CONCAT(anvil_profile_op_, __LINE__)( \
      ::anvil::profiler::detail::Kind::Op, name, nullptr, {__VA_ARGS__})
// The same for an op that creates a tensor on `device` from no inputs.
#define ANVIL_PROFILE_OP_ON(name, device)                                               \
  const ::anvil::Device ANVIL_PROFILE_CONCAT(anvil_profile_device_, __LINE__) = device; \
  ::anvil::profiler::detail::OpSpan ANVIL_PROFILE_CONCAT(anvil_profile_op_, __LINE__)(  \
      ::anvil::profiler::detail::Kind::Op, name, &ANVIL_PROFILE_CONCAT(anvil_profile_device_, __LINE__), {})

// A copy between devices (or host memory and a device): a span named
// "copy cpu -> opencl:0" with its bytes, on the queue of the device end.
class CopySpan {
 public:
  CopySpan(Device from, Device to, std::uint64_t bytes) noexcept {
    if (recording()) [[unlikely]]
      slot_ = begin_copy(from, to);
    bytes_ = bytes;
  }
  ~CopySpan() {
    if (slot_.index >= 0) [[unlikely]]
      end_span(slot_, bytes_);
  }
  CopySpan(const CopySpan&) = delete;
  CopySpan& operator=(const CopySpan&) = delete;

 private:
  static Slot begin_copy(Device from, Device to) noexcept;
  Slot slot_;
  std::uint64_t bytes_ = 0;
};

// The public call that may make the host wait, and where the user called it:
// set by item(), to_vector(), printing, to(), copy_to() and synchronize(); the
// outermost one on a thread wins (to_vector's own copy is still to_vector's).
struct CallSite {
  const char* api;
  SourceLocation location;
  bool is_explicit;  // synchronize, to, cpu, copy_to: asked for by name (see SyncGuard)
};
const CallSite* current_call_site() noexcept;

class SiteScope {
 public:
  SiteScope(const char* api, const SourceLocation& location, bool is_explicit) noexcept;
  ~SiteScope();
  SiteScope(const SiteScope&) = delete;
  SiteScope& operator=(const SiteScope&) = delete;

 private:
  CallSite site_;
  bool owner_;
};

// A host wait on `d` (nothing for the CPU, which never waits): checks the
// SyncGuard before anything waits (it may throw ImplicitSync), then times the
// wait and files it under the current call site.
class SyncSpan {
 public:
  explicit SyncSpan(Device d);
  ~SyncSpan();
  SyncSpan(const SyncSpan&) = delete;
  SyncSpan& operator=(const SyncSpan&) = delete;

 private:
  Device device_;
  Slot slot_;
  std::int64_t start_ns_ = 0;
};

// Storage allocations (+bytes) and frees (-bytes) on `d`.
void memory_event(Device d, std::int64_t bytes) noexcept;
inline void on_memory(Device d, std::int64_t bytes) noexcept {
  if (recording()) [[unlikely]]
    memory_event(d, bytes);
}

// A collective over `bytes` on `d` (called where the ledger counts it).
void collective_event(Device d, std::uint64_t bytes) noexcept;

}  // namespace anvil::profiler::detail
