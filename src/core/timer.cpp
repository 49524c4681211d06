// anvil::Event, and the defaults of Backend's optional device-clock members.
//
// Note [Device clocks]
// A benchmark that reads the host clock around `op(); synchronize(d)` counts
// the launch, the op and the host's wait for it. A device that keeps its own
// clock can say how long its queue took instead, which is what
// torch.cuda.Event(enable_timing=True) reports: the backend enqueues a
// timestamp marker (OpenCL: clEnqueueMarkerWithWaitList on a queue created
// with CL_QUEUE_PROFILING_ENABLE; CUDA: cudaEventRecord) and, once it has
// completed, reads when it did. On an in-order queue a marker completes when
// everything queued before it has, so the difference of two markers is the
// device time of the work between them, including any time the device sat
// idle waiting for the host to enqueue it (an op launched on an idle queue
// still pays its launch). The host waits only when the elapsed time is asked
// for, a host sync the ledger counts.

// A backend without a clock (the CPU, whose ops run synchronously on the
// calling thread, so the host clock is exact there) gets the fallback: record
// synchronizes the device and reads the host's steady clock. That is correct
// everywhere, only coarser on an asynchronous device, since every record
// waits. Events on two devices are never compared: their clocks need not
// agree, and the host clock would hide which device the time was spent on.
#include "anvil/timer.h"

#include <atomic>
#include <chrono>

#include "anvil/error.h"
#include "core/backend.h"
#include "core/ledger_counters.h"
#include "core/observer.h"

namespace anvil {

namespace detail {

void* Backend::record_timestamp(int index) {
  throw NotSupported(cat("record_timestamp: ", Device(type(), index), " has no device clock; expected a device ",
                         "whose has_device_clock() is true; time it with the host clock around synchronize()"));
}

double Backend::timestamp_elapsed(int index, void*, void*) {
  throw NotSupported(cat("timestamp_elapsed: ", Device(type(), index), " has no device clock; expected a device ",
                         "whose has_device_clock() is true; time it with the host clock around synchronize()"));
}

}  // namespace detail

struct Event::Stamp {
  Device device;
  bool device_clock = false;
  void* handle = nullptr;                           // device clock: the backend's marker
  std::chrono::steady_clock::time_point host_time;  // host clock
  std::atomic<bool> waited{false};                  // the host has waited for the marker

  Stamp(Device d, bool on_device) : device(d), device_clock(on_device) {}
  ~Stamp() {
    if (handle != nullptr) detail::backend_for(device.type())->release_timestamp(device.index(), handle);
  }
  Stamp(const Stamp&) = delete;
  Stamp& operator=(const Stamp&) = delete;
};

Event Event::record(Device d) {
  detail::Backend& b = detail::backend_checked(d, "Event::record");
  auto stamp = std::make_shared<Stamp>(d, b.has_device_clock(d.index()));
  if (stamp->device_clock) {
    stamp->handle = b.record_timestamp(d.index());
  } else {
    synchronize(d);  // counted by the ledger; a no-op on the CPU
    stamp->host_time = std::chrono::steady_clock::now();
  }
  return Event(std::move(stamp));
}

Device Event::device() const noexcept { return stamp_ ? stamp_->device : cpu(); }
bool Event::on_device_clock() const noexcept { return stamp_ && stamp_->device_clock; }

double Event::elapsed_seconds(const Event& end) const {
  ANVIL_CHECK(recorded(), ValueError, "Event::elapsed_seconds: the start event was never recorded; expected an ",
              "event from Event::record(device), got a default-constructed one");
  ANVIL_CHECK(end.recorded(), ValueError, "Event::elapsed_seconds: the end event was never recorded; expected an ",
              "event from Event::record(device), got a default-constructed one");
  const Device d = stamp_->device;
  ANVIL_CHECK(end.stamp_->device == d, DeviceMismatch, "Event::elapsed_seconds: the events are on different ",
              "devices, whose clocks cannot be compared; expected end on ", d, " like start, got ", end.stamp_->device,
              "; time each device with its own pair of events");
  if (!stamp_->device_clock) return std::chrono::duration<double>(end.stamp_->host_time - stamp_->host_time).count();
  double seconds = 0;
  {
    const detail::SiteScope site("Event::elapsed_seconds", SourceLocation::current(), true);
    const detail::SyncSpan wait(d);
    seconds = detail::backend_checked(d, "Event::elapsed_seconds")
                  .timestamp_elapsed(d.index(), stamp_->handle, end.stamp_->handle);
  }
  // One host sync per pair: asking again for markers already waited for
  // does not wait.
  const bool start_waited = stamp_->waited.exchange(true);
  const bool end_waited = end.stamp_->waited.exchange(true);
  if (!start_waited || !end_waited) detail::record_sync(d);
  return seconds;
}

}  // namespace anvil
