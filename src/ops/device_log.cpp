// DeviceLog is built on public ops only (narrow + copy_), so it runs on every
// backend and never needs a backend hook.
#include "anvil/device_log.h"

#include "anvil/error.h"
#include "anvil/ops.h"

namespace anvil {

DeviceLog::DeviceLog(std::int64_t capacity, Device d, DType t) : capacity_(capacity), device_(d) {
  ANVIL_CHECK(capacity >= 1, ValueError, "DeviceLog: capacity must be positive; expected at least 1, got ", capacity);
  slots_ = zeros({capacity}, d, t);
}

void DeviceLog::append(const Tensor& value) {
  ANVIL_CHECK(value.defined(), ValueError, "DeviceLog::append: value is undefined; expected a one-element tensor");
  ANVIL_CHECK(value.numel() == 1, ShapeError,
              "DeviceLog::append: value must hold one element; expected 1 element, got shape ", value.shape(),
              "; reduce it first (e.g. .sum() or .norm())");
  ANVIL_CHECK(value.device() == device_, DeviceMismatch, "DeviceLog::append: value is on another device; expected ",
              device_, ", got ", value.device(), "; move it with .to(", device_, ")");
  ANVIL_CHECK(size_ < capacity_, IndexError, "DeviceLog::append: the log is full; expected at most ", capacity_,
              " entries, got entry ", size_ + 1, "; read() and clear() it, or make it larger");
  // Note: copy_ into a view enqueues a device copy; nothing waits here.
  Tensor slot = slots_.narrow(0, size_, 1);
  slot.copy_(value.reshape({1}));
  ++size_;
}

Tensor DeviceLog::values() const { return slots_.narrow(0, 0, size_); }

std::vector<double> DeviceLog::read() const {
  if (size_ == 0) return {};
  // Convert on the host so that the device does no extra work: one copy, one wait.
  return values().cpu().to(f64).to_vector<double>();
}

}  // namespace anvil
