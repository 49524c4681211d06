// The device backends as loadable modules (Note [Backend modules]): a
// program starts whatever modules and runtimes are missing, runs on what is
// there, and says why the rest is not. Each case runs backend_probe (a
// plain anvil program) with a module layout made in a temporary directory
// and pointed at by ANVIL_BACKEND_PATH.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>
#include <string>

#include "anvil/anvil.h"

namespace {

namespace fs = std::filesystem;
using anvil::DeviceType;

struct Output {
  int status = -1;
  std::string text;                          // stdout and stderr together
  std::map<std::string, std::string> value;  // the probe's key=value lines
};

Output run(const std::string& env, const std::string& program, const std::string& args = "") {
  const std::string cmd = "env " + env + " '" + program + "' " + args + " 2>&1";
  Output r;
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return r;
  std::array<char, 4096> buf{};
  for (std::size_t n; (n = fread(buf.data(), 1, buf.size(), p)) > 0;) r.text.append(buf.data(), n);
  const int w = pclose(p);
  r.status = WIFEXITED(w) ? WEXITSTATUS(w) : -1;
  std::istringstream lines(r.text);
  for (std::string line; std::getline(lines, line);)
    if (const auto eq = line.find('='); eq != std::string::npos) r.value[line.substr(0, eq)] = line.substr(eq + 1);
  return r;
}

Output probe(const std::string& env = "") { return run(env, ANVIL_TEST_PROBE); }

bool has(const std::string& text, const std::string& s) { return text.find(s) != std::string::npos; }

// A fresh directory for one case's modules, removed at the end.
class ModuleDir {
 public:
  ModuleDir() {
    path_ =
        fs::temp_directory_path() / ("anvil-modules-" + std::to_string(getpid()) + "-" + std::to_string(counter_++));
    fs::create_directories(path_);
  }
  ~ModuleDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }
  std::string env() const { return "ANVIL_BACKEND_PATH='" + path_.string() + "'"; }
  void link(const fs::path& module) const { fs::create_symlink(module, path_ / module.filename()); }
  // A copy of `module` in which every `from` is `to` (same length): a
  // dependency renamed so that the loader cannot find it.
  void copy_renaming(const fs::path& module, const std::string& from, const std::string& to) const {
    std::ifstream in(module, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    ASSERT_EQ(from.size(), to.size());
    std::size_t renamed = 0;
    for (std::size_t at = bytes.find(from); at != std::string::npos; at = bytes.find(from, at + to.size()), ++renamed)
      bytes.replace(at, from.size(), to);
    ASSERT_GT(renamed, 0u) << module << " has no " << from;
    std::ofstream(path_ / module.filename(), std::ios::binary) << bytes;
  }

 private:
  fs::path path_;
  static inline int counter_ = 0;
};

// What this process (default layout: modules beside libanvil) sees.
int opencl_here() { return anvil::device_count(DeviceType::OpenCL); }

void expect_cpu_and_opencl_run(const Output& r) {
  EXPECT_EQ(r.status, 0) << r.text;
  EXPECT_EQ(r.value.at("cpu_sum"), "6") << r.text;
  EXPECT_EQ(r.value.at("opencl_count"), std::to_string(opencl_here())) << r.text;
  if (opencl_here() > 0) {
    EXPECT_EQ(r.value.at("opencl_sum"), "6") << r.text;
  }
}

TEST(BackendModules, TheCoreLibraryLinksNoGpuRuntime) {
  // Without CUDA or an OpenCL driver installed the core must still load: it
  // needs none of their libraries (ldd's view of libanvil.so, with every
  // library it pulls in).
  const Output r = run("", "/usr/bin/env", "ldd '" + std::string(ANVIL_TEST_CORE_LIBRARY) + "'");
  if (r.status != 0) GTEST_SKIP() << "ldd is not available: " << r.text;
  for (const char* lib : {"libcuda.so", "libcublas", "libnvrtc", "libcudart", "libclblast"})
    EXPECT_FALSE(has(r.text, lib)) << "libanvil.so needs " << lib << ":\n" << r.text;
  // The OpenCL ICD loader: Debian's oneDNN (the CPU convolution, a required
  // dependency) loads it for itself and its package installs it; with no
  // driver it finds no platform. libanvil.so itself must not ask for it
  // (readelf's view: its own NEEDED entries).
  const Output needed = run("", "/usr/bin/env", "readelf -d '" + std::string(ANVIL_TEST_CORE_LIBRARY) + "'");
  if (needed.status != 0) GTEST_SKIP() << "readelf is not available: " << needed.text;
  EXPECT_TRUE(has(needed.text, "libdnnl")) << needed.text;
  EXPECT_FALSE(has(needed.text, "libOpenCL")) << "libanvil.so needs libOpenCL:\n" << needed.text;
}

TEST(BackendModules, BesideTheCoreLibraryTheyLoad) {
  const Output r = probe();
  expect_cpu_and_opencl_run(r);
#ifdef ANVIL_WITH_OPENCL
  EXPECT_FALSE(has(r.value.at("opencl_reason"), "backend module")) << r.text;
#endif
#ifdef ANVIL_WITH_CUDA
  // No GPU here: the reason is the driver's, not a missing module.
  EXPECT_FALSE(has(r.value.at("cuda_reason"), "backend module")) << r.text;
#else
  EXPECT_TRUE(has(r.value.at("cuda_reason"), "not compiled into this build")) << r.text;
#endif
}

TEST(BackendModules, WithoutAnyModuleTheCpuRunsAndBothSayWhy) {
  const ModuleDir dir;
  const Output r = probe(dir.env());
  ASSERT_EQ(r.status, 0) << r.text;
  EXPECT_EQ(r.value.at("cpu_sum"), "6") << r.text;
  EXPECT_EQ(r.value.at("opencl_count"), "0") << r.text;
  EXPECT_EQ(r.value.at("cuda_count"), "0") << r.text;
  EXPECT_EQ(r.value.at("try_gpu"), "cpu") << r.text;
#ifdef ANVIL_WITH_OPENCL
  EXPECT_TRUE(has(r.value.at("opencl_reason"), "libanvil_backend_opencl.so was not found")) << r.text;
  EXPECT_TRUE(has(r.value.at("opencl_reason"), dir.path().string())) << r.text;
  EXPECT_TRUE(has(r.value.at("try_gpu_reason"), "opencl: the opencl backend module")) << r.text;
#endif
}

#if defined(ANVIL_WITH_CUDA) && defined(ANVIL_WITH_OPENCL)

TEST(BackendModules, AMissingCudaModuleIsAReasonAndOpenclStillRuns) {
  const ModuleDir dir;
  dir.link(ANVIL_TEST_OPENCL_MODULE);
  const Output r = probe(dir.env());
  expect_cpu_and_opencl_run(r);
  EXPECT_EQ(r.value.at("cuda_count"), "0") << r.text;
  const std::string reason = r.value.at("cuda_reason");
  EXPECT_TRUE(has(reason, "libanvil_backend_cuda.so was not found")) << r.text;
  EXPECT_TRUE(has(reason, "ANVIL_BACKEND_PATH")) << r.text;  // the way out
  EXPECT_TRUE(has(r.value.at("try_gpu_reason"), "cuda: " + reason)) << r.text;
  // cuda:0 is a device that does not exist (with the reason), not a build
  // without CUDA.
  EXPECT_TRUE(has(r.value.at("cuda_error"), "does not exist")) << r.text;
  EXPECT_TRUE(has(r.value.at("cuda_error"), reason)) << r.text;

  // anvil-smi says the same on its "why no devices" line.
  const Output smi = run(dir.env(), ANVIL_TEST_SMI);
  EXPECT_EQ(smi.status, 0) << smi.text;
  EXPECT_TRUE(has(smi.text, "cuda: no devices — " + reason)) << smi.text;
}

TEST(BackendModules, ACudaModuleWhoseToolkitDoesNotLoadIsDlerrorsReason) {
  // As on a machine without the CUDA toolkit: the module is there but its
  // cuBLAS is not (renamed in this copy, so ld.so.cache cannot find it).
  const ModuleDir dir;
  dir.link(ANVIL_TEST_OPENCL_MODULE);
  dir.copy_renaming(ANVIL_TEST_CUDA_MODULE, "libcublas.so", "libabsent.so");
  const Output r = probe(dir.env());
  expect_cpu_and_opencl_run(r);
  EXPECT_EQ(r.value.at("cuda_count"), "0") << r.text;
  const std::string reason = r.value.at("cuda_reason");
  EXPECT_TRUE(has(reason, (dir.path() / "libanvil_backend_cuda.so").string() + " did not load")) << r.text;
  EXPECT_TRUE(has(reason, "libabsent.so")) << r.text;  // dlerror's text names the missing library
  EXPECT_TRUE(has(reason, "cannot open shared object file")) << r.text;
  EXPECT_TRUE(has(r.value.at("try_gpu_reason"), "cuda: " + reason)) << r.text;
}

TEST(BackendModules, AModuleBuiltAgainstAnotherBackendInterfaceIsRefused) {
  // As a module left from an older build: its fingerprint of core/backend.h
  // is not this libanvil's, so the registry never calls its init.
  const std::string abi = ANVIL_TEST_BACKEND_ABI, stale(abi.size(), '0');
  ASSERT_NE(abi, stale);
  const ModuleDir dir;
  dir.link(ANVIL_TEST_OPENCL_MODULE);
  dir.copy_renaming(ANVIL_TEST_CUDA_MODULE, abi, stale);
  const Output r = probe(dir.env());
  expect_cpu_and_opencl_run(r);
  EXPECT_EQ(r.value.at("cuda_count"), "0") << r.text;
  const std::string reason = r.value.at("cuda_reason");
  EXPECT_TRUE(has(reason, (dir.path() / "libanvil_backend_cuda.so").string() + " was built against another libanvil"))
      << r.text;
  EXPECT_TRUE(has(reason, "backend interface " + stale + ", this libanvil's " + abi)) << r.text;
  EXPECT_TRUE(has(reason, "rebuild it")) << r.text;
}

#endif

}  // namespace
