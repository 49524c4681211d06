// anvil::Event (Note [Device clocks]): on every device an event pair times
// the work between them; on OpenCL on the device's own clock (queue
// profiling), without a wait at record time; elsewhere on the host clock
// after a synchronize. Waiting for an event is a host sync in the ledger.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "device_test.h"
#include "opencl_test_support.h"
#ifdef ANVIL_WITH_OPENCL
#include "backends/opencl/testing.h"
#endif

namespace anvil {
namespace {

using Clock = std::chrono::steady_clock;

class EventTest : public testing::DeviceTest {};

// Work long enough to stand out from an empty range on any device.
Tensor busy_work(const Tensor& a) {
  Tensor c = matmul(a, a);
  for (int i = 0; i < 3; ++i) c = matmul(c, a) * 0.01;
  return c;
}

TEST_P(EventTest, ALongOpTakesLongerThanAnEmptyRange) {
  const Device d = device();
  manual_seed(2);
  const Tensor a = randn({256, 256}, d);
  (void)busy_work(a);  // warm-up: kernels built, memory cached
  synchronize(d);

  const Event e0 = Event::record(d);
  const Event e1 = Event::record(d);
  const double empty = e0.elapsed_seconds(e1);

  const auto host0 = Clock::now();
  const Event start = Event::record(d);
  const Tensor c = busy_work(a);
  const Event end = Event::record(d);
  const double busy = start.elapsed_seconds(end);
  const double wall = std::chrono::duration<double>(Clock::now() - host0).count();

  EXPECT_TRUE(start.recorded());
  EXPECT_EQ(start.device(), d);
  EXPECT_GE(empty, 0.0);
  EXPECT_GT(busy, 0.0);
  EXPECT_GE(busy, empty);
  // Seconds, not nanoseconds or milliseconds: within what the host saw pass.
  EXPECT_LE(busy, wall * 1.05 + 1e-4) << "busy " << busy << " s, host wall " << wall << " s";
  // The other way round is the same interval, negated.
  EXPECT_DOUBLE_EQ(end.elapsed_seconds(start), -busy);
  // Copies share the marker.
  const Event copy = start;
  EXPECT_DOUBLE_EQ(copy.elapsed_seconds(end), busy);
  EXPECT_TRUE(std::isfinite(c.sum().item<float>()));
}

TEST_P(EventTest, TheLedgerCountsTheWaitAsOneHostSync) {
  const Device d = device();
  const Tensor a = ones({128, 128}, d);
  synchronize(d);
  Ledger recording;
  const Event start = Event::record(d);
  const Tensor c = matmul(a, a);
  const Event end = Event::record(d);
  const LedgerReport during = recording.report();
  const bool device_clock = start.on_device_clock();
  EXPECT_EQ(end.on_device_clock(), device_clock);
  // On the device's clock recording only enqueues a marker; on the host's
  // each record synchronizes (not counted on the CPU, which never waits).
  EXPECT_EQ(during.host_syncs(d), device_clock || d.is_cpu() ? 0u : 2u) << during;

  Ledger waiting;
  (void)start.elapsed_seconds(end);
  EXPECT_EQ(waiting.report().host_syncs(d), device_clock ? 1u : 0u) << waiting.report();
  // Markers already waited for: asking again does not wait.
  waiting.reset();
  (void)start.elapsed_seconds(end);
  EXPECT_EQ(waiting.report().host_syncs(d), 0u) << waiting.report();
  EXPECT_EQ(waiting.report().total_copies(), 0u) << waiting.report();
  EXPECT_FLOAT_EQ(c.sum().item<float>(), 128.0f * 128 * 128);
}

TEST_P(EventTest, RejectsUnrecordedEventsAndEventsOfAnotherDevice) {
  const Device d = device();
  const Event none;
  EXPECT_FALSE(none.recorded());
  EXPECT_FALSE(none.on_device_clock());
  const Event e = Event::record(d);
  EXPECT_THROW((void)none.elapsed_seconds(e), ValueError);
  EXPECT_THROW((void)e.elapsed_seconds(none), ValueError);

  std::vector<Device> others;
  for (Device o : all_devices())
    if (o != d) others.push_back(o);
  if (others.empty()) GTEST_SKIP() << "needs a second device";
  for (Device o : others) {
    const Event f = Event::record(o);
    try {
      (void)e.elapsed_seconds(f);
      ADD_FAILURE() << "no error for events on " << d << " and " << o;
    } catch (const DeviceMismatch& err) {
      const std::string m = err.what();
      EXPECT_EQ(m.rfind("Event::elapsed_seconds: ", 0), 0u) << m;
      EXPECT_NE(m.find("expected end on " + d.str()), std::string::npos) << m;
      EXPECT_NE(m.find("got " + o.str()), std::string::npos) << m;
    }
  }
}

ANVIL_INSTANTIATE_DEVICE_TEST(EventTest);

TEST(Event, RecordOnAMissingDeviceNamesTheOp) {
  try {
    (void)Event::record(Device(DeviceType::OpenCL, 99));
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {  // DeviceError, or NotCompiled without OpenCL
    EXPECT_EQ(std::string(e.what()).rfind("Event::record: ", 0), 0u) << e.what();
  }
}

TEST(Event, TheCpuUsesTheHostClock) {
  // Its ops run synchronously on the calling thread: the host clock is exact.
  EXPECT_FALSE(Event::record(cpu()).on_device_clock());
}

#ifdef ANVIL_WITH_OPENCL

TEST(OpenCLEvent, EveryOpenCLDeviceHasADeviceClock) {
  ANVIL_REQUIRE_OPENCL(1);
  for (int i = 0; i < testing::opencl_count(); ++i)
    EXPECT_TRUE(Event::record(Device(DeviceType::OpenCL, i)).on_device_clock()) << "opencl:" << i;
}

// The device's clock counts what the queue did, not what the host did: a
// queue held for 200 ms before the range starts shows none of it, and
// recording behind the closed gate does not wait (it would never return).
TEST(OpenCLEvent, TheDeviceClockIgnoresTimeTheQueueWasHeld) {
  ANVIL_REQUIRE_OPENCL(1);
  const Device d(DeviceType::OpenCL, 0);
  const Tensor x = ones({1024}, d);
  // Warm-up: a kernel's first launch on a CPU device waits for it to run
  // (launch.h), which behind the closed gate would be forever.
  (void)(x + 1);
  synchronize(d);
  Event start, end;
  Tensor y;
  const auto host0 = Clock::now();
  {
    opencl::testing::QueueGate gate(0);
    start = Event::record(d);
    y = x + 1;
    end = Event::record(d);
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    gate.open();
  }
  const double device_s = start.elapsed_seconds(end);
  const double host_s = std::chrono::duration<double>(Clock::now() - host0).count();
  EXPECT_GE(host_s, 0.2);
  EXPECT_GT(device_s, 0.0);
  EXPECT_LT(device_s, 0.1) << "the device clock counted the time the queue was held";
  EXPECT_FLOAT_EQ(y.sum().item<float>(), 2048.0f);
}

TEST(OpenCLEventChild, ProfilingOff) {
  if (!anvil::testing::in_child()) GTEST_SKIP() << "runs as a child of ProfilingOff...";
  const Device d(DeviceType::OpenCL, 0);
  const Tensor a = ones({64, 64}, d);
  Ledger l;
  const Event start = Event::record(d);
  const Tensor c = matmul(a, a);
  const Event end = Event::record(d);
  const double s = start.elapsed_seconds(end);
  std::printf("RESULT device_clock=%d syncs=%d positive=%d\n", start.on_device_clock() ? 1 : 0,
              static_cast<int>(l.report().host_syncs(d)), s > 0 ? 1 : 0);
}

// ANVIL_OPENCL_PROFILE=0 turns queue profiling off: events fall back to the
// host clock, synchronizing at each record.
TEST(OpenCLEvent, ProfilingOffFallsBackToTheHostClock) {
  ANVIL_REQUIRE_OPENCL(1);
  const std::string out = testing::run_child("ANVIL_OPENCL_PROFILE=0", "OpenCLEventChild.ProfilingOff");
  EXPECT_NE(out.find("RESULT device_clock=0 syncs=2 positive=1"), std::string::npos) << out;
}

#endif

}  // namespace
}  // namespace anvil
