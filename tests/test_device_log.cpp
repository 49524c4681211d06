// anvil::DeviceLog: a device-resident log of scalars, read once (the chapter's
// sync-log exercise). Appending must never make the host wait.
#include <cmath>

#include "device_test.h"

namespace anvil {
namespace {

class DeviceLogTest : public testing::DeviceTest {};

TEST_P(DeviceLogTest, AppendsWithoutHostSyncsAndReadsOnce) {
  const Device d = device();
  manual_seed(3);
  Tensor a = randn({8, 8}, d);
  std::vector<double> expected;
  for (int i = 0; i < 5; ++i) expected.push_back(std::sqrt((a * (i + 1)).pow(2).sum().cpu().item<float>()));

  DeviceLog log(16, d);
  Ledger appends;
  for (int i = 0; i < 5; ++i) log.append((a * (i + 1)).norm());
  const LedgerReport during = appends.report();
  EXPECT_EQ(during.host_syncs(d), 0u) << during;
  EXPECT_EQ(during.copies(d, cpu()), 0u) << during;
  EXPECT_EQ(log.size(), 5);
  EXPECT_EQ(log.values().device(), d);

  Ledger reading;
  const std::vector<double> got = log.read();
  EXPECT_EQ(reading.report().copies(d, cpu()), d.is_cpu() ? 0u : 1u) << reading.report();
  ASSERT_EQ(got.size(), expected.size());
  for (std::size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], expected[i], 1e-4 * expected[i]) << i;
}

TEST_P(DeviceLogTest, RejectsWhatItCannotHold) {
  const Device d = device();
  DeviceLog log(2, d);
  EXPECT_THROW(log.append(ones({2}, d)), ShapeError);
  log.append(ones({}, d));
  log.append(ones({1, 1}, d));
  try {
    log.append(ones({}, d));
    FAIL() << "a full log accepted an entry";
  } catch (const IndexError& e) {
    EXPECT_NE(std::string(e.what()).find("DeviceLog::append: the log is full; expected at most 2 entries"),
              std::string::npos)
        << e.what();
  }
  log.clear();
  EXPECT_EQ(log.size(), 0);
  EXPECT_TRUE(log.read().empty());
  EXPECT_THROW(DeviceLog(0, d), ValueError);
}

TEST(DeviceLogDevices, RejectsAValueOnAnotherDevice) {
  const std::vector<Device> all = all_devices();
  if (all.size() < 2) GTEST_SKIP() << "needs a second device: " << try_gpu_reason(0);
  DeviceLog log(4, all[1]);
  try {
    log.append(ones({}, all[0]));
    FAIL() << "a value on " << all[0] << " went into a log on " << all[1];
  } catch (const DeviceMismatch& e) {
    EXPECT_NE(std::string(e.what()).find("expected " + all[1].str() + ", got " + all[0].str()), std::string::npos)
        << e.what();
  }
}

ANVIL_INSTANTIATE_DEVICE_TEST(DeviceLogTest);

}  // namespace
}  // namespace anvil
