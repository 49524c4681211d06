// Devices as values (DESIGN §3): parsing and printing, hashing, enumeration
// and its fallbacks, DeviceScope.
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <thread>
#include <unordered_set>
#include <vector>

#include "device_test.h"

namespace {

using namespace anvil;

// ---- parsing and printing ------------------------------------------------------------

struct ParseCase {
  const char* spec;
  DeviceType type;
  int index;
  const char* printed;
};

TEST(DeviceParse, ValidForms) {
  const ParseCase cases[] = {
      {"cpu", DeviceType::CPU, 0, "cpu"},
      {"cuda", DeviceType::CUDA, 0, "cuda:0"},
      {"cuda:0", DeviceType::CUDA, 0, "cuda:0"},
      {"cuda:1", DeviceType::CUDA, 1, "cuda:1"},
      {"cuda:12", DeviceType::CUDA, 12, "cuda:12"},
      {"opencl", DeviceType::OpenCL, 0, "opencl:0"},
      {"opencl:0", DeviceType::OpenCL, 0, "opencl:0"},
      {"opencl:1", DeviceType::OpenCL, 1, "opencl:1"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.spec);
    const Device d(c.spec);
    EXPECT_EQ(d.type(), c.type);
    EXPECT_EQ(d.index(), c.index);
    EXPECT_EQ(d.str(), c.printed);
    std::ostringstream os;
    os << d;
    EXPECT_EQ(os.str(), c.printed);
    // What is printed parses back to the same device.
    EXPECT_EQ(Device(d.str()), d);
    EXPECT_EQ(Device(std::string(c.spec)), d);
    EXPECT_EQ(Device(std::string_view(c.spec)), d);
  }
}

TEST(DeviceParse, BadStringsListTheValidForms) {
  const char* bad[] = {"gpu",
                       "cuda:",
                       "cuda:-1",
                       "cuda:1x",
                       "CPU",
                       "Cuda",
                       "cpu:1",
                       "",
                       ":0",
                       "cuda:+1",
                       "cuda :1",
                       " cpu",
                       "cpu ",
                       "opencl:0:1",
                       "cuda:0.5",
                       "cuda:a",
                       "cuda:99999999999999999999",
                       "opencl:4294967296",
                       "metal",
                       "cuda1"};
  for (const char* spec : bad) {
    SCOPED_TRACE(std::string("'") + spec + "'");
    try {
      Device d(spec);
      ADD_FAILURE() << "parsed as " << d;
    } catch (const DeviceError& e) {
      const std::string msg = e.what();
      // The message lists every valid form.
      EXPECT_NE(msg.find("cpu"), std::string::npos) << msg;
      EXPECT_NE(msg.find("cuda:N"), std::string::npos) << msg;
      EXPECT_NE(msg.find("opencl:N"), std::string::npos) << msg;
      if (*spec != '\0') {
        EXPECT_NE(msg.find(spec), std::string::npos) << "message should quote the input: " << msg;
      }
    } catch (const std::exception& e) {
      ADD_FAILURE() << "wrong exception type: " << e.what();
    }
  }
}

TEST(DeviceParse, CpuHasOneDevice) {
  // There is one CPU device: `cpu` (and `cpu:0`, PyTorch's spelling of it).
  EXPECT_EQ(Device("cpu:0"), cpu());
  EXPECT_THROW(Device("cpu:1"), DeviceError);
}

TEST(DeviceValue, EqualityAndHash) {
  EXPECT_EQ(Device(), cpu());
  EXPECT_TRUE(cpu().is_cpu());
  EXPECT_FALSE(Device(DeviceType::CUDA, 0).is_cpu());
  EXPECT_EQ(Device(DeviceType::CUDA, 1), Device("cuda:1"));
  EXPECT_FALSE(Device(DeviceType::CUDA, 0) == Device(DeviceType::CUDA, 1));
  EXPECT_FALSE(Device(DeviceType::CUDA, 0) == Device(DeviceType::OpenCL, 0));
  EXPECT_FALSE(cpu() == Device(DeviceType::OpenCL, 0));

  std::unordered_set<Device> set;
  for (const char* s : {"cpu", "cuda:0", "cuda:1", "opencl:0", "opencl:1", "cuda", "opencl", "cpu"})
    set.insert(Device(s));
  EXPECT_EQ(set.size(), 5u);
  EXPECT_EQ(std::hash<Device>{}(Device("cuda")), std::hash<Device>{}(Device(DeviceType::CUDA, 0)));
  EXPECT_NE(std::hash<Device>{}(Device("cuda:0")), std::hash<Device>{}(Device("opencl:0")));

  static_assert(Device(DeviceType::OpenCL, 2).index() == 2, "Device is a constexpr value");
  static_assert(cpu().is_cpu());
}

TEST(DeviceValue, PrintsTypesAndLists) {
  EXPECT_EQ(to_string(DeviceType::CPU), "cpu");
  EXPECT_EQ(to_string(DeviceType::CUDA), "cuda");
  EXPECT_EQ(to_string(DeviceType::OpenCL), "opencl");
  std::ostringstream os;
  os << std::vector<Device>{cpu(), Device("opencl:0"), Device("cuda:1")};
  EXPECT_EQ(os.str(), "[cpu, opencl:0, cuda:1]");
  std::ostringstream empty;
  empty << std::vector<Device>{};
  EXPECT_EQ(empty.str(), "[]");
}

// ---- enumeration ------------------------------------------------------------------------

TEST(DeviceEnumeration, CountsNeverThrow) {
  int cuda = -1, opencl = -1, cpus = -1;
  EXPECT_NO_THROW(cuda = device_count(DeviceType::CUDA));
  EXPECT_NO_THROW(opencl = device_count(DeviceType::OpenCL));
  EXPECT_NO_THROW(cpus = device_count(DeviceType::CPU));
  EXPECT_EQ(cpus, 1);
  EXPECT_GE(cuda, 0);
  EXPECT_GE(opencl, 0);
  // The reason is empty exactly when there are devices.
  EXPECT_EQ(device_unavailable_reason(DeviceType::CUDA).empty(), cuda > 0)
      << device_unavailable_reason(DeviceType::CUDA);
  EXPECT_EQ(device_unavailable_reason(DeviceType::OpenCL).empty(), opencl > 0)
      << device_unavailable_reason(DeviceType::OpenCL);
  EXPECT_EQ(device_unavailable_reason(DeviceType::CPU), "");
  // Asking twice gives the same answer (enumeration is cached or stable).
  EXPECT_EQ(device_count(DeviceType::CUDA), cuda);
  EXPECT_EQ(device_count(DeviceType::OpenCL), opencl);
}

TEST(DeviceEnumeration, AllDevicesCpuFirstThenEveryDevice) {
  const auto all = all_devices();
  ASSERT_FALSE(all.empty());
  EXPECT_EQ(all[0], cpu());
  EXPECT_EQ(all.size(),
            static_cast<std::size_t>(1 + device_count(DeviceType::CUDA) + device_count(DeviceType::OpenCL)));
  std::unordered_set<Device> unique(all.begin(), all.end());
  EXPECT_EQ(unique.size(), all.size());
  for (std::size_t i = 1; i < all.size(); ++i) {
    EXPECT_FALSE(all[i].is_cpu());
    EXPECT_LT(all[i].index(), device_count(all[i].type()));
  }
}

TEST(DeviceEnumeration, TryGpuFallsBackToCpuWithAReason) {
  const int n = gpu_count();
  ASSERT_GE(n, 0);
  const auto all = try_all_gpus();
  if (n == 0) {
    EXPECT_EQ(try_gpu(), cpu());
    EXPECT_EQ(try_gpu(0), cpu());
    ASSERT_EQ(all.size(), 1u);
    EXPECT_EQ(all[0], cpu());
    EXPECT_FALSE(try_gpu_reason(0).empty());
    EXPECT_THROW(gpu(0), DeviceError);
  } else {
    EXPECT_EQ(all.size(), static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i) {
      EXPECT_EQ(gpu(i), all[static_cast<std::size_t>(i)]);
      EXPECT_EQ(try_gpu(i), gpu(i));
      EXPECT_EQ(try_gpu_reason(i), "");
      EXPECT_FALSE(gpu(i).is_cpu());
    }
    EXPECT_EQ(try_gpu(), gpu(0));
  }
  // Past the last accelerator: the CPU, and a reason.
  EXPECT_EQ(try_gpu(n), cpu());
  EXPECT_EQ(try_gpu(n + 100), cpu());
  EXPECT_EQ(try_gpu(-1), cpu());
  EXPECT_FALSE(try_gpu_reason(n).empty());
  EXPECT_FALSE(try_gpu_reason(n + 100).empty());
  try {
    (void)gpu(n + 3);
    ADD_FAILURE() << "gpu(" << n + 3 << ") did not throw";
  } catch (const DeviceError& e) {
    EXPECT_NE(std::string(e.what()).find("gpu"), std::string::npos) << e.what();
  }
}

TEST(DeviceEnumeration, CpuProperties) {
  const DeviceProperties p = properties(cpu());
  EXPECT_EQ(p.kind, "cpu");
  EXPECT_FALSE(p.name.empty());
  EXPECT_GE(p.compute_units, 1);
  EXPECT_GT(p.memory_total, 0u);
  EXPECT_TRUE(p.fp64);
}

TEST(DeviceEnumeration, PropertiesOfAMissingDeviceThrow) {
  for (const char* spec : {"cuda:97", "opencl:97"}) {
    SCOPED_TRACE(spec);
    try {
      (void)properties(Device(spec));
      ADD_FAILURE() << "no error for a device that does not exist";
    } catch (const Error& e) {
      // DeviceError when the backend is built but has no such device;
      // NotCompiled when it is not built in. Both name the device.
      EXPECT_TRUE(dynamic_cast<const DeviceError*>(&e) != nullptr || dynamic_cast<const NotCompiled*>(&e) != nullptr)
          << e.what();
      EXPECT_NE(std::string(e.what()).find(to_string(Device(spec).type())), std::string::npos) << e.what();
    }
  }
}

TEST(DeviceEnumeration, FactoryOnAMissingDeviceThrowsAndNamesIt) {
  for (const char* spec : {"cuda:97", "opencl:97"}) {
    SCOPED_TRACE(spec);
    try {
      auto x = zeros({2}, Device(spec));
      ADD_FAILURE() << "created a tensor on " << x.device();
    } catch (const Error& e) {
      EXPECT_TRUE(dynamic_cast<const DeviceError*>(&e) != nullptr || dynamic_cast<const NotCompiled*>(&e) != nullptr)
          << e.what();
      EXPECT_NE(std::string(e.what()).find(to_string(Device(spec).type())), std::string::npos) << e.what();
    }
  }
  // Still usable.
  EXPECT_EQ(zeros({2}).numel(), 2);
}

// ---- DeviceScope --------------------------------------------------------------------------

TEST(DeviceScopeTest, NestsAndRestores) {
  EXPECT_EQ(default_device(), cpu());
  {
    DeviceScope outer(Device("opencl:5"));  // need not exist: the scope only records it
    EXPECT_EQ(default_device(), Device("opencl:5"));
    {
      DeviceScope inner(Device("cuda:2"));
      EXPECT_EQ(default_device(), Device("cuda:2"));
      {
        DeviceScope innermost(cpu());
        EXPECT_EQ(default_device(), cpu());
      }
      EXPECT_EQ(default_device(), Device("cuda:2"));
    }
    EXPECT_EQ(default_device(), Device("opencl:5"));
  }
  EXPECT_EQ(default_device(), cpu());
}

TEST(DeviceScopeTest, IsPerThread) {
  DeviceScope scope(Device("opencl:3"));
  Device seen_in_thread = Device("cuda:9");
  std::thread th([&] { seen_in_thread = default_device(); });
  th.join();
  EXPECT_EQ(seen_in_thread, cpu());
  EXPECT_EQ(default_device(), Device("opencl:3"));
}

class DeviceScopeOnDevice : public anvil::testing::DeviceTest {};

TEST_P(DeviceScopeOnDevice, FactoriesUseTheScopedDevice) {
  const Device d = device();
  {
    DeviceScope scope(d);
    EXPECT_EQ(zeros({2, 3}).device(), d);
    EXPECT_EQ(ones({2}).device(), d);
    EXPECT_EQ(empty({4}).device(), d);
    EXPECT_EQ(full({2}, 1.5).device(), d);
    EXPECT_EQ(arange(5).device(), d);
    EXPECT_EQ(linspace(0, 1, 3).device(), d);
    EXPECT_EQ(eye(2).device(), d);
    EXPECT_EQ(rand({3}).device(), d);
    EXPECT_EQ(randn({3}).device(), d);
    EXPECT_EQ(randint(0, 3, {3}).device(), d);
    EXPECT_EQ(tensor(std::vector<float>{1, 2}).device(), d);
    EXPECT_EQ(scalar_tensor(2.0).device(), d);
    // An explicit device wins over the scope.
    EXPECT_EQ(zeros({2}, cpu()).device(), cpu());
    {
      DeviceScope inner(cpu());
      EXPECT_EQ(zeros({2}).device(), cpu());
    }
    EXPECT_EQ(zeros({2}).device(), d);
  }
  EXPECT_EQ(zeros({2}).device(), cpu());
}

TEST_P(DeviceScopeOnDevice, TensorsReportTheirDevice) {
  const Device d = device();
  auto x = ones({2, 3}, d);
  EXPECT_EQ(x.device(), d);
  auto y = (x + 2).exp() * x;  // runs where x lives
  EXPECT_EQ(y.device(), d);
  EXPECT_EQ(y.sum().device(), d);
  EXPECT_EQ(x.t().device(), d);
}

TEST_P(DeviceScopeOnDevice, SynchronizeWorks) {
  const Device d = device();
  auto x = rand({1000}, d);
  auto y = x * 2;
  EXPECT_NO_THROW(synchronize(d));
  Ledger scope;
  synchronize(d);
  if (!d.is_cpu()) {
    // synchronize() is a host wait on d (DESIGN §4.8).
    EXPECT_EQ(scope.report().host_syncs(d), 1u);
  }
  EXPECT_EQ(scope.report().total_copies(), 0u);
  EXPECT_NEAR(y.sum().item<float>(), 2 * x.sum().item<float>(), 1e-2);
}

ANVIL_INSTANTIATE_DEVICE_TEST(DeviceScopeOnDevice);

}  // namespace
