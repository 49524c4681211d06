// anvil/device.h — where a tensor lives.
//
//   anvil::Device d("cuda:1");          // or anvil::gpu(1)
//   auto x = anvil::ones({2, 3}, anvil::try_gpu());
//   std::cout << x.device();            // cuda:0, opencl:0 or cpu
//
// A Device is a small value {type, index}: hashable, comparable, printable.
// Strings are parsed and printed in exactly one place (device.cpp): `cpu`,
// `cuda`, `cuda:N`, `opencl`, `opencl:N`. There is one CPU device; it means
// all cores. Enumeration never throws: a missing driver means zero devices and
// a reason (`device_unavailable_reason`).
#pragma once

#include <anvil/source_location.h>

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <string>
#include <string_view>
#include <vector>

namespace anvil {

enum class DeviceType : std::uint8_t { CPU = 0, CUDA = 1, OpenCL = 2 };
inline constexpr int kNumDeviceTypes = 3;

std::string_view to_string(DeviceType type) noexcept;  // "cpu", "cuda", "opencl"

class Device {
 public:
  constexpr Device() noexcept = default;  // the CPU
  constexpr Device(DeviceType type, int index = 0) noexcept : type_(type), index_(index) {}
  // Parses `cpu`, `cuda`, `cuda:N`, `opencl`, `opencl:N`; throws DeviceError
  // listing the valid forms otherwise. Does not check that the device exists.
  explicit Device(std::string_view spec);
  explicit Device(const char* spec) : Device(std::string_view(spec)) {}
  explicit Device(const std::string& spec) : Device(std::string_view(spec)) {}

  constexpr DeviceType type() const noexcept { return type_; }
  constexpr int index() const noexcept { return index_; }
  constexpr bool is_cpu() const noexcept { return type_ == DeviceType::CPU; }
  std::string str() const;  // "cpu", "cuda:0", "opencl:1"

  friend constexpr bool operator==(Device a, Device b) noexcept { return a.type_ == b.type_ && a.index_ == b.index_; }

 private:
  DeviceType type_ = DeviceType::CPU;
  int index_ = 0;
};

std::ostream& operator<<(std::ostream& os, Device d);
std::ostream& operator<<(std::ostream& os, const std::vector<Device>& ds);  // [cpu, opencl:0]

constexpr Device cpu() noexcept { return Device(); }

// Accelerators in order: CUDA devices, then OpenCL GPUs/accelerators (and
// OpenCL CPU devices too when ANVIL_OPENCL_CPU=1). gpu(i) throws DeviceError
// when there is no i-th accelerator; try_gpu(i) falls back to the CPU.
int gpu_count() noexcept;
Device gpu(int i = 0);
Device try_gpu(int i = 0) noexcept;
std::vector<Device> try_all_gpus() noexcept;  // every accelerator, or {cpu()}
// Why try_gpu(i) fell back to the CPU ("" when it did not): not compiled in,
// no driver, hidden by CUDA_VISIBLE_DEVICES, index out of range.
std::string try_gpu_reason(int i = 0);

// Devices of one type; never throws (a missing driver gives 0).
int device_count(DeviceType type) noexcept;
// Why a backend has no devices ("" when it has some).
std::string device_unavailable_reason(DeviceType type);
std::vector<Device> all_devices() noexcept;  // cpu first, then every CUDA and OpenCL device

struct DeviceProperties {
  std::string name;
  std::string vendor;
  std::string kind;                // "cpu", "gpu" or "accelerator"
  std::uint64_t memory_total = 0;  // bytes
  std::uint64_t memory_free = 0;   // bytes, 0 when unknown
  int compute_units = 0;
  int clock_mhz = 0;
  std::string driver_version;
  std::string runtime_version;
  bool fp64 = true;
  bool fp16 = false;
  std::string compute_capability;    // "8.0" on CUDA, "" elsewhere
  std::uint64_t l2_cache_bytes = 0;  // 0 when unknown
  std::string pci_bus_id;            // "0000:3b:00.0" (domain:bus:device.function) on CUDA, "" when unknown
};
// Throws DeviceError when the device does not exist.
DeviceProperties properties(Device d);

// Waits until every op queued on `d` has finished; reports a device error
// raised by any of them. Counted by the ledger as a host sync; `loc` is the
// caller's line for the profiler's sync report (anvil/profiler.h).
void synchronize(Device d, SourceLocation loc = SourceLocation::current());

// The device factories use when none is given: the CPU, or what the innermost
// live DeviceScope on this thread set.
Device default_device() noexcept;

// RAII: sets the default device for this thread for its lifetime, like
// `with torch.device(d):`. Scopes nest.
class DeviceScope {
 public:
  explicit DeviceScope(Device d) noexcept;
  ~DeviceScope();
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  Device previous_;
};

}  // namespace anvil

template <>
struct std::hash<anvil::Device> {
  std::size_t operator()(anvil::Device d) const noexcept {
    return (static_cast<std::size_t>(d.type()) << 16) ^ static_cast<std::size_t>(d.index());
  }
};
