// anvil/timer.h — timing work on a device, like torch.cuda.Event(enable_timing=True).
//
//   auto start = anvil::Event::record(d);    // a marker on d's queue
//   auto c = anvil::matmul(a, b);            // queued, returns at once
//   auto end = anvil::Event::record(d);
//   double s = start.elapsed_seconds(end);   // waits for `end`; seconds
//   start.on_device_clock();                 // true on OpenCL: queue profiling
//
// An event is a point in a device's queue. On a device with its own clock
// (OpenCL queue profiling) recording enqueues a marker and does not wait;
// the elapsed time is what the device measured between the two markers:
// from the moment everything queued before `start` had finished to the
// moment everything queued before `end` had. On a device without one (the
// CPU, whose ops run synchronously, so the host clock is exact there) recording
// synchronizes the device and reads the host's steady clock. See Note
// [Device clocks] in src/core/timer.cpp.
//
// Events are cheap to copy (copies share one marker) and safe to use from
// several threads.
#pragma once

#include <memory>

#include "anvil/device.h"

namespace anvil {

class Event {
 public:
  Event() noexcept = default;  // not recorded: elapsed_seconds() on it throws ValueError

  // Records an event on `d`'s queue: after everything queued there so far.
  // Throws DeviceError / NotCompiled when `d` does not exist. On a device
  // without its own clock this is synchronize(d), counted by the ledger.
  static Event record(Device d);

  bool recorded() const noexcept { return stamp_ != nullptr; }
  Device device() const noexcept;         // cpu() when not recorded
  bool on_device_clock() const noexcept;  // false when not recorded

  // Seconds from this event to `end` (negative when `end` was recorded
  // first), waiting for both to complete. Waiting on the device's clock
  // counts as one host sync on the device in the ledger (once per pair).
  // Throws DeviceMismatch when the events are on different devices (their
  // clocks cannot be compared) and ValueError when either was not recorded.
  double elapsed_seconds(const Event& end) const;

 private:
  struct Stamp;
  explicit Event(std::shared_ptr<Stamp> stamp) noexcept : stamp_(std::move(stamp)) {}
  std::shared_ptr<Stamp> stamp_;
};

}  // namespace anvil
