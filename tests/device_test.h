// Device-generic tests: write a suite once, run it on every available device.
//
//   class Elementwise : public anvil::testing::DeviceTest {};
//   TEST_P(Elementwise, AddBroadcasts) { auto d = device(); ... }
//   ANVIL_INSTANTIATE_DEVICE_TEST(Elementwise);
//
// Devices: every device anvil sees (cpu, opencl:N, cuda:N), narrowed by
// ANVIL_TEST_DEVICES="cpu,opencl:1" when set. ANVIL_REQUIRE_DEVICES="cuda"
// makes a run fail when no device of that type is present.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "anvil/anvil.h"

namespace anvil::testing {

inline std::vector<Device> test_devices() {
  std::vector<Device> devices;
  const char* only = std::getenv("ANVIL_TEST_DEVICES");
  if (only != nullptr && *only != '\0') {
    std::stringstream ss(only);
    std::string item;
    while (std::getline(ss, item, ',')) devices.emplace_back(item);
    return devices;
  }
  return all_devices();
}

// The device types named by ANVIL_REQUIRE_DEVICES ("cuda,opencl"): a test
// that needs one of them fails instead of skipping when it is missing.
inline std::set<DeviceType> required_device_types() {
  std::set<DeviceType> types;
  const char* req = std::getenv("ANVIL_REQUIRE_DEVICES");
  if (req == nullptr) return types;
  std::stringstream ss(req);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item == "cpu")
      types.insert(DeviceType::CPU);
    else if (item == "cuda")
      types.insert(DeviceType::CUDA);
    else if (item == "opencl")
      types.insert(DeviceType::OpenCL);
  }
  return types;
}

// "" when every required type has a device; otherwise what is missing and why.
inline std::string missing_required_devices() {
  std::string missing;
  for (DeviceType t : required_device_types())
    if (device_count(t) == 0)
      missing += "ANVIL_REQUIRE_DEVICES names " + std::string(to_string(t)) +
                 " but there is no such device: " + device_unavailable_reason(t) + "; ";
  return missing;
}

inline std::string device_param_name(const ::testing::TestParamInfo<Device>& info) {
  std::string s = info.param.str();
  for (char& c : s)
    if (c == ':') c = '_';
  return s;
}

class DeviceTest : public ::testing::TestWithParam<Device> {
 protected:
  Device device() const { return GetParam(); }
};

}  // namespace anvil::testing

// Also adds Suite_Required.DevicesPresent, which fails when a device type
// named by ANVIL_REQUIRE_DEVICES is missing (so the suite cannot silently
// run on fewer devices than asked for).
#define ANVIL_INSTANTIATE_DEVICE_TEST(Suite)                                                      \
  INSTANTIATE_TEST_SUITE_P(Devices, Suite, ::testing::ValuesIn(::anvil::testing::test_devices()), \
                           ::anvil::testing::device_param_name);                                  \
  TEST(Suite##_Required, DevicesPresent) {                                                        \
    const std::string missing = ::anvil::testing::missing_required_devices();                     \
    if (!missing.empty()) FAIL() << missing;                                                      \
  }
