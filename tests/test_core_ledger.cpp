// The transfer ledger (DESIGN §4.8): copies and bytes per source→destination,
// host syncs per device, scoped snapshots.
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "device_test.h"
#include "reference.h"

namespace {

using namespace anvil;

class LedgerTest : public anvil::testing::DeviceTest {};

TEST_P(LedgerTest, PrintingADeviceTensorIsExactlyOneCopyToTheHost) {
  const Device d = device();
  auto x = ones({2, 3}, d);
  synchronize(d);
  Ledger scope;
  std::ostringstream os;
  os << x;
  const auto r = scope.report();
  if (d.is_cpu()) {
    EXPECT_EQ(r.total_copies(), 0u) << "printing a CPU tensor needs no copy\n" << r;
  } else {
    EXPECT_EQ(r.copies(d, cpu()), 1u) << r;
    EXPECT_EQ(r.bytes(d, cpu()), x.nbytes()) << r;
    EXPECT_EQ(r.total_copies(), 1u) << r;
  }
  // A large (summarised) tensor is still one copy.
  auto big = ones({100, 100}, d);
  synchronize(d);
  Ledger scope2;
  os << big;
  EXPECT_EQ(scope2.report().total_copies(), d.is_cpu() ? 0u : 1u) << scope2.report();
}

TEST_P(LedgerTest, MovesAreCountedWithBytes) {
  const Device d = device();
  auto x = rand({16, 32}, d);  // 2048 bytes
  synchronize(d);
  {
    Ledger scope;
    auto same = x.to(d);  // no copy
    EXPECT_EQ(scope.report().total_copies(), 0u) << scope.report();
    EXPECT_EQ(scope.report().total_bytes(), 0u);
  }
  {
    Ledger scope;
    auto c = x.copy_to(d);  // a same-device copy, counted as (d, d)
    const auto r = scope.report();
    EXPECT_EQ(r.copies(d, d), 1u) << r;
    EXPECT_EQ(r.bytes(d, d), 2048u) << r;
    EXPECT_EQ(r.total_copies(), 1u) << r;
  }
  {
    Ledger scope;
    auto c = x.clone();  // clone is a same-device copy too
    EXPECT_EQ(scope.report().copies(d, d), 1u) << scope.report();
    EXPECT_EQ(scope.report().bytes(d, d), 2048u);
  }
  {
    Ledger scope;
    auto h = x.cpu();
    const auto r = scope.report();
    if (d.is_cpu()) {
      EXPECT_EQ(r.total_copies(), 0u) << r;  // to(cpu) of a CPU tensor is itself
    } else {
      EXPECT_EQ(r.copies(d, cpu()), 1u) << r;
      EXPECT_EQ(r.bytes(d, cpu()), 2048u) << r;
      EXPECT_EQ(r.total_copies(), 1u) << r;
    }
  }
  if (!d.is_cpu()) {
    auto h = x.cpu();
    Ledger scope;
    auto back = h.to(d);
    EXPECT_EQ(scope.report().copies(cpu(), d), 1u) << scope.report();
    EXPECT_EQ(scope.report().bytes(cpu(), d), 2048u);
    // Creating a tensor from host data is one host→device copy.
    Ledger scope2;
    auto t = tensor(std::vector<float>(100, 1.0f), d);
    EXPECT_EQ(scope2.report().copies(cpu(), d), 1u) << scope2.report();
    EXPECT_EQ(scope2.report().bytes(cpu(), d), 400u);
  }
}

TEST_P(LedgerTest, ComputeOnTheDeviceMovesNothing) {
  const Device d = device();
  auto a = rand({64, 64}, d), b = rand({64, 64}, d);
  synchronize(d);
  Ledger scope;
  auto c = (matmul(a, b) + 2).exp() * a;
  auto s = c.sum({1});
  auto t = a.t().contiguous();  // a layout change is not a transfer between devices
  (void)t;
  const auto r = scope.report();
  for (Device other : all_devices()) {
    if (other == d) continue;
    EXPECT_EQ(r.copies(d, other), 0u) << r;
    EXPECT_EQ(r.copies(other, d), 0u) << r;
  }
  EXPECT_EQ(r.host_syncs(d), 0u) << "no op may wait for the device\n" << r;
  // Reading the result is a host wait on a device (not on the CPU).
  (void)s.to_vector<float>();
  if (!d.is_cpu()) {
    EXPECT_GE(scope.report().host_syncs(d), 1u) << scope.report();
  }
}

TEST_P(LedgerTest, SnapshotsAreScoped) {
  const Device d = device();
  auto x = ones({10}, d);  // 40 bytes
  Ledger outer;
  (void)x.copy_to(d);
  {
    Ledger inner;
    (void)x.copy_to(d);
    (void)x.copy_to(d);
    EXPECT_EQ(inner.report().copies(d, d), 2u);
    EXPECT_EQ(inner.report().bytes(d, d), 80u);
  }
  EXPECT_EQ(outer.report().copies(d, d), 3u);
  EXPECT_EQ(outer.report().bytes(d, d), 120u);
  outer.reset();
  EXPECT_EQ(outer.report().total_copies(), 0u);
  (void)x.copy_to(d);
  EXPECT_EQ(outer.report().copies(d, d), 1u);
  // The process-wide totals only grow.
  const auto before = ledger_totals().total_copies();
  (void)x.clone();
  EXPECT_EQ(ledger_totals().total_copies(), before + 1);
}

TEST_P(LedgerTest, SynchronizeIsAHostSyncOnDevices) {
  const Device d = device();
  Ledger scope;
  synchronize(d);
  synchronize(d);
  if (!d.is_cpu()) {
    EXPECT_EQ(scope.report().host_syncs(d), 2u) << scope.report();
    EXPECT_EQ(scope.report().total_syncs(), 2u);
  }
  EXPECT_EQ(scope.report().total_copies(), 0u);
}

TEST_P(LedgerTest, ReportPrintsRoutes) {
  const Device d = device();
  auto x = ones({4}, d);
  Ledger scope;
  (void)x.copy_to(d);
  std::ostringstream os;
  os << scope.report();
  const std::string s = os.str();
  EXPECT_NE(s.find(d.str()), std::string::npos) << s;
  EXPECT_NE(s.find("16"), std::string::npos) << "bytes moved should be shown\n" << s;
}

// Note [What a launch is] (anvil/ledger.h): one elementwise op is one
// launch that reads its tensor operands (a broadcast one once, a C++ scalar
// not at all) and writes its result, into one storage it allocated.
TEST_P(LedgerTest, AnOpIsOneLaunchThatReadsAndWritesItsOperands) {
  const Device d = device();
  const Tensor a = rand({16, 32}, d), b = rand({16, 32}, d), row = rand({32}, d);  // 2048, 2048, 128 bytes
  synchronize(d);
  {
    Ledger scope;
    const Tensor c = a + b;
    const auto r = scope.report();
    EXPECT_EQ(r.launches(d), 1u) << r;
    EXPECT_EQ(r.bytes_read(d), 4096u) << r;
    EXPECT_EQ(r.bytes_written(d), 2048u) << r;
    EXPECT_EQ(r.device_work(d).allocations, 1u) << r;
    EXPECT_EQ(r.bytes_allocated(d), 2048u) << r;
    if (!d.is_cpu()) {
      EXPECT_EQ(r.launches(cpu()), 0u) << "the host launched nothing\n" << r;
    }
  }
  {
    Ledger scope;
    const Tensor c = a * row;
    EXPECT_EQ(scope.report().bytes_read(d), 2048u + 128u) << scope.report();
    const Tensor e = a + 2.0;
    EXPECT_EQ(scope.report().bytes_read(d), 2 * 2048u + 128u) << scope.report();
    EXPECT_EQ(scope.report().launches(d), 2u) << scope.report();
  }
  {
    Ledger scope;
    Tensor c = a.clone();  // a same-device copy: a launch too, and a transfer
    c.add_(b);             // in place: nothing allocated
    const auto r = scope.report();
    EXPECT_EQ(r.launches(d), 2u) << r;
    EXPECT_EQ(r.device_work(d).allocations, 1u) << r;
    EXPECT_EQ(r.bytes_written(d), 2 * 2048u) << r;
  }
  {
    Ledger scope;
    const Tensor s = a.sum();
    const Tensor m = matmul(a, b.t());  // [16, 32] x [32, 16]: one GEMM, a library call or our kernel
    const auto r = scope.report();
    EXPECT_GE(r.launches(d), 2u) << r;
    EXPECT_LE(r.launches(d), 3u) << "a sum takes at most two passes\n" << r;
    EXPECT_EQ(r.bytes_read(d), 2048u + 2 * 2048u) << r;
    EXPECT_EQ(r.bytes_written(d), 4u + 16 * 16 * 4u) << r;
  }
  Ledger scope;
  const Tensor c = a - b;
  std::ostringstream os;
  os << scope.report();
  EXPECT_NE(os.str().find("launches"), std::string::npos) << os.str();
}

TEST(LedgerThreads, CountersAreThreadSafe) {
  auto x = ones({8});  // 32 bytes
  Ledger scope;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < 250; ++i) (void)x.copy_to(cpu());
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(scope.report().copies(cpu(), cpu()), 1000u);
  EXPECT_EQ(scope.report().bytes(cpu(), cpu()), 32000u);
  EXPECT_EQ(scope.report().launches(cpu()), 1000u) << scope.report();
  EXPECT_EQ(scope.report().device_work(cpu()).allocations, 1000u) << scope.report();
}

ANVIL_INSTANTIATE_DEVICE_TEST(LedgerTest);

}  // namespace
