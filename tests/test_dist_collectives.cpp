// anvil::dist collectives against plain references.
//
// One binary, three ctest entries (tests/CMakeLists.txt): alone (a world of
// one, plus the LocalGroup suites), and under `mpirun -np 2` twice — over
// shared memory and with the TCP transport forced — running the
// ProcessGroup suites (rank r works on cpu, or on opencl:r). Rank r's input
// is a known function of (r, i), so every rank computes the expected result
// for any world size.
#include <gtest/gtest.h>
#include <time.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "anvil/anvil.h"
#include "anvil/dist.h"
#include "device_test.h"

using namespace anvil;
using dist::ReduceOp;

namespace {

// Rank r's element i: small integers in [-5, 5] ([0, 10] for u8), exact in
// every dtype and with no overflow in any op over two ranks.
DType g_dtype = f32;  // the dtype of the case that runs, for value()
double value(int r, std::int64_t i) {
  return static_cast<double>((i * 3 + r * 5 + r * r) % 11) - (g_dtype == u8 ? 0 : 5);
}

Tensor rank_tensor(int r, const Shape& shape, DType t, Device d) {
  g_dtype = t;
  std::int64_t n = 1;
  for (auto s : shape) n *= s;
  std::vector<double> v(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) v[static_cast<std::size_t>(i)] = value(r, i);
  return from_host(v.data(), shape, f64, cpu()).to(t).to(d);
}

// The op over ranks 0..size-1 of element i, as the engines define it (Avg on
// integers truncates towards zero).
double reduced(ReduceOp op, int size, std::int64_t i, DType t) {
  double acc = value(0, i);
  for (int r = 1; r < size; ++r) {
    const double x = value(r, i);
    switch (op) {
      case ReduceOp::Sum:
      case ReduceOp::Avg:
        acc += x;
        break;
      case ReduceOp::Prod:
        acc *= x;
        break;
      case ReduceOp::Max:
        acc = std::max(acc, x);
        break;
      case ReduceOp::Min:
        acc = std::min(acc, x);
        break;
    }
  }
  if (op == ReduceOp::Avg) acc = is_floating(t) ? acc / size : std::trunc(acc / size);
  return acc;
}

std::vector<double> values_of(const Tensor& t) { return t.to(f64).to_vector<double>(); }

const ReduceOp kOps[] = {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max, ReduceOp::Min, ReduceOp::Prod};

// ---- ProcessGroup: the world (one process alone, or each rank of mpirun) -------------

struct WorldCase {
  std::string device_kind;  // "cpu" or "opencl"
  DType dtype;
};

std::string case_name(const ::testing::TestParamInfo<WorldCase>& info) {
  return info.param.device_kind + "_" + std::string(to_string(info.param.dtype));
}

class ProcessGroupTest : public ::testing::TestWithParam<WorldCase> {
 protected:
  void SetUp() override {
    dist::ProcessGroup& w = dist::init();
    if (GetParam().device_kind != "cpu") {
      // Rank r works on <kind>:r: opencl through the host staging, cuda
      // through NCCL where it loads (else staged too).
      const Device first(GetParam().device_kind + ":0");
      const bool required = anvil::testing::required_device_types().count(first.type()) > 0;
      const int have = device_count(first.type());
      if (have == 0) {
        const std::string why = "no " + GetParam().device_kind + " device: " + device_unavailable_reason(first.type());
        if (required) FAIL() << "ANVIL_REQUIRE_DEVICES names " << GetParam().device_kind << " but there is " << why;
        GTEST_SKIP() << why;
      }
      // Fewer devices than ranks is a normal machine (one GPU), not a missing
      // device: a skip even when the type is required. The ctest entry
      // test_dist_collectives_mpi_np1 runs these cases on one GPU.
      if (have < w.size())
        GTEST_SKIP() << "needs " << w.size() << " " << GetParam().device_kind << " devices (rank r uses "
                     << GetParam().device_kind << ":r), have " << have;
      device_ = Device(GetParam().device_kind + ":" + std::to_string(w.rank()));
    }
    g_dtype = GetParam().dtype;
  }
  dist::ProcessGroup& world() { return dist::world(); }
  Device device() const { return device_; }
  DType dtype() const { return GetParam().dtype; }

 private:
  Device device_ = cpu();
};

TEST_P(ProcessGroupTest, AllreduceEveryOp) {
  auto& w = world();
  for (ReduceOp op : kOps) {
    Tensor t = rank_tensor(w.rank(), {3, 5}, dtype(), device());
    w.allreduce(t, op).wait();
    EXPECT_EQ(t.device(), device());
    EXPECT_EQ(t.dtype(), dtype());
    const auto got = values_of(t);
    for (std::int64_t i = 0; i < 15; ++i)
      ASSERT_EQ(got[static_cast<std::size_t>(i)], reduced(op, w.size(), i, dtype())) << to_string(op) << " at " << i;
  }
}

TEST_P(ProcessGroupTest, AllreduceNonContiguousWritesThrough) {
  auto& w = world();
  Tensor base = rank_tensor(w.rank(), {4, 6}, dtype(), device());
  Tensor view = base.t();  // [6, 4], not contiguous
  ASSERT_FALSE(view.is_contiguous());
  w.allreduce(view, ReduceOp::Sum).wait();
  const auto got = values_of(base);
  for (std::int64_t i = 0; i < 24; ++i)
    ASSERT_EQ(got[static_cast<std::size_t>(i)], reduced(ReduceOp::Sum, w.size(), i, dtype()));
}

TEST_P(ProcessGroupTest, AllreduceLargeGrowsStaging) {
  auto& w = world();
  const std::int64_t n = 300000;  // past the eager limits of both transports
  Tensor small = rank_tensor(w.rank(), {7}, dtype(), device());
  w.allreduce(small, ReduceOp::Max).wait();
  Tensor t = rank_tensor(w.rank(), {n}, dtype(), device());
  w.allreduce(t, ReduceOp::Sum).wait();
  const auto got = values_of(t);
  for (std::int64_t i = 0; i < n; i += 997)
    ASSERT_EQ(got[static_cast<std::size_t>(i)], reduced(ReduceOp::Sum, w.size(), i, dtype()));
  ASSERT_EQ(got.back(), reduced(ReduceOp::Sum, w.size(), n - 1, dtype()));
}

TEST_P(ProcessGroupTest, BroadcastFromEveryRoot) {
  auto& w = world();
  for (int root = 0; root < w.size(); ++root) {
    Tensor t = rank_tensor(w.rank(), {2, 3, 4}, dtype(), device());
    w.broadcast(t, root).wait();
    const auto got = values_of(t);
    for (std::int64_t i = 0; i < 24; ++i)
      ASSERT_EQ(got[static_cast<std::size_t>(i)], value(root, i)) << "root " << root;
  }
}

TEST_P(ProcessGroupTest, Allgather) {
  auto& w = world();
  Tensor in = rank_tensor(w.rank(), {5, 2}, dtype(), device());
  std::vector<Tensor> out;
  for (int r = 0; r < w.size(); ++r) out.push_back(zeros({5, 2}, dtype(), device()));
  w.allgather(out, in).wait();
  for (int r = 0; r < w.size(); ++r) {
    const auto got = values_of(out[static_cast<std::size_t>(r)]);
    for (std::int64_t i = 0; i < 10; ++i) ASSERT_EQ(got[static_cast<std::size_t>(i)], value(r, i)) << "part " << r;
  }
}

TEST_P(ProcessGroupTest, ReduceScatterEveryOp) {
  auto& w = world();
  const std::int64_t n = 6;
  for (ReduceOp op : kOps) {
    // in[j] on rank r holds value(r, j*n + i); rank r's result is part r.
    std::vector<Tensor> in;
    Tensor all = rank_tensor(w.rank(), {w.size() * n}, dtype(), device());
    for (int j = 0; j < w.size(); ++j) in.push_back(all.slice(0, j * n, (j + 1) * n));
    Tensor out = zeros({n}, dtype(), device());
    w.reduce_scatter(out, in, op).wait();
    const auto got = values_of(out);
    for (std::int64_t i = 0; i < n; ++i)
      ASSERT_EQ(got[static_cast<std::size_t>(i)], reduced(op, w.size(), w.rank() * n + i, dtype())) << to_string(op);
  }
}

TEST_P(ProcessGroupTest, ZeroSizeAndScalarTensors) {
  auto& w = world();
  Tensor empty_t = zeros({0, 3}, dtype(), device());
  w.allreduce(empty_t, ReduceOp::Sum).wait();
  EXPECT_EQ(empty_t.numel(), 0);
  std::vector<Tensor> out(static_cast<std::size_t>(w.size()), zeros({0, 3}, dtype(), device()));
  w.allgather(out, empty_t).wait();
  Tensor s = rank_tensor(w.rank(), {}, dtype(), device());  // 0-d
  w.allreduce(s, ReduceOp::Max).wait();
  EXPECT_EQ(values_of(s)[0], reduced(ReduceOp::Max, w.size(), 0, dtype()));
}

TEST_P(ProcessGroupTest, ManyInFlightCompleteInOrder) {
  auto& w = world();
  std::vector<Tensor> ts;
  std::vector<dist::Work> works;
  for (int k = 0; k < 8; ++k) {
    ts.push_back(rank_tensor(w.rank(), {9}, dtype(), device()));
    works.push_back(w.allreduce(ts.back(), k % 2 ? ReduceOp::Max : ReduceOp::Sum));
  }
  works.push_back(w.barrier());
  for (auto& wk : works) wk.wait();
  for (int k = 0; k < 8; ++k) {
    const auto got = values_of(ts[static_cast<std::size_t>(k)]);
    for (std::int64_t i = 0; i < 9; ++i)
      ASSERT_EQ(got[static_cast<std::size_t>(i)], reduced(k % 2 ? ReduceOp::Max : ReduceOp::Sum, w.size(), i, dtype()));
  }
}

// A thread waiting for a collective that nobody has started runs it itself
// (Note [The waiter runs its collective] in src/distributed/process_group.cpp): waits in
// any order, from several threads at once, must still issue the collectives
// in the order they were made, the same on every rank.
TEST_P(ProcessGroupTest, WaitsInAnyOrderFromManyThreadsKeepIssueOrder) {
  auto& w = world();
  constexpr int kCount = 12;
  for (int round = 0; round < 3; ++round) {
    std::vector<Tensor> ts;
    std::vector<dist::Work> works;
    for (int k = 0; k < kCount; ++k) {
      ts.push_back(rank_tensor(w.rank(), {7 + k}, dtype(), device()));
      works.push_back(w.allreduce(ts.back(), k % 3 ? ReduceOp::Sum : ReduceOp::Max));
    }
    // Even ones from a second thread, first to last; odd ones here, last to first.
    std::thread evens([&] {
      for (int k = 0; k < kCount; k += 2) works[static_cast<std::size_t>(k)].wait();
    });
    for (int k = kCount - 1; k >= 0; k -= 2) works[static_cast<std::size_t>(k)].wait();
    evens.join();
    for (int k = 0; k < kCount; ++k) {
      const auto got = values_of(ts[static_cast<std::size_t>(k)]);
      for (std::int64_t i = 0; i < 7 + k; ++i)
        ASSERT_EQ(got[static_cast<std::size_t>(i)],
                  reduced(k % 3 ? ReduceOp::Sum : ReduceOp::Max, w.size(), i, dtype()))
            << "collective " << k << " of round " << round << ", element " << i;
    }
  }
}

// Where the ranks fill the cores, a CPU collective is only queued until it
// is waited for (Note [When the worker starts a collective] in
// src/distributed/process_group.cpp): polling is_completed() alone must still see it
// through, as must a Work that is dropped and a wait behind it.
TEST_P(ProcessGroupTest, PollingWithoutWaitingCompletes) {
  auto& w = world();
  Tensor polled = rank_tensor(w.rank(), {33}, dtype(), device());
  Tensor dropped = rank_tensor(w.rank(), {5}, dtype(), device());
  dist::Work work = w.allreduce(polled, ReduceOp::Sum);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!work.is_completed()) {
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "is_completed() never became true: nothing ran the "
                                                             "collective while the program only polled";
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  for (std::int64_t i = 0; i < 33; ++i)
    ASSERT_EQ(values_of(polled)[static_cast<std::size_t>(i)], reduced(ReduceOp::Sum, w.size(), i, dtype()));
  { dist::Work unwaited = w.allreduce(dropped, ReduceOp::Max); }  // its destructor waits
  for (std::int64_t i = 0; i < 5; ++i)
    ASSERT_EQ(values_of(dropped)[static_cast<std::size_t>(i)], reduced(ReduceOp::Max, w.size(), i, dtype()));
}

TEST_P(ProcessGroupTest, LedgerCountsCollectiveAndStaging) {
  auto& w = world();
  Tensor t = rank_tensor(w.rank(), {64}, dtype(), device());
  Ledger scope;
  w.allreduce(t, ReduceOp::Sum).wait();
  const auto r = scope.report();
  EXPECT_EQ(r.collective_count(device()), 1u);
  EXPECT_EQ(r.collective_bytes(device()), t.nbytes());
  const bool nccl = w.engine_for(device()) == "nccl";
  if (device().is_cpu() || w.size() == 1 || nccl) {
    EXPECT_EQ(r.total_copies(), 0u) << r;  // CPU tensors (and NCCL) go straight in; alone, nothing moves
  } else {
    EXPECT_EQ(r.copies(device(), cpu()), 1u) << r;  // staged out and back in, through the ledger
    EXPECT_EQ(r.copies(cpu(), device()), 1u) << r;
    EXPECT_EQ(r.bytes(device(), cpu()), t.nbytes()) << r;
  }
}

TEST_P(ProcessGroupTest, ValidationErrorsBeforeAnythingIsSent) {
  auto& w = world();
  Tensor undefined;
  EXPECT_THROW(w.allreduce(undefined), ValueError);
  Tensor t = rank_tensor(w.rank(), {4}, dtype(), device());
  EXPECT_THROW(w.broadcast(t, w.size()), IndexError);
  EXPECT_THROW(w.broadcast(t, -1), IndexError);
  std::vector<Tensor> too_few;
  EXPECT_THROW(w.allgather(too_few, t), ValueError);
  std::vector<Tensor> wrong_shape(static_cast<std::size_t>(w.size()), zeros({5}, dtype(), device()));
  EXPECT_THROW(w.allgather(wrong_shape, t), ShapeError);
  std::vector<Tensor> wrong_dtype(static_cast<std::size_t>(w.size()), zeros({4}, dtype() == f64 ? f32 : f64, device()));
  EXPECT_THROW(w.allgather(wrong_dtype, t), DTypeError);
  if (device_count(DeviceType::OpenCL) > 0 || !device().is_cpu()) {
    Tensor elsewhere = zeros({4}, dtype(), device().is_cpu() ? Device("opencl:0") : cpu());
    std::vector<Tensor> wrong_device(static_cast<std::size_t>(w.size()), elsewhere);
    try {
      w.allgather(wrong_device, t);
      ADD_FAILURE() << "no DeviceMismatch";
    } catch (const DeviceMismatch& e) {
      EXPECT_NE(std::string(e.what()).find("allgather: all tensors must be on one device; out[0] is on"),
                std::string::npos)
          << e.what();
    }
    EXPECT_THROW(w.reduce_scatter(t, wrong_device), DeviceMismatch);
  }
  Tensor flags = zeros({4}, boolean, device());
  try {
    w.allreduce(flags, ReduceOp::Sum);
    ADD_FAILURE() << "no DTypeError";
  } catch (const DTypeError& e) {
    EXPECT_NE(std::string(e.what()).find("allreduce: bool tensors reduce only with max"), std::string::npos)
        << e.what();
  }
  // Nothing was sent: the group is still in step on every rank.
  w.allreduce(t, ReduceOp::Sum).wait();
  const auto got = values_of(t);
  for (std::int64_t i = 0; i < 4; ++i)
    ASSERT_EQ(got[static_cast<std::size_t>(i)], reduced(ReduceOp::Sum, w.size(), i, dtype()));
}

INSTANTIATE_TEST_SUITE_P(World, ProcessGroupTest,
                         ::testing::Values(WorldCase{"cpu", f32}, WorldCase{"cpu", f64}, WorldCase{"cpu", i64},
                                           WorldCase{"cpu", i32}, WorldCase{"cpu", u8}, WorldCase{"opencl", f32},
                                           WorldCase{"opencl", f64}, WorldCase{"opencl", i64}, WorldCase{"cuda", f32},
                                           WorldCase{"cuda", f64}, WorldCase{"cuda", i64}),
                         case_name);

// ---- NCCL: which engine runs CUDA tensors --------------------------------------------

// See Note [Waiting for a late rank] (src/distributed/mpi_engine.cpp): while a peer
// has not reached the collective, the waiting rank's MPI worker naps instead
// of spinning, so it leaves the core to others (on two busy cores, to the
// late rank itself).
TEST(ProcessGroupWait, WaitingForALateRankLeavesTheCoreFree) {
  auto& w = dist::init();
  if (w.size() < 2) GTEST_SKIP() << "needs a late rank; a world of " << w.size() << " has none (mpirun -np 2)";
  auto process_cpu_seconds = [] {
    timespec ts{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
  };
  Tensor t = ones({1024}, cpu());
  w.barrier().wait();
  if (w.rank() == 1) std::this_thread::sleep_for(std::chrono::milliseconds(600));
  const double cpu0 = process_cpu_seconds();
  const auto wall0 = std::chrono::steady_clock::now();
  w.allreduce(t, ReduceOp::Sum).wait();
  const double cpu_s = process_cpu_seconds() - cpu0;
  const double wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
  EXPECT_TRUE(allclose(t, full({1024}, static_cast<double>(w.size()))));
  if (w.rank() == 0) {
    ASSERT_GT(wall_s, 0.3) << "rank 0 should have waited for rank 1's 0.6 s sleep";
    EXPECT_LT(cpu_s, 0.5 * wall_s) << "rank 0 used " << cpu_s << " s of CPU while waiting " << wall_s
                                   << " s for a late rank: its MPI worker spun instead of napping";
  }
}

bool cuda_required() { return anvil::testing::required_device_types().count(DeviceType::CUDA) > 0; }

// Every rank takes the same path for a collective on its own device
// (dist::device()), whatever the devices: NCCL only when every rank is on
// CUDA and NCCL loaded everywhere, else MPI with host staging. On a machine
// with one GPU, rank 0 is on cuda:0 and rank 1 on the CPU: this allreduce
// must then be staged on both, not NCCL on one and MPI on the other.
TEST(ProcessGroupNccl, EveryRankTakesTheSamePath) {
  auto& w = dist::init();
  const Device d = dist::device();
  const std::int64_t mine = d.type() == DeviceType::CUDA && dist::nccl_available() ? 1 : 0;
  std::vector<Tensor> flags;
  for (int r = 0; r < w.size(); ++r) flags.push_back(zeros({1}, i64, cpu()));
  w.allgather(flags, full({1}, mine, cpu(), i64)).wait();
  bool all = true;
  for (const Tensor& f : flags) all = all && f.item<std::int64_t>() == 1;
  const bool mpi = w.engine() == "mpi";
  EXPECT_EQ(w.engine_for(Device("cuda:0")), mpi && all ? "nccl" : w.engine());
  EXPECT_EQ(w.engine_for(cpu()), w.engine());
  g_dtype = f32;
  Tensor t = rank_tensor(w.rank(), {5, 3}, f32, d);
  w.allreduce(t, ReduceOp::Sum).wait();
  EXPECT_EQ(t.device(), d);
  const auto got = values_of(t);
  for (std::int64_t i = 0; i < 15; ++i)
    ASSERT_EQ(got[static_cast<std::size_t>(i)], reduced(ReduceOp::Sum, w.size(), i, f32)) << "on " << d.str();
}

// Under ANVIL_REQUIRE_DEVICES=cuda the CUDA cases must really run on NCCL,
// not pass quietly through the host staging because libnccl did not load.
TEST(ProcessGroupNccl, CudaCollectivesGoToNccl) {
  auto& w = dist::init();
  std::string why;
  const bool loaded = dist::nccl_available(&why);
  if (!loaded) {
    if (cuda_required()) FAIL() << "ANVIL_REQUIRE_DEVICES names cuda but NCCL is not usable: " << why;
    GTEST_SKIP() << "NCCL is not usable: " << why;
  }
  EXPECT_EQ(why, "") << "no reason when it loaded";
  const int gpus = device_count(DeviceType::CUDA);
  if (gpus == 0) {
    const std::string no = "no CUDA device: " + device_unavailable_reason(DeviceType::CUDA);
    if (cuda_required()) FAIL() << "ANVIL_REQUIRE_DEVICES names cuda but there is " << no;
    GTEST_SKIP() << no;
  }
  if (w.engine() != "mpi")
    GTEST_SKIP() << "a world of one without a launcher (engine " << w.engine()
                 << ") has no NCCL; ctest's test_dist_collectives_mpi_np1 runs this under mpirun -np 1";
  if (gpus < w.size()) GTEST_SKIP() << "needs a GPU per rank (" << w.size() << "), have " << gpus;
  if (dist::device().type() != DeviceType::CUDA)
    GTEST_SKIP() << "dist::device() is " << dist::device().str() << ", not a GPU (ANVIL_DIST_DEVICE?)";
  const Device d("cuda:" + std::to_string(w.rank()));
  ASSERT_EQ(w.engine_for(d), "nccl");
  Tensor t = rank_tensor(w.rank(), {64}, f32, d);
  Ledger scope;
  w.allreduce(t, ReduceOp::Sum).wait();
  const auto r = scope.report();
  EXPECT_EQ(r.total_copies(), 0u) << "NCCL reduces on the device, no host staging: " << r;
  EXPECT_EQ(r.collective_count(d), 1u) << r;
  const auto got = values_of(t);
  for (std::int64_t i = 0; i < 64; ++i)
    ASSERT_EQ(got[static_cast<std::size_t>(i)], reduced(ReduceOp::Sum, w.size(), i, f32));
}

int env_int_or(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v == nullptr ? fallback : std::atoi(v);
}

TEST(ProcessGroupWorld, InitReadsTheLauncher) {
  auto& w = dist::init();
  EXPECT_EQ(&w, &dist::init());  // one world
  EXPECT_TRUE(dist::is_initialized());
  const char* size = std::getenv("OMPI_COMM_WORLD_SIZE");
  if (size == nullptr) {
    // Alone, or launched with WORLD_SIZE=1 (RANK, LOCAL_RANK; see
    // DistInit.WorldOfOneKeepsTheLaunchersLocalRank).
    EXPECT_EQ(w.engine(), "single");
    EXPECT_EQ(w.size(), 1);
    EXPECT_EQ(dist::rank(), 0);
    EXPECT_EQ(dist::local_rank(), env_int_or("LOCAL_RANK", 0));
  } else {
    EXPECT_EQ(w.engine(), "mpi");
    EXPECT_EQ(w.size(), std::atoi(size));
    EXPECT_EQ(w.rank(), std::atoi(std::getenv("OMPI_COMM_WORLD_RANK")));
    EXPECT_EQ(dist::local_rank(), std::atoi(std::getenv("OMPI_COMM_WORLD_LOCAL_RANK")));
  }
  EXPECT_EQ(dist::world_size(), w.size());
  EXPECT_EQ(dist::device(), try_gpu(dist::local_rank()));
}

// A launcher's RANK/WORLD_SIZE/LOCAL_RANK with a world of one: the single
// engine, and the local rank it gave (so dist::device() is try_gpu(1)). The
// world is made once per process, so a child process runs
// ProcessGroupWorld.InitReadsTheLauncher under that environment.
TEST(DistInit, WorldOfOneKeepsTheLaunchersLocalRank) {
  ASSERT_EQ(std::getenv("OMPI_COMM_WORLD_SIZE"), nullptr) << "run alone, not under mpirun";
  const std::string exe = std::filesystem::read_symlink("/proc/self/exe").string();
  const std::string cmd = "env WORLD_SIZE=1 RANK=0 LOCAL_RANK=1 " + exe +
                          " --gtest_filter=ProcessGroupWorld.InitReadsTheLauncher --gtest_color=no 2>&1";
  FILE* child = popen(cmd.c_str(), "r");
  ASSERT_NE(child, nullptr);
  std::string out;
  char buf[4096];
  for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, child)) > 0;) out.append(buf, n);
  const int status = pclose(child);
  EXPECT_EQ(status, 0) << out;
  EXPECT_NE(out.find("[  PASSED  ] 1 test."), std::string::npos) << "the child ran the test and it passed:\n" << out;
}

// ---- LocalGroup: one process, several devices ----------------------------------------

struct LocalCase {
  std::vector<std::string> devices;
  DType dtype;
};

std::string local_name(const ::testing::TestParamInfo<LocalCase>& info) {
  std::string s;
  for (auto& d : info.param.devices) s += (s.empty() ? "" : "_") + d;
  for (char& c : s)
    if (c == ':') c = '_';
  return s + "_" + std::string(to_string(info.param.dtype));
}

class LocalGroupTest : public ::testing::TestWithParam<LocalCase> {
 protected:
  void SetUp() override {
    for (auto& s : GetParam().devices) {
      Device d(s);
      if (d.is_cpu()) continue;
      if (device_count(d.type()) <= d.index()) {
        const std::string why = "needs " + s + ": " + device_unavailable_reason(d.type());
        if (anvil::testing::required_device_types().count(d.type()) > 0) FAIL() << why;
        GTEST_SKIP() << why;
      }
    }
    for (auto& s : GetParam().devices) devices_.emplace_back(s);
    g_dtype = GetParam().dtype;
  }
  std::vector<Device> devices_;
  DType dtype() const { return GetParam().dtype; }
  int n() const { return static_cast<int>(devices_.size()); }
};

TEST_P(LocalGroupTest, AllreduceEveryOp) {
  dist::LocalGroup g(devices_);
  for (ReduceOp op : kOps) {
    std::vector<Tensor> parts;
    for (int r = 0; r < n(); ++r) parts.push_back(rank_tensor(r, {3, 5}, dtype(), devices_[r]));
    g.allreduce(parts, op).wait();
    for (int r = 0; r < n(); ++r) {
      EXPECT_EQ(parts[r].device(), devices_[r]);
      const auto got = values_of(parts[r]);
      for (std::int64_t i = 0; i < 15; ++i)
        ASSERT_EQ(got[static_cast<std::size_t>(i)], reduced(op, n(), i, dtype()))
            << to_string(op) << " on " << devices_[r].str();
    }
  }
}

TEST_P(LocalGroupTest, Broadcast) {
  dist::LocalGroup g(devices_);
  for (int root = 0; root < n(); ++root) {
    std::vector<Tensor> parts;
    for (int r = 0; r < n(); ++r) parts.push_back(rank_tensor(r, {4, 2}, dtype(), devices_[r]));
    g.broadcast(parts, root).wait();
    for (int r = 0; r < n(); ++r) {
      const auto got = values_of(parts[r]);
      for (std::int64_t i = 0; i < 8; ++i) ASSERT_EQ(got[static_cast<std::size_t>(i)], value(root, i));
    }
  }
}

TEST_P(LocalGroupTest, AllgatherAndReduceScatter) {
  dist::LocalGroup g(devices_);
  std::vector<Tensor> in;
  for (int r = 0; r < n(); ++r) in.push_back(rank_tensor(r, {6}, dtype(), devices_[r]));
  std::vector<std::vector<Tensor>> out(static_cast<std::size_t>(n()));
  for (int i = 0; i < n(); ++i)
    for (int j = 0; j < n(); ++j) out[i].push_back(zeros({6}, dtype(), devices_[i]));
  g.allgather(out, in).wait();
  for (int i = 0; i < n(); ++i)
    for (int j = 0; j < n(); ++j) {
      EXPECT_EQ(out[i][j].device(), devices_[i]);
      const auto got = values_of(out[i][j]);
      for (std::int64_t k = 0; k < 6; ++k) ASSERT_EQ(got[static_cast<std::size_t>(k)], value(j, k));
    }
  for (ReduceOp op : kOps) {
    // in2[j][i] on device j: value(j, i*3 + k); out[i] = op over j.
    std::vector<std::vector<Tensor>> in2(static_cast<std::size_t>(n()));
    for (int j = 0; j < n(); ++j) {
      Tensor all = rank_tensor(j, {n() * 3}, dtype(), devices_[j]);
      for (int i = 0; i < n(); ++i) in2[j].push_back(all.slice(0, i * 3, (i + 1) * 3));
    }
    std::vector<Tensor> res;
    for (int i = 0; i < n(); ++i) res.push_back(zeros({3}, dtype(), devices_[i]));
    g.reduce_scatter(res, in2, op).wait();
    for (int i = 0; i < n(); ++i) {
      const auto got = values_of(res[i]);
      for (std::int64_t k = 0; k < 3; ++k)
        ASSERT_EQ(got[static_cast<std::size_t>(k)], reduced(op, n(), i * 3 + k, dtype())) << to_string(op);
    }
  }
}

TEST_P(LocalGroupTest, ValidationErrors) {
  dist::LocalGroup g(devices_);
  std::vector<Tensor> one = {zeros({3}, dtype(), devices_[0])};
  EXPECT_THROW(g.allreduce(one), ValueError);
  std::vector<Tensor> swapped;
  for (int r = n() - 1; r >= 0; --r) swapped.push_back(zeros({3}, dtype(), devices_[r]));
  try {
    g.allreduce(swapped);
    ADD_FAILURE() << "no DeviceMismatch";
  } catch (const DeviceMismatch& e) {
    EXPECT_NE(std::string(e.what()).find("allreduce: per_device[0] must be on the group's device 0"), std::string::npos)
        << e.what();
  }
  std::vector<Tensor> shapes;
  for (int r = 0; r < n(); ++r) shapes.push_back(zeros({3 + r}, dtype(), devices_[r]));
  EXPECT_THROW(g.allreduce(shapes), ShapeError);
  std::vector<Tensor> parts;
  for (int r = 0; r < n(); ++r) parts.push_back(zeros({3}, dtype(), devices_[r]));
  EXPECT_THROW(g.broadcast(parts, n()), IndexError);
  EXPECT_THROW(dist::LocalGroup({}), ValueError);
  EXPECT_THROW(dist::LocalGroup({devices_[0], devices_[0]}), ValueError);
}

TEST_P(LocalGroupTest, LedgerShowsTheDeviceCopies) {
  dist::LocalGroup g(devices_);
  std::vector<Tensor> parts;
  for (int r = 0; r < n(); ++r) parts.push_back(rank_tensor(r, {32}, dtype(), devices_[r]));
  Ledger scope;
  g.allreduce(parts).wait();
  const auto rep = scope.report();
  for (const Device& d : devices_) EXPECT_EQ(rep.collective_count(d), 1u) << rep;
  // In to device 0 and back out to device 1.
  EXPECT_EQ(rep.copies(devices_[1], devices_[0]), 1u) << rep;
  EXPECT_EQ(rep.copies(devices_[0], devices_[1]), 1u) << rep;
}

INSTANTIATE_TEST_SUITE_P(Devices, LocalGroupTest,
                         ::testing::Values(LocalCase{{"opencl:0", "opencl:1"}, f32},
                                           LocalCase{{"opencl:0", "opencl:1"}, f64},
                                           LocalCase{{"opencl:0", "opencl:1"}, i64},
                                           LocalCase{{"cpu", "opencl:0"}, f32}, LocalCase{{"cpu", "opencl:0"}, f64},
                                           LocalCase{{"cpu", "opencl:0"}, i64}),
                         local_name);

}  // namespace
