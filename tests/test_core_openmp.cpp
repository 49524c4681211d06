// anvil's OpenMP default (Note [Bounded OpenMP spinning]): without any
// environment variable libgomp spins for a bounded time on a quiet machine
// and sleeps at once on a busy one or with more threads than CPUs; a user's
// OMP_WAIT_POLICY stands. Checked in child processes, since libgomp reads
// the policy once, when it is loaded.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>

#include "anvil/anvil.h"
#include "backends/cpu/openmp_defaults.h"

namespace {

std::string self_path() {
  std::array<char, 4096> buf{};
  const ssize_t n = readlink("/proc/self/exe", buf.data(), buf.size() - 1);
  return n > 0 ? std::string(buf.data(), static_cast<std::size_t>(n)) : std::string();
}

// Runs this test binary's Child test under `env_prefix`; returns its output.
std::string run_child(const std::string& env_prefix) {
  const std::string cmd = "env -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT " + env_prefix + " OMP_DISPLAY_ENV=verbose '" +
                          self_path() + "' --gtest_filter=OpenMPChild.Report 2>&1";
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return out;
  std::array<char, 512> line{};
  while (fgets(line.data(), static_cast<int>(line.size()), p) != nullptr) out += line.data();
  pclose(p);
  return out;
}

}  // namespace

TEST(OpenMPChild, Report) {
  // Touch the pool so libgomp is in use, then report what anvil decided.
  const anvil::Tensor x = anvil::ones({1 << 20});
  // The spin count from libanvil's own dependency: linking it here would
  // change the order the loader initialises it and libgomp in.
  using Query = AnvilOpenmpWaitPolicy (*)();
  const auto query = reinterpret_cast<Query>(dlsym(RTLD_DEFAULT, "anvil_openmp_wait_policy"));
  ASSERT_NE(query, nullptr);
  const anvil::ParallelCosts c = anvil::parallel_costs();
  std::printf("sum=%g defaulted=%d policy=%s spin_count=%ld reason=%s\n", x.sum().item<double>(),
              anvil::openmp_wait_policy_defaulted() ? 1 : 0, c.wait_policy.c_str(), query().spin_count,
              c.wait_reason.c_str());
}

TEST(OpenMP, AnvilBoundsTheSpinOnAQuietMachine) {
  const std::string out = run_child("");
  EXPECT_NE(out.find("defaulted=1"), std::string::npos) << out;
  EXPECT_NE(out.find("sum=1.04858e+06"), std::string::npos) << out;
  // libgomp shows the spin count it started with: anvil's, or 0 (passive).
  // Which one depends on the runnable threads when the child started, as the reason says.
  if (out.find("reason=quiet: ") != std::string::npos) {
    const std::size_t at = out.find("spin_count=");
    ASSERT_NE(at, std::string::npos) << out;
    const long count = std::atol(out.c_str() + at + 11);
    EXPECT_GT(count, 0) << out;
    EXPECT_NE(out.find("GOMP_SPINCOUNT = '" + std::to_string(count) + "'"), std::string::npos) << out;
    EXPECT_NE(out.find("policy=spin 200 us"), std::string::npos) << out;
  } else {
    EXPECT_NE(out.find("reason=busy: "), std::string::npos) << out;
    EXPECT_NE(out.find("GOMP_SPINCOUNT = '0'"), std::string::npos) << out;
    EXPECT_NE(out.find("policy=passive"), std::string::npos) << out;
  }
}

TEST(OpenMP, MoreThreadsThanCpusSleepAtOnce) {
  const std::string threads = std::to_string(std::thread::hardware_concurrency() + 1);
  const std::string out = run_child("OMP_NUM_THREADS=" + threads);
  EXPECT_NE(out.find("GOMP_SPINCOUNT = '0'"), std::string::npos) << out;
  EXPECT_NE(out.find("policy=passive spin_count=0 reason=" + threads + " threads on "), std::string::npos) << out;
}

TEST(OpenMP, TheUsersPolicyStands) {
  const std::string out = run_child("OMP_WAIT_POLICY=active");
  EXPECT_EQ(out.find("GOMP_SPINCOUNT = '0'"), std::string::npos) << out;
  EXPECT_NE(out.find("defaulted=0 policy=yours spin_count=0 reason=OMP_WAIT_POLICY=active"), std::string::npos) << out;
}

// The decision itself, from given inputs: nothing timed, nothing read.
namespace {
AnvilOpenmpWaitPolicy decide(const char* policy, const char* spin, const char* threads, int cpus, int others) {
  using Decide = AnvilOpenmpWaitPolicy (*)(const char*, const char*, const char*, int, int, double);
  const auto fn = reinterpret_cast<Decide>(dlsym(RTLD_DEFAULT, "anvil_openmp_decide"));
  if (fn == nullptr) throw std::runtime_error("anvil_openmp_decide is not exported");
  return fn(policy, spin, threads, cpus, others, /*pause_ns=*/20.0);
}
}  // namespace

TEST(OpenMPDecision, QuietSpinsForTwoHundredMicroseconds) {
  const AnvilOpenmpWaitPolicy p = decide(nullptr, nullptr, nullptr, 16, 7);
  EXPECT_TRUE(p.defaulted);
  EXPECT_EQ(p.spin_count, 10000) << "200 us of 20 ns pauses";
  EXPECT_STREQ(p.policy, "spin 200 us");
  EXPECT_STREQ(p.reason, "quiet: 7 other runnable threads on 16 CPUs");
}

TEST(OpenMPDecision, BusySleepsAtOnce) {
  for (const auto& [cpus, others] : {std::pair{16, 8}, std::pair{2, 1}, std::pair{2, 5}}) {
    const AnvilOpenmpWaitPolicy p = decide(nullptr, nullptr, nullptr, cpus, others);
    EXPECT_TRUE(p.defaulted);
    EXPECT_EQ(p.spin_count, 0) << cpus << " CPUs, " << others << " others";
    EXPECT_STREQ(p.policy, "passive");
    EXPECT_EQ(std::string(p.reason).rfind("busy: ", 0), 0u) << p.reason;
  }
  EXPECT_STREQ(decide(nullptr, nullptr, nullptr, 2, 1).reason, "busy: 1 other runnable threads on 2 CPUs");
}

TEST(OpenMPDecision, MoreThreadsThanCpusSleepAtOnce) {
  const AnvilOpenmpWaitPolicy p = decide(nullptr, nullptr, "17", 16, 0);
  EXPECT_STREQ(p.policy, "passive");
  EXPECT_STREQ(p.reason, "17 threads on 16 CPUs");
  EXPECT_STREQ(decide(nullptr, nullptr, "16", 16, 0).policy, "spin 200 us");
}

TEST(OpenMPDecision, UnknownRunnableThreadsSleepAtOnce) {
  const AnvilOpenmpWaitPolicy p = decide(nullptr, nullptr, nullptr, 4, -1);
  EXPECT_STREQ(p.policy, "passive");
  EXPECT_STREQ(p.reason, "no /proc/loadavg");
}

TEST(OpenMPDecision, TheUsersVariablesStand) {
  AnvilOpenmpWaitPolicy p = decide("active", nullptr, nullptr, 2, 0);
  EXPECT_FALSE(p.defaulted);
  EXPECT_STREQ(p.policy, "yours");
  EXPECT_STREQ(p.reason, "OMP_WAIT_POLICY=active");
  p = decide(nullptr, "1000", nullptr, 2, 3);
  EXPECT_FALSE(p.defaulted);
  EXPECT_EQ(p.spin_count, 0);
  EXPECT_STREQ(p.reason, "GOMP_SPINCOUNT=1000");
  EXPECT_STREQ(decide("passive", "0", nullptr, 2, 0).reason, "OMP_WAIT_POLICY=passive GOMP_SPINCOUNT=0");
}
