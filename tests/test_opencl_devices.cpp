// OpenCL discovery (issue 4): every device the ICD loader reports is
// opencl:N with filled-in properties; CPU-type devices count as accelerators
// only with ANVIL_OPENCL_CPU=1; ANVIL_OPENCL_SUBDEVICES=1 splits CPU devices
// into one-core sub-devices; no OpenCL platform means 0 devices and a reason.
// Environment read at start-up is tested in a child process (this binary
// re-run with a filter and the variable set).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>

#include "anvil/anvil.h"
#include "env_guard.h"
#include "opencl_test_support.h"

namespace {

using namespace anvil;
using anvil::testing::opencl_count;
using anvil::testing::run_child;

bool is_child() { return anvil::testing::in_child(); }

// The value printed by a child as "RESULT key=value".
std::optional<std::string> result(const std::string& out, const std::string& key) {
  const std::string tag = "RESULT " + key + "=";
  const std::size_t at = out.find(tag);
  if (at == std::string::npos) return std::nullopt;
  const std::size_t end = out.find('\n', at);
  return out.substr(at + tag.size(), end - at - tag.size());
}

using anvil::testing::EnvGuard;

TEST(OpenCLDevices, PropertiesAreFilledIn) {
  ANVIL_REQUIRE_OPENCL(1);
  for (int i = 0; i < opencl_count(); ++i) {
    const Device d(DeviceType::OpenCL, i);
    SCOPED_TRACE(d.str());
    const DeviceProperties p = properties(d);
    EXPECT_FALSE(p.name.empty());
    EXPECT_FALSE(p.vendor.empty());
    EXPECT_TRUE(p.kind == "cpu" || p.kind == "gpu" || p.kind == "accelerator") << p.kind;
    EXPECT_GT(p.memory_total, 0u);
    EXPECT_GE(p.compute_units, 1);
    EXPECT_EQ(p.runtime_version.rfind("OpenCL ", 0), 0u) << p.runtime_version;
    EXPECT_FALSE(p.driver_version.empty());
  }
}

TEST(OpenCLDevices, EveryDeviceIsListedAndUsable) {
  ANVIL_REQUIRE_OPENCL(1);
  const auto all = all_devices();
  for (int i = 0; i < opencl_count(); ++i) {
    const Device d(DeviceType::OpenCL, i);
    EXPECT_NE(std::find(all.begin(), all.end(), d), all.end()) << d;
    EXPECT_EQ(Device(d.str()), d);
    EXPECT_FLOAT_EQ((ones({3}, d) * 2).sum().item<float>(), 6.0f);
  }
}

TEST(OpenCLDevices, MissingDeviceIsAnErrorNamingIt) {
  ANVIL_REQUIRE_OPENCL(1);
  const Device bad(DeviceType::OpenCL, opencl_count());
  try {
    (void)properties(bad);
    ADD_FAILURE() << "no error";
  } catch (const DeviceError& e) {
    EXPECT_NE(std::string(e.what()).find(bad.str()), std::string::npos) << e.what();
  }
  EXPECT_THROW((void)ones({2}, bad), DeviceError);
}

TEST(OpenCLDevices, CpuDevicesCountAsAcceleratorsOnlyWhenAsked) {
  ANVIL_REQUIRE_OPENCL(1);
  int cpu_type = 0, other = 0;
  for (int i = 0; i < opencl_count(); ++i)
    (properties(Device(DeviceType::OpenCL, i)).kind == "cpu" ? cpu_type : other) += 1;
  const int cuda = device_count(DeviceType::CUDA);
  {
    EnvGuard env("ANVIL_OPENCL_CPU", "1");
    EXPECT_EQ(gpu_count(), cuda + cpu_type + other);
    if (cuda == 0 && other == 0) {
      EXPECT_EQ(try_gpu(0), Device(DeviceType::OpenCL, 0));
    }
  }
  {
    EnvGuard env("ANVIL_OPENCL_CPU", nullptr);
    EXPECT_EQ(gpu_count(), cuda + other);
    if (cuda == 0 && other == 0) {
      EXPECT_EQ(try_gpu(0), cpu());
      const std::string why = try_gpu_reason(0);
      EXPECT_NE(why.find("ANVIL_OPENCL_CPU=1"), std::string::npos) << why;
    }
  }
}

TEST(OpenCLDevices, FP64SupportMatchesTheProperties) {
  ANVIL_REQUIRE_OPENCL(1);
  for (int i = 0; i < opencl_count(); ++i) {
    const Device d(DeviceType::OpenCL, i);
    if (properties(d).fp64) {
      EXPECT_DOUBLE_EQ(ones({4}, d, f64).sum().item<double>(), 4.0);
    } else {
      EXPECT_THROW((void)ones({4}, d, f64), NotSupported);
    }
  }
}

// ---- start-up environment, in child processes ------------------------------------

TEST(OpenCLChild, Report) {
  if (!is_child()) GTEST_SKIP() << "runs as a child of the tests below";
  const int n = opencl_count();
  std::printf("RESULT count=%d\n", n);
  std::printf("RESULT reason=%s\n", device_unavailable_reason(DeviceType::OpenCL).c_str());
  for (int i = 0; i < n; ++i) {
    const Device d(DeviceType::OpenCL, i);
    const DeviceProperties p = properties(d);
    std::printf("RESULT name%d=%s\n", i, p.name.c_str());
    std::printf("RESULT cus%d=%d\n", i, p.compute_units);
    std::printf("RESULT sum%d=%g\n", i, static_cast<double>((arange(10, d, f32) * 2).sum().item<float>()));
  }
}

TEST(OpenCLDevices, SubDevicesSplitCpuDevicesIntoCores) {
  ANVIL_REQUIRE_OPENCL(1);
  int expected = 0;
  for (int i = 0; i < opencl_count(); ++i) {
    const DeviceProperties p = properties(Device(DeviceType::OpenCL, i));
    expected += (p.kind == "cpu" && p.compute_units > 1) ? p.compute_units : 1;
  }
  const std::string out = run_child("ANVIL_OPENCL_SUBDEVICES=1", "OpenCLChild.Report");
  ASSERT_TRUE(result(out, "count")) << out;
  EXPECT_EQ(std::stoi(*result(out, "count")), expected) << out;
  for (int i = 0; i < expected; ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(result(out, "sum" + std::to_string(i)).value_or("?"), "90") << out;
    if (expected > opencl_count()) {
      EXPECT_NE(result(out, "name" + std::to_string(i)).value_or("").find("sub-device"), std::string::npos) << out;
      EXPECT_EQ(result(out, "cus" + std::to_string(i)).value_or("?"), "1") << out;
    }
  }
}

TEST(OpenCLDevices, NoPlatformMeansZeroDevicesAndAReason) {
  // ocl-icd reads the vendor list from OCL_ICD_VENDORS: an empty directory
  // is a machine with the loader but no driver.
  char dir[] = "/tmp/anvil-no-icd-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  int status = 0;
  const std::string out = run_child(std::string("OCL_ICD_VENDORS=") + dir, "OpenCLChild.Report", &status);
  rmdir(dir);
  EXPECT_EQ(status, 0) << out;
  ASSERT_TRUE(result(out, "count")) << out;
  EXPECT_EQ(*result(out, "count"), "0") << out;
  EXPECT_NE(result(out, "reason")->find("no OpenCL platform"), std::string::npos) << out;
}

}  // namespace
