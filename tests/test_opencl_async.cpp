// Asynchrony on OpenCL (DESIGN §4.7): ops are enqueued and return before
// they run, host reads wait, and an error the device finds surfaces at the
// next sync with the op's name. Shown with the queue's own state (a gate
// that holds the queue, command status), never with timings.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "anvil/anvil.h"
#include "opencl_test_support.h"
#ifdef ANVIL_WITH_OPENCL
#include "backends/opencl/testing.h"
#endif

namespace {

using namespace anvil;
using anvil::testing::opencl_count;

#ifdef ANVIL_WITH_OPENCL
using opencl::testing::CommandStatus;
using opencl::testing::last_command_status;
using opencl::testing::QueueGate;

TEST(OpenCLAsync, OpsReturnBeforeTheyRunAndHostReadsWait) {
  ANVIL_REQUIRE_OPENCL(1);
  const Device d(DeviceType::OpenCL, 0);
  manual_seed(3);
  const Tensor a = rand({256, 256}, d);
  const float want = matmul(a.cpu(), a.cpu()).sum().item<float>();
  // Warm-up: a kernel's first launch on a CPU device waits for it to run
  // (launch.h), which behind the closed gate would be forever.
  (void)(matmul(a, a) + 1).exp();
  synchronize(d);
  Tensor y;
  {
    QueueGate gate(0);  // the queue stalls here until open()
    const auto before = opencl::testing::commands_enqueued(0);
    y = matmul(a, a);  // returns although nothing behind the gate can run
    const Tensor z = (y + 1).exp();
    EXPECT_GT(opencl::testing::commands_enqueued(0), before + 1);
    const CommandStatus s = last_command_status(0);
    EXPECT_NE(s, CommandStatus::Complete) << to_string(s);
    EXPECT_NE(s, CommandStatus::Failed) << to_string(s);
    gate.open();
  }
  // item() waits for the queue: the value is the finished product.
  EXPECT_NEAR(y.sum().item<float>(), want, std::abs(want) * 1e-4);
  // Nothing is left in flight after a host read (None: all retired).
  const CommandStatus after = last_command_status(0);
  EXPECT_TRUE(after == CommandStatus::Complete || after == CommandStatus::None) << to_string(after);
}

TEST(OpenCLAsync, EveryDeviceHasItsOwnQueue) {
  ANVIL_REQUIRE_OPENCL(2);
  const Device d0(DeviceType::OpenCL, 0), d1(DeviceType::OpenCL, 1);
  const Tensor a = ones({64, 64}, d0), b = ones({64, 64}, d1);
  // Warm-up: a kernel's first launch on a CPU device waits for it to run
  // (launch.h), which behind the closed gate would be forever.
  (void)matmul(a, a);
  synchronize(d0);
  synchronize(d1);
  QueueGate gate(0);
  const Tensor x = matmul(a, a);  // held behind opencl:0's gate
  const Tensor y = matmul(b, b);  // opencl:1 is not held
  EXPECT_FLOAT_EQ(y.sum().item<float>(), 64.0f * 64 * 64);
  EXPECT_NE(last_command_status(0), CommandStatus::Complete);
  gate.open();
  EXPECT_FLOAT_EQ(x.sum().item<float>(), 64.0f * 64 * 64);
}

TEST(OpenCLAsync, DeviceErrorsSurfaceAtTheNextSyncNamingTheOp) {
  ANVIL_REQUIRE_OPENCL(1);
  const Device d(DeviceType::OpenCL, 0);
  const Tensor x = arange(12, d, f32).reshape({4, 3});
  const Tensor bad = tensor(std::vector<std::int64_t>{1, 9}, d);
  synchronize(d);
  Tensor y;
  // The kernel finds index 9 out of range; the call itself only enqueues.
  EXPECT_NO_THROW(y = index_select(x, 0, bad));
  try {
    synchronize(d);
    ADD_FAILURE() << "no error at the sync";
  } catch (const IndexError& e) {
    const std::string m = e.what();
    EXPECT_EQ(m.rfind("index_select", 0), 0u) << m;
    EXPECT_NE(m.find("9"), std::string::npos) << m;
    EXPECT_NE(m.find(d.str()), std::string::npos) << m;
  }
  // Reported once; the device stays usable.
  EXPECT_NO_THROW(synchronize(d));
  EXPECT_EQ(index_select(x, 0, tensor(std::vector<std::int64_t>{3}, d)).to_vector<float>(),
            (std::vector<float>{9, 10, 11}));
}

TEST(OpenCLAsyncChild, SyncEveryOp) {
  if (!anvil::testing::in_child()) GTEST_SKIP() << "runs as a child of SyncAfterEveryOp";
  const Device d(DeviceType::OpenCL, 0);
  const Tensor x = arange(12, d, f32).reshape({4, 3});
  try {
    (void)index_select(x, 0, tensor(std::vector<std::int64_t>{1, 9}, d));
    std::printf("RESULT thrown_at=none\n");
  } catch (const IndexError& e) {
    std::printf("RESULT thrown_at=call\nRESULT message=%s\n", e.what());
  }
}

TEST(OpenCLAsync, SyncAfterEveryOpStopsAtTheFailingOp) {
  ANVIL_REQUIRE_OPENCL(1);
  const std::string out = anvil::testing::run_child("ANVIL_SYNC=1", "OpenCLAsyncChild.SyncEveryOp");
  EXPECT_NE(out.find("RESULT thrown_at=call"), std::string::npos) << out;
  EXPECT_NE(out.find("RESULT message=index_select"), std::string::npos) << out;
}

#else
TEST(OpenCLAsync, NotCompiledIn) { GTEST_SKIP() << "the OpenCL backend is not compiled into this build"; }
#endif

}  // namespace
