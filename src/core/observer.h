// The core's observer table (c10's RecordFunction callbacks): the events the
// op frontend, the autograd engine, copies, host syncs, the allocator and the
// collectives report, and one slot where a tool registers the functions that
// receive them. The profiler (src/profiler) registers while a profile
// records; the core knows no tool.
//
//   Tensor binary_op(BinaryOp op, const Tensor& a, const Tensor& b) {
//     ANVIL_PROFILE_OP(name(op), &a, &b);   // a span for this op, if observed
//     ...
//
// Note [Observer off]
// With no observer registered, an event costs one relaxed load of a global
// atomic pointer and a branch the predictor learns at once; the work lives
// out of line behind it. A registered table has static storage duration and
// is constant-initialised, so the relaxed load that finds it may read it,
// and a span that began under it may still end through it after the tool
// unregistered (the tool then drops the event). Measured when the profiler's
// hooks of this shape came in (a flag load then): a loop of `a + b` on 2x3
// f32 CPU tensors ran 809-1005 ns/op before them and 970-1027 after, within
// the noise of a busy 2-core machine (docs/profiling.md).
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

namespace anvil::detail {

enum class SpanKind : std::uint8_t { Op, Backward, Copy, Sync, Optimizer, Collective, User };

// An observer's handle on a span it opened; a negative index: none was
// opened (end_span is then not called). The rest is the observer's.
struct SpanHandle {
  int index = -1;
  std::uint32_t generation = 0;
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

// Note [Convolution algorithms]
// A convolution's cost depends on the algorithm its library picked (cuDNN's
// IMPLICIT_PRECOMP_GEMM or WINOGRAD, oneDNN's brgconv:avx2, anvil's own
// im2col + GEMM), its math (TF32 or not) and the workspace it took; the
// profiler shows them per direction (issue 38). The code that chose reports
// one record per direction as it runs it; strings are static or live as
// long as the library's cached plan, and the observer copies them.
struct ConvAlgorithm {
  const char* direction;          // "forward", "backward_data", "backward_weight"
  std::string_view algorithm;     // the library's name for it ("IMPLICIT_PRECOMP_GEMM", "brgconv:avx2", "im2col+gemm")
  std::string_view math;          // "f32", "bf16", "TF32 allowed", "tensor op", ...
  std::uint64_t workspace_bytes;  // scratch memory the call took beyond its operands
};

// What an observer receives. Every member is set and noexcept, and is called
// from whichever thread the event happens on, several at once.
struct Observer {
  // An op or backward node; `device` null: the first defined input's device.
  SpanHandle (*begin_op)(SpanKind kind, const char* name, const Device* device,
                         std::initializer_list<const Tensor*> inputs) noexcept;
  SpanHandle (*begin_named)(SpanKind kind, std::string_view name, Device d) noexcept;
  SpanHandle (*begin_copy)(Device from, Device to) noexcept;
  // A host wait on a device, at `site` (null: no public call on this thread).
  SpanHandle (*begin_sync)(Device d, const CallSite* site) noexcept;
  void (*end_span)(SpanHandle span, std::uint64_t bytes) noexcept;
  void (*memory)(Device d, std::int64_t bytes) noexcept;       // +allocated, -freed
  void (*collective)(Device d, std::uint64_t bytes) noexcept;  // where the ledger counts one
  // A piece of CPU work the backend may split across its threads (a
  // parallel_for past its least size, a GEMM, a convolution, a reorder),
  // reported by the thread that ran it when it ends: the team it got, its
  // width (the most threads the size rule gives it at the reference wake
  // cost), whether it is a parallel region here (the size rule split it at
  // this process's wake cost; the team is 1 only where the thread bound is),
  // and its wall time in ns. Note [Parallel cost report] in
  // src/backends/cpu/threads.h.
  void (*parallel)(int threads, double width, bool region, std::int64_t ns) noexcept;
  // Which algorithm one direction of a convolution ran with, reported by
  // whoever chose it (a backend's library call, or the frontend's im2col and
  // composite paths) on the thread that ran it, filed under the span open
  // there (Note [Convolution algorithms]). Optional: null where not wanted.
  void (*algorithm)(const ConvAlgorithm& choice) noexcept;
};

// Registers `observer` (static storage duration, constant-initialised, never
// freed; see the Note), or none with nullptr. One at a time: the caller
// serialises registration (the profiler allows one profile at a time).
void set_observer(const Observer* observer) noexcept;

extern std::atomic<const Observer*> g_observer;
inline const Observer* observer() noexcept { return g_observer.load(std::memory_order_relaxed); }

// A span of `kind` from here to the end of the scope.
class OpSpan {
 public:
  OpSpan(SpanKind kind, const char* name, const Device* device, std::initializer_list<const Tensor*> inputs) noexcept {
    if (const Observer* o = observer()) [[unlikely]] {
      span_ = o->begin_op(kind, name, device, inputs);
      if (span_.index >= 0) observer_ = o;
    }
  }
  ~OpSpan() {
    if (observer_ != nullptr) [[unlikely]]
      observer_->end_span(span_, 0);
  }
  OpSpan(const OpSpan&) = delete;
  OpSpan& operator=(const OpSpan&) = delete;

 private:
  const Observer* observer_ = nullptr;
  SpanHandle span_;
};

#define ANVIL_PROFILE_CONCAT_(a, b) a##b
#define ANVIL_PROFILE_CONCAT(a, b) ANVIL_PROFILE_CONCAT_(a, b)
// A span named `name` (a string literal or name(op)) for the op whose tensor
// inputs are the pointers that follow (null: a scalar); it runs on the
// first defined input's device.
#define ANVIL_PROFILE_OP(name, ...)                                                                              \
  ::anvil::detail::OpSpan ANVIL_PROFILE_CONCAT(anvil_profile_op_, __LINE__)(::anvil::detail::SpanKind::Op, name, \
                                                                            nullptr, {__VA_ARGS__})
// The same for an op that creates a tensor on `device` from no inputs.
#define ANVIL_PROFILE_OP_ON(name, device)                                               \
  const ::anvil::Device ANVIL_PROFILE_CONCAT(anvil_profile_device_, __LINE__) = device; \
  ::anvil::detail::OpSpan ANVIL_PROFILE_CONCAT(anvil_profile_op_, __LINE__)(            \
      ::anvil::detail::SpanKind::Op, name, &ANVIL_PROFILE_CONCAT(anvil_profile_device_, __LINE__), {})

// A copy between devices (or host memory and a device) of `bytes`.
class CopySpan {
 public:
  CopySpan(Device from, Device to, std::uint64_t bytes) noexcept : bytes_(bytes) {
    if (const Observer* o = observer()) [[unlikely]] {
      span_ = o->begin_copy(from, to);
      if (span_.index >= 0) observer_ = o;
    }
  }
  ~CopySpan() {
    if (observer_ != nullptr) [[unlikely]]
      observer_->end_span(span_, bytes_);
  }
  CopySpan(const CopySpan&) = delete;
  CopySpan& operator=(const CopySpan&) = delete;

 private:
  const Observer* observer_ = nullptr;
  SpanHandle span_;
  std::uint64_t bytes_;
};

// Names the public call for the host waits inside it (the outermost wins).
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

// A host wait on `d` (nothing for the CPU, which never waits): applies
// SyncGuard's rule before anything waits (it may throw ImplicitSync), then
// reports the wait with the current call site.
class SyncSpan {
 public:
  explicit SyncSpan(Device d);
  ~SyncSpan() {
    if (observer_ != nullptr) [[unlikely]]
      observer_->end_span(span_, 0);
  }
  SyncSpan(const SyncSpan&) = delete;
  SyncSpan& operator=(const SyncSpan&) = delete;

 private:
  const Observer* observer_ = nullptr;
  SpanHandle span_;
};

// Storage allocations (+bytes) and frees (-bytes) on `d`.
inline void observe_memory(Device d, std::int64_t bytes) noexcept {
  if (const Observer* o = observer()) [[unlikely]]
    o->memory(d, bytes);
}

// One direction of a convolution's algorithm (Note [Convolution algorithms]).
inline void observe_conv_algorithm(const ConvAlgorithm& choice) noexcept {
  if (const Observer* o = observer()) [[unlikely]]
    if (o->algorithm != nullptr) o->algorithm(choice);
}

// A collective over `bytes` on `d`.
inline void observe_collective(Device d, std::uint64_t bytes) noexcept {
  if (const Observer* o = observer()) [[unlikely]]
    o->collective(d, bytes);
}

}  // namespace anvil::detail
