// anvil's OpenMP default (Note [Passive OpenMP waiting]): without any
// environment variable libgomp runs with a passive wait policy; a user's
// OMP_WAIT_POLICY stands. Checked in child processes, since libgomp reads
// the policy once, when it is loaded.
#include <gtest/gtest.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "anvil/anvil.h"

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
  std::printf("sum=%g defaulted=%d\n", x.sum().item<double>(), anvil::openmp_wait_policy_defaulted() ? 1 : 0);
}

TEST(OpenMP, PassiveWaitingIsTheDefault) {
  const std::string out = run_child("");
  // libgomp shows the policy it saw as its spin count: 0 means passive
  // (the OMP_WAIT_POLICY line re-reads the environment, so it cannot tell).
  EXPECT_NE(out.find("GOMP_SPINCOUNT = '0'"), std::string::npos) << out;
  EXPECT_NE(out.find("defaulted=1"), std::string::npos) << out;
  EXPECT_NE(out.find("sum=1.04858e+06"), std::string::npos) << out;
}

TEST(OpenMP, TheUsersPolicyStands) {
  const std::string out = run_child("OMP_WAIT_POLICY=active");
  EXPECT_EQ(out.find("GOMP_SPINCOUNT = '0'"), std::string::npos) << out;
  EXPECT_NE(out.find("defaulted=0"), std::string::npos) << out;
}
