// Device strings are parsed and printed here and nowhere else.
#include "anvil/device.h"

#include <ostream>

#include "anvil/error.h"
#include "anvil/ledger.h"
#include "core/backend.h"
#include "core/backend_module.h"
#include "core/ledger_counters.h"
#include "core/observer.h"

namespace anvil {

namespace {
constexpr const char* kValidForms = "cpu, cuda, cuda:N, opencl, opencl:N (N a device index like 0 or 1)";
constexpr int kMaxIndex = 1 << 16;

thread_local Device t_default_device{};
}  // namespace

std::string_view to_string(DeviceType type) noexcept {
  switch (type) {
    case DeviceType::CPU:
      return "cpu";
    case DeviceType::CUDA:
      return "cuda";
    case DeviceType::OpenCL:
      return "opencl";
  }
  return "?";
}

Device::Device(std::string_view spec) {
  auto fail = [&](const char* what) {
    throw DeviceError(detail::cat("device: ", what, "; expected one of ", kValidForms, ", got '", spec, "'"));
  };
  const std::size_t colon = spec.find(':');
  const std::string_view type_name = spec.substr(0, colon);
  if (type_name == "cpu")
    type_ = DeviceType::CPU;
  else if (type_name == "cuda")
    type_ = DeviceType::CUDA;
  else if (type_name == "opencl")
    type_ = DeviceType::OpenCL;
  else
    fail("unknown device type");
  index_ = 0;
  if (colon == std::string_view::npos) return;
  const std::string_view digits = spec.substr(colon + 1);
  if (digits.empty()) fail("missing device index after ':'");
  if (digits.size() > 1 && digits[0] == '0') fail("device index has a leading zero");
  long value = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') fail("device index is not a non-negative integer");
    value = value * 10 + (c - '0');
    if (value > kMaxIndex) fail("device index too large");
  }
  if (type_ == DeviceType::CPU && value != 0) fail("there is one CPU device, cpu (cpu:0)");
  index_ = static_cast<int>(value);
}

std::string Device::str() const {
  if (type_ == DeviceType::CPU) return "cpu";
  return std::string(to_string(type_)) + ":" + std::to_string(index_);
}

std::ostream& operator<<(std::ostream& os, Device d) { return os << d.str(); }

std::ostream& operator<<(std::ostream& os, const std::vector<Device>& ds) {
  os << '[';
  for (std::size_t i = 0; i < ds.size(); ++i) os << (i ? ", " : "") << ds[i];
  return os << ']';
}

int device_count(DeviceType type) noexcept {
  detail::Backend* b = detail::backend_for(type);
  return b ? b->device_count() : 0;
}

std::string device_unavailable_reason(DeviceType type) {
  detail::Backend* b = detail::backend_for(type);
  if (b == nullptr) return detail::backend_missing_reason(type);
  return b->unavailable_reason();
}

namespace {
// Accelerators in gpu(i) order: CUDA devices, then OpenCL accelerators.
std::vector<Device> accelerators() noexcept {
  std::vector<Device> out;
  for (DeviceType type : {DeviceType::CUDA, DeviceType::OpenCL}) {
    detail::Backend* b = detail::backend_for(type);
    if (b == nullptr) continue;
    const int n = b->device_count();
    for (int i = 0; i < n; ++i)
      if (b->is_accelerator(i)) out.emplace_back(type, i);
  }
  return out;
}
}  // namespace

int gpu_count() noexcept { return static_cast<int>(accelerators().size()); }

Device gpu(int i) {
  auto acc = accelerators();
  ANVIL_CHECK(i >= 0 && i < static_cast<int>(acc.size()), DeviceError, "gpu: no accelerator ", i,
              "; expected an index below ", acc.size(), ", got ", i, "; ", try_gpu_reason(i), "; use try_gpu(", i,
              ") to fall back to the CPU");
  return acc[i];
}

Device try_gpu(int i) noexcept {
  auto acc = accelerators();
  if (i >= 0 && i < static_cast<int>(acc.size())) return acc[i];
  return cpu();
}

std::vector<Device> try_all_gpus() noexcept {
  auto acc = accelerators();
  if (acc.empty()) acc.push_back(cpu());
  return acc;
}

std::string try_gpu_reason(int i) {
  const auto acc = accelerators();
  if (i >= 0 && i < static_cast<int>(acc.size())) return "";
  std::string why;
  auto add = [&](const std::string& s) { why += (why.empty() ? "" : "; ") + s; };
  if (!acc.empty())
    add(detail::cat("index ", i, " out of range: there ", acc.size() == 1 ? "is " : "are ", acc.size(), " accelerator",
                    acc.size() == 1 ? "" : "s"));
  for (DeviceType type : {DeviceType::CUDA, DeviceType::OpenCL}) {
    detail::Backend* b = detail::backend_for(type);
    const std::string name(to_string(type));
    if (b == nullptr) {
      add(name + ": " + (detail::backend_built(type) ? detail::backend_missing_reason(type) : "not compiled in"));
      continue;
    }
    const int n = b->device_count();
    if (n == 0) {
      add(name + ": " + b->unavailable_reason());
      continue;
    }
    int hidden = 0;
    for (int d = 0; d < n; ++d) hidden += b->is_accelerator(d) ? 0 : 1;
    if (hidden > 0)
      add(detail::cat(name, ": ", hidden, " cpu-type device", hidden == 1 ? "" : "s", " not counted as accelerator",
                      hidden == 1 ? "" : "s", " (set ANVIL_OPENCL_CPU=1 to use ", hidden == 1 ? "it" : "them", ")"));
  }
  return why;
}

std::vector<Device> all_devices() noexcept {
  std::vector<Device> out{cpu()};
  for (DeviceType type : {DeviceType::CUDA, DeviceType::OpenCL}) {
    const int n = device_count(type);
    for (int i = 0; i < n; ++i) out.emplace_back(type, i);
  }
  return out;
}

DeviceProperties properties(Device d) { return detail::backend_checked(d, "properties").properties(d.index()); }

void synchronize(Device d, SourceLocation loc) {
  const detail::SiteScope site("synchronize", loc, true);
  detail::Backend& b = detail::backend_checked(d, "synchronize");
  {
    const detail::SyncSpan wait(d);
    b.synchronize(d.index());
  }
  detail::record_sync(d);
}

Device default_device() noexcept { return t_default_device; }

DeviceScope::DeviceScope(Device d) noexcept : previous_(t_default_device) { t_default_device = d; }
DeviceScope::~DeviceScope() { t_default_device = previous_; }

}  // namespace anvil
