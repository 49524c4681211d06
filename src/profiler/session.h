// What a profile records while it runs (recorder.cpp), and what the reports
// read once it has stopped (report.cpp). Internal to src/profiler.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "anvil/profiler.h"
#include "core/observer.h"

namespace anvil::profiler::detail {

std::int64_t now_ns() noexcept;

// Whether a profile records: what Range and enabled() ask; the core's
// events reach the profiler through its observer table (core/observer.h),
// registered while a profile records.
extern std::atomic<bool> g_recording;
inline bool recording() noexcept { return g_recording.load(std::memory_order_relaxed); }

using Kind = anvil::detail::SpanKind;
using Slot = anvil::detail::SpanHandle;
const char* category_name(Kind kind) noexcept;

struct DeviceLess {
  bool operator()(Device a, Device b) const noexcept {
    if (a.type() != b.type()) return a.type() < b.type();
    return a.index() < b.index();
  }
};

// One span (or instant) on one host thread.
struct Record {
  Kind kind = Kind::Op;
  std::string name;
  std::string shapes;
  Device device;
  int depth = 0;
  std::int64_t start_ns = 0, end_ns = 0;
  std::int64_t child_ns = 0;  // the spans directly inside it
  std::int64_t memory = 0;    // allocated - freed inside it, children included
  std::uint64_t bytes = 0;
  void* mark_start = nullptr;  // device-clock markers (Note [Device clocks])
  void* mark_end = nullptr;
  int site = -1;                          // syncs: index into Session::sites
  std::vector<ParallelPiece> parallel;    // CPU work directly inside it (Note [Parallel cost report])
  std::vector<ConvAlgorithm> algorithms;  // Note [Convolution algorithms]
  bool closed = false;
  // Filled when the profile stops:
  bool has_device_span = false;
  std::int64_t device_start_ns = 0, device_end_ns = 0;
};

// One host thread's records, owned by the session. Its mutex is uncontended
// while recording (only its own thread writes); stop() takes it to close the
// log, after which no thread writes it (Note [Profile lifetime]).
struct ThreadLog {
  std::mutex mutex;
  bool closed = false;  // set by stop(): what arrives later is dropped
  int thread = 0;
  std::vector<Record> records;
  std::vector<int> open;  // indices of the open spans, innermost last
};

// A device's clock, tied to the host's: a marker recorded on an idle queue
// right after a wait completes at (about) the host time read then, so a
// marker's device time minus the reference's, plus that host time, places it
// on the host's timeline.
struct DeviceClock {
  bool tried = false;
  void* reference = nullptr;  // null: no clock (spans stay host-only)
  std::int64_t reference_host_ns = 0;
};

struct MemorySample {
  std::int64_t ns;
  Device device;
  std::int64_t live;
};

// Note [Profile lifetime]
// Ops on any thread may record while another thread starts, stops or
// destroys a profile, so a session is shared: the Profile owns it, and a hook
// holds it (a weak_ptr locked for the call) only while it records. A thread
// finds the session through g_current (a mutex) once per session, then
// through its thread-local weak_ptr; a stopped or freed one is never
// written. stop() marks the session and then each thread's log stopped under
// their locks; a hook checks that mark under the same lock and drops what it
// holds (releasing its device markers). Locks are taken one at a time (never a
// log's inside the session's), so stopping cannot deadlock with a hook.
// Off, ops pay only the observer check (Note [Observer off]).
struct Session {
  // Set before the session is published, read-only afterwards:
  Options options;
  std::uint32_t generation = 0;
  std::int64_t start_ns = 0;

  // profile_until_exit's: set just after the start (its own exit handler is
  // registered then too), read by any thread's first op on a device.
  std::atomic<bool> until_exit{false};

  std::atomic<bool> stopped{false};  // written under mutex; read by the owning Profile without it
  std::int64_t stop_ns = 0;

  std::mutex mutex;  // everything below, and stopped's writes
  std::vector<std::unique_ptr<ThreadLog>> threads;
  std::map<Device, DeviceClock, DeviceLess> clocks;
  std::vector<SyncSite> sites;
  std::map<Device, MemoryTotals, DeviceLess> memory;
  std::map<Device, std::int64_t, DeviceLess> live;
  std::vector<MemorySample> samples;

  // Built by stop(), read by the owning Profile only:
  std::vector<TraceEvent> events;
};

// Stops `s` (see Profile::stop) and builds s.events.
void stop_session(Session& s);

}  // namespace anvil::profiler::detail

namespace anvil::profiler {
struct Profile::State {
  std::shared_ptr<detail::Session> session;  // see Note [Profile lifetime]
};
}  // namespace anvil::profiler
