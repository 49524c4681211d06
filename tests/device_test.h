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

#define ANVIL_INSTANTIATE_DEVICE_TEST(Suite)                                         \
  INSTANTIATE_TEST_SUITE_P(Devices, Suite, ::testing::ValuesIn(::anvil::testing::test_devices()), \
                           ::anvil::testing::device_param_name)
