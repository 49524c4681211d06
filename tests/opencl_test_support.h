// Shared by the OpenCL test suites: how many OpenCL devices there are, and
// a guard for tests that need some.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "anvil/anvil.h"
#include "core/env_flag.h"

namespace anvil::testing {

inline int opencl_count() { return device_count(DeviceType::OpenCL); }

// Whether this process is a child started by run_child (ANVIL_OPENCL_TEST_CHILD=1).
inline bool in_child() noexcept { return ::anvil::detail::env_flag("ANVIL_OPENCL_TEST_CHILD"); }

// Runs this test binary again with ANVIL_OPENCL_TEST_CHILD=1 and `env`
// prepended, selecting the tests matching `filter`; returns its output (and
// its exit status through `status`). Settings read once at start-up are
// tested this way.
inline std::string run_child(const std::string& env, const std::string& filter, int* status = nullptr) {
  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return "";
  self[n] = '\0';
  const std::string cmd = "env ANVIL_OPENCL_TEST_CHILD=1 " + env + " '" + self + "' --gtest_filter=" + filter + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return "";
  std::string out;
  char buf[4096];
  while (std::fgets(buf, sizeof buf, p) != nullptr) out += buf;
  const int st = pclose(p);
  if (status) *status = st;
  return out;
}

}  // namespace anvil::testing

// Skips (or fails, when ANVIL_REQUIRE_DEVICES names opencl) without n devices.
#define ANVIL_REQUIRE_OPENCL(n)                                                                                \
  do {                                                                                                         \
    if (::anvil::testing::opencl_count() < (n)) {                                                              \
      const char* req = std::getenv("ANVIL_REQUIRE_DEVICES");                                                  \
      const std::string why =                                                                                  \
          "needs " #n " OpenCL device(s); " + ::anvil::device_unavailable_reason(::anvil::DeviceType::OpenCL); \
      if (req != nullptr && std::string(req).find("opencl") != std::string::npos) FAIL() << why;               \
      GTEST_SKIP() << why;                                                                                     \
    }                                                                                                          \
  } while (0)
