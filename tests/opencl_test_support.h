// Shared by the OpenCL test suites: how many OpenCL devices there are, and
// a guard for tests that need some.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "anvil/anvil.h"

namespace anvil::testing {

inline int opencl_count() { return device_count(DeviceType::OpenCL); }

}  // namespace anvil::testing

// Skips (or fails, when ANVIL_REQUIRE_DEVICES names opencl) without n devices.
#define ANVIL_REQUIRE_OPENCL(n)                                                                               \
  do {                                                                                                        \
    if (::anvil::testing::opencl_count() < (n)) {                                                             \
      const char* req = std::getenv("ANVIL_REQUIRE_DEVICES");                                                 \
      const std::string why =                                                                                 \
          "needs " #n " OpenCL device(s); " + ::anvil::device_unavailable_reason(::anvil::DeviceType::OpenCL); \
      if (req != nullptr && std::string(req).find("opencl") != std::string::npos) FAIL() << why;              \
      GTEST_SKIP() << why;                                                                                    \
    }                                                                                                         \
  } while (0)
