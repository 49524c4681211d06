// anvil/device_log.h — a log of scalars that stays on the device.
//
//   anvil::DeviceLog log(1000, anvil::try_gpu());   // 1000 slots, allocated once
//   for (int i = 0; i < 1000; ++i) {
//     auto m = anvil::matmul(a, b);
//     log.append(m.norm());                          // enqueued: no host wait
//   }
//   std::vector<double> norms = log.read();          // one copy, one wait
//
// The chapter's advice: logging a loss to the host every step makes the host
// wait for the device every step; keep the log on the device and move it once.
// append() writes a one-element tensor into the next slot with copy_() into a
// narrow() view of one preallocated tensor, so it queues work and never
// synchronises. A DeviceLog is used from one thread at a time.
#pragma once

#include <cstdint>
#include <vector>

#include "anvil/device.h"
#include "anvil/dtype.h"
#include "anvil/tensor.h"

namespace anvil {

class DeviceLog {
 public:
  // `capacity` slots of dtype `t` on `d`; ValueError when capacity < 1.
  DeviceLog(std::int64_t capacity, Device d, DType t = f32);

  // Writes `value` (one element, on this log's device; converted to the log's
  // dtype) into the next slot. ShapeError for more than one element,
  // DeviceMismatch for another device, IndexError when the log is full.
  void append(const Tensor& value);

  std::int64_t size() const noexcept { return size_; }
  std::int64_t capacity() const noexcept { return capacity_; }
  Device device() const noexcept { return device_; }
  // The first size() entries, as a view on the device (no copy, no wait).
  Tensor values() const;
  // The first size() entries on the host as double: one device→host copy and
  // one wait, whatever size() is.
  std::vector<double> read() const;
  // Forgets the entries (the slots stay allocated).
  void clear() noexcept { size_ = 0; }

 private:
  Tensor slots_;
  std::int64_t capacity_ = 0;
  std::int64_t size_ = 0;
  Device device_;
};

}  // namespace anvil
