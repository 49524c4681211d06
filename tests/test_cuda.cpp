// The CUDA backend without a GPU and with one (issue 6).
//
// Without a GPU (every CI machine): the backend is compiled in, reports no
// devices with the driver's reason, refuses cuda:0 with a clear error, and
// every kernel of src/kernels compiles for CUDA through NVRTC with the same
// defines and symbols the OpenCL backend uses, so the two cannot drift.
// With a GPU, the device tests run; ANVIL_REQUIRE_DEVICES=cuda turns their
// skips into failures (the device-generic suites run on cuda:N as well).
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <set>
#include <thread>

#include "anvil/anvil.h"
#include "device_test.h"

#ifdef ANVIL_WITH_CUDA
#include "backends/common/kernel_specs.h"
#include "backends/cuda/launch.h"
#include "backends/cuda/nvrtc_compile.h"
#endif
#ifdef ANVIL_WITH_OPENCL
#include "backends/opencl/testing.h"
#endif

namespace {

using namespace anvil;

int cuda_count() { return device_count(DeviceType::CUDA); }

// Skips without n CUDA devices. When ANVIL_REQUIRE_DEVICES names cuda, having
// none fails; having fewer than n still skips (most GPU machines have one).
#define ANVIL_REQUIRE_CUDA(n)                                                                                  \
  do {                                                                                                         \
    if (cuda_count() < (n)) {                                                                                  \
      const std::string why = "needs " #n " CUDA device(s), have " + std::to_string(cuda_count()) + "; " +     \
                              device_unavailable_reason(DeviceType::CUDA);                                     \
      if (cuda_count() == 0 && anvil::testing::required_device_types().count(DeviceType::CUDA)) FAIL() << why; \
      GTEST_SKIP() << why;                                                                                     \
    }                                                                                                          \
  } while (0)

TEST(CudaBackend, DeviceStringsParseWhateverIsInstalled) {
  const Device d("cuda:0");
  EXPECT_EQ(d.type(), DeviceType::CUDA);
  EXPECT_EQ(d.index(), 0);
  EXPECT_EQ(Device("cuda:3").str(), "cuda:3");
}

#ifdef ANVIL_WITH_CUDA

TEST(CudaBackend, NoDeviceMeansAReasonAndAFallback) {
  if (cuda_count() > 0) GTEST_SKIP() << "this machine has " << cuda_count() << " CUDA device(s)";
  EXPECT_EQ(cuda_count(), 0);
  const std::string reason = device_unavailable_reason(DeviceType::CUDA);
  EXPECT_FALSE(reason.empty());
  EXPECT_NE(reason.find("cuda"), std::string::npos) << reason;  // names the CUDA error
  // Creating a tensor there names the device, the reason and the way out.
  try {
    (void)ones({2, 3}, Device("cuda:0"));
    FAIL() << "expected DeviceError";
  } catch (const DeviceError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("cuda:0"), std::string::npos) << what;
    EXPECT_NE(what.find(reason), std::string::npos) << what;
    EXPECT_NE(what.find("try_gpu()"), std::string::npos) << what;
  }
  // try_gpu() never picks a CUDA device that is not there, and the library
  // stays usable after the error.
  EXPECT_NE(try_gpu().type(), DeviceType::CUDA);
  for (const Device& d : try_all_gpus()) EXPECT_NE(d.type(), DeviceType::CUDA);
  EXPECT_EQ((ones({2}) + 1).sum().item<float>(), 4.0f);
}

// The dynamic section of the shared object that holds `symbol` ("" when
// readelf, from binutils, is not installed), and that object's path.
std::string dynamic_section_of(const void* symbol, std::string& path) {
  Dl_info info{};
  if (dladdr(symbol, &info) == 0 || info.dli_fname == nullptr) return "";
  path = info.dli_fname;
  FILE* p = popen(("readelf -d '" + path + "' 2>/dev/null").c_str(), "r");
  if (p == nullptr) return "";
  std::string out;
  char buf[512];
  while (std::fgets(buf, sizeof buf, p) != nullptr) out += buf;
  pclose(p);
  return out.find("NEEDED") == std::string::npos ? "" : out;
}

// Note [CUDA without a driver] and Note [Backend modules]: no anvil library
// needs libcuda.so.1, or no anvil program starts on a machine without the
// NVIDIA driver; and libanvil needs no GPU runtime at all, the CUDA module
// carries cuBLAS and NVRTC.
TEST(CudaBackend, TheLibrariesDoNotNeedTheDriverAndTheCoreNoToolkit) {
  std::string core_path;
  const std::string core = dynamic_section_of(reinterpret_cast<const void*>(&anvil::device_count), core_path);
  if (core.empty()) GTEST_SKIP() << "readelf (binutils) is not installed";
  for (const char* lib : {"libcuda.so", "libcublas", "libnvrtc", "libcudart", "libOpenCL", "libclblast"})
    EXPECT_EQ(core.find(lib), std::string::npos) << core_path << " needs " << lib << ":\n" << core;

  std::string module_path;
  const std::string module = dynamic_section_of(reinterpret_cast<const void*>(&cuda::nvrtc_architectures), module_path);
  ASSERT_FALSE(module.empty()) << module_path;
  EXPECT_NE(module_path, core_path);
  EXPECT_NE(module_path.find("libanvil_backend_cuda.so"), std::string::npos) << module_path;
  EXPECT_EQ(module.find("libcuda.so"), std::string::npos) << module_path << " needs the driver:\n" << module;
  EXPECT_NE(module.find("libnvrtc"), std::string::npos) << module;
  EXPECT_NE(module.find("libcublas"), std::string::npos) << module;
}

// Every kernel either device backend can ask for, compiled for CUDA: each
// program (file + defines) once, to PTX for the oldest architecture NVRTC
// supports; every requested symbol must be an entry of it, with arguments
// that cuda::Launch can carry.
TEST(CudaKernels, EveryKernelCompilesForCudaWithTheSameSymbols) {
  std::map<std::string, std::vector<device_common::KernelSpec>> programs;
  for (const device_common::KernelSpec& spec : device_common::all_kernel_specs(true))
    programs[spec.file + "|" + device_common::define_options(spec)].push_back(spec);
  std::vector<const std::vector<device_common::KernelSpec>*> work;
  for (const auto& [key, specs] : programs) work.push_back(&specs);

  const std::vector<int> archs = cuda::nvrtc_architectures();
  ASSERT_FALSE(archs.empty());
  const int arch = archs.front();
  std::atomic<std::size_t> next{0};
  std::mutex mutex;
  std::vector<std::string> failures;
  std::size_t kernels_checked = 0;
  auto worker = [&] {
    for (std::size_t i = next++; i < work.size(); i = next++) {
      const auto& specs = *work[i];
      std::string failure;
      std::size_t checked = 0;
      try {
        const cuda::CompiledProgram p = cuda::compile_program(specs.front(), arch / 10, arch % 10, /*ptx=*/true);
        const std::vector<cuda::PtxEntry> entries = cuda::ptx_entries(p.image);
        for (const device_common::KernelSpec& s : specs) {
          ++checked;
          const auto entry =
              std::find_if(entries.begin(), entries.end(), [&](const cuda::PtxEntry& e) { return e.name == s.name; });
          if (entry == entries.end()) {
            failure += s.name + " is not an entry of " + s.file + " compiled for CUDA; ";
            continue;
          }
          // What cuda::Launch will copy, each argument aligned as it aligns them.
          std::size_t bytes = 0;
          for (std::size_t b : entry->param_bytes) bytes = cuda::Launch::aligned(bytes) + b;
          if (entry->param_bytes.size() > static_cast<std::size_t>(cuda::Launch::kMaxArgs) ||
              bytes > cuda::Launch::kMaxArgBytes)
            failure += s.name + " takes " + std::to_string(entry->param_bytes.size()) + " arguments (" +
                       std::to_string(bytes) + " bytes); cuda::Launch carries at most " +
                       std::to_string(cuda::Launch::kMaxArgs) + " (" + std::to_string(cuda::Launch::kMaxArgBytes) +
                       " bytes); ";
        }
      } catch (const std::exception& e) {
        failure = e.what();
      }
      std::lock_guard lock(mutex);
      kernels_checked += checked;
      if (!failure.empty()) failures.push_back(failure);
    }
  };
  std::vector<std::thread> threads;
  const unsigned n = std::max(2u, std::thread::hardware_concurrency());
  for (unsigned t = 0; t < n; ++t) threads.emplace_back(worker);
  for (std::thread& t : threads) t.join();
  for (const std::string& f : failures) ADD_FAILURE() << f;
  EXPECT_GT(programs.size(), 100u);
  std::printf("compiled %zu programs (%zu kernels) for compute_%d with NVRTC %s\n", programs.size(), kernels_checked,
              arch, cuda::nvrtc_version().c_str());
}

// Note [Vector loads]: a vector kernel loads and stores whole 16-byte
// vectors of its widest operand (a narrower one in a smaller chunk), reads
// through the read-only path (its pointers are restrict), and keeps its
// vectors in registers, never in local memory.
TEST(CudaKernels, VectorKernelsMoveSixteenBytesAtATime) {
  using detail::BinaryOp;
  using device_common::BinaryVariant;
  struct Case {
    device_common::KernelSpec spec;
    const char* load;  // in the kernel's PTX
    const char* store;
  };
  // The loads as 4 x u32; the stores as NVRTC 13 writes them (16, 8 or 4 bytes).
  const Case cases[] = {
      {device_common::BinaryKernel{BinaryOp::Add, DType::F32, DType::F32, DType::F32, BinaryVariant::Dense, {}, true}
           .spec(),
       "ld.global.nc.v4.u32", "st.global.v4.f32"},
      {device_common::BinaryKernel{
           BinaryOp::Mul, DType::BF16, DType::BF16, DType::BF16, BinaryVariant::DenseScalarB, {}, true}
           .spec(),
       "ld.global.nc.v4.u32", "st.global.v4.u32"},
      {device_common::UnaryKernel{detail::UnaryOp::Exp, DType::F16, DType::F16, false, true}.spec(),
       "ld.global.nc.v4.u32", "st.global.v4.u32"},
      {device_common::CopyKernel{DType::F32, DType::F16, false, true}.spec(), "ld.global.nc.v4.u32",
       "st.global.v4.u16"},
      {device_common::BinaryKernel{BinaryOp::Lt, DType::F32, DType::F32, DType::Bool, BinaryVariant::Dense, {}, true}
           .spec(),
       "ld.global.nc.v4.u32", "st.global.u32"},
      {device_common::WhereKernel{DType::F64, DType::F64, DType::F64, false, true}.spec(), "ld.global.nc.v4.u32",
       "st.global.v2.f64"},
  };
  const int arch = cuda::nvrtc_architectures().front();
  for (const Case& c : cases) {
    const cuda::CompiledProgram p = cuda::compile_program(c.spec, arch / 10, arch % 10, /*ptx=*/true);
    const std::string ptx(p.image.c_str());
    const std::size_t begin = ptx.find(".entry " + c.spec.name + "(");
    ASSERT_NE(begin, std::string::npos) << c.spec.name;
    const std::size_t end = ptx.find(".entry ", begin + 1);
    const std::string body = ptx.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
    EXPECT_NE(body.find(c.load), std::string::npos) << c.spec.name << " has no " << c.load << ":\n" << body;
    EXPECT_NE(body.find(c.store), std::string::npos) << c.spec.name << " has no " << c.store << ":\n" << body;
    EXPECT_EQ(body.find(".local"), std::string::npos) << c.spec.name << " uses local memory:\n" << body;
  }
}

// The newest architecture compiles to a CUBIN (ptxas runs too), for a
// family of each kind of kernel: shared memory, structs, doubles, Philox.
TEST(CudaKernels, CubinForTheNewestArchitecture) {
  const int arch = cuda::nvrtc_architectures().back();
  using detail::ReduceOp;
  const device_common::KernelSpec specs[] = {
      device_common::ReduceKernel{ReduceOp::ArgMax, DType::F32, DType::I64, true, false,
                                  device_common::ReduceVariant::PerGroup}
          .spec(),
      device_common::GemmKernel{DType::F64}.spec(),
      device_common::RandomKernel{detail::RandomKind::Normal, DType::F32, true}.spec(),
      device_common::BinaryKernel{detail::BinaryOp::Pow, DType::I32, DType::I32, DType::I32,
                                  device_common::BinaryVariant::Strided}
          .spec(),
      device_common::WindowKernel{detail::FusedOp::MaxPool2d, DType::F32}.spec()};
  for (const device_common::KernelSpec& s : specs) {
    const cuda::CompiledProgram p = cuda::compile_program(s, arch / 10, arch % 10);
    EXPECT_TRUE(p.is_cubin) << s.name;
    EXPECT_EQ(p.target, "sm_" + std::to_string(arch));
    EXPECT_GT(p.image.size(), 1000u) << s.name;
  }
  // A GPU newer than this NVRTC gets PTX for the newest it knows.
  const cuda::CompiledProgram future = cuda::compile_program(specs[1], 99, 0);
  EXPECT_FALSE(future.is_cubin);
  EXPECT_EQ(future.target, "compute_" + std::to_string(arch));
}

// The disk cache: a second process (here: a second call) reads the image
// the first compiled, byte for byte.
TEST(CudaKernels, CompiledImagesAreCachedOnDisk) {
  const std::string dir = ::testing::TempDir() + "anvil-cuda-cache-" + std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  ::setenv("ANVIL_CACHE_DIR", dir.c_str(), 1);
  const device_common::KernelSpec spec = device_common::GemmKernel{DType::F32}.spec();
  const cuda::CompiledProgram first = cuda::compile_program_cached(spec, 8, 0);
  const cuda::CompiledProgram second = cuda::compile_program_cached(spec, 8, 0);
  const cuda::CompiledProgram other = cuda::compile_program_cached(spec, 9, 0);  // another architecture
  ::unsetenv("ANVIL_CACHE_DIR");
  EXPECT_FALSE(first.from_cache);
  EXPECT_TRUE(second.from_cache);
  EXPECT_FALSE(other.from_cache);
  EXPECT_EQ(second.image, first.image);
  EXPECT_EQ(second.target, "sm_80");
  EXPECT_TRUE(second.is_cubin);
  std::size_t files = 0;
  for (const auto& e : std::filesystem::directory_iterator(std::filesystem::path(dir) / "cuda")) {
    EXPECT_EQ(e.path().extension(), ".bin") << e.path();  // no temporary left behind
    ++files;
  }
  EXPECT_EQ(files, 2u);
  // A truncated file (a write cut short) is not trusted: compiled afresh.
  for (const auto& e : std::filesystem::directory_iterator(std::filesystem::path(dir) / "cuda"))
    std::filesystem::resize_file(e.path(), std::filesystem::file_size(e.path()) / 2);
  ::setenv("ANVIL_CACHE_DIR", dir.c_str(), 1);
  const cuda::CompiledProgram again = cuda::compile_program_cached(spec, 8, 0);
  const cuda::CompiledProgram fixed = cuda::compile_program_cached(spec, 8, 0);
  ::unsetenv("ANVIL_CACHE_DIR");
  EXPECT_FALSE(again.from_cache);
  EXPECT_TRUE(fixed.from_cache);
  EXPECT_EQ(fixed.image, first.image);
  std::filesystem::remove_all(dir);
}

#ifdef ANVIL_WITH_OPENCL
// The kernels the OpenCL backend really built while running a workload are
// all among those compiled for CUDA above.
TEST(CudaKernels, EveryKernelTheOpenCLBackendBuiltExistsForCuda) {
  if (device_count(DeviceType::OpenCL) == 0) GTEST_SKIP() << "no OpenCL device to compare with";
  const Device d(DeviceType::OpenCL, 0);
  Tensor x = randn({8, 16}, d), i = arange(0, 4, 1, d, DType::I64);
  Tensor y = relu(exp(x + 2) * x).sum({1}) + amax(x, {1}) + x.argmax(1).to(DType::F32) + x.mean({1});
  Tensor z = index_select(matmul(x, x.t()), 0, i) + where(matmul(x.t(), x) > 0, 1.0, zeros({16, 16}, d)).sum();
  (void)(y.to(DType::I32) / 3).to_vector<std::int32_t>();
  (void)z.to_vector<float>();
  std::set<std::string> cuda_names;
  for (const device_common::KernelSpec& s : device_common::all_kernel_specs(true)) cuda_names.insert(s.name);
  const std::vector<std::string> built = opencl::testing::kernels_built(0);
  EXPECT_GT(built.size(), 8u);
  for (const std::string& name : built) EXPECT_TRUE(cuda_names.count(name)) << name << " has no CUDA twin";
}
#endif

// ---- on a GPU ---------------------------------------------------------------------

TEST(CudaDevice, ComputesWhatTheCpuComputes) {
  ANVIL_REQUIRE_CUDA(1);
  const Device g("cuda:0");
  Tensor a = randn({64, 33}), b = randn({33, 17});
  Tensor want = matmul(a, b).relu().sum({0});
  Tensor got = matmul(a.to(g), b.to(g)).relu().sum({0});
  EXPECT_EQ(got.device(), g);
  EXPECT_TRUE(allclose(got.to(cpu()), want, 1e-4, 1e-4));
  // Philox gives the same bits on every backend.
  manual_seed(7);
  const std::vector<float> cpu = randn({1000}).to_vector<float>();
  manual_seed(7);
  EXPECT_EQ(randn({1000}, g).to_vector<float>(), cpu);
  const DeviceProperties p = properties(g);
  EXPECT_FALSE(p.compute_capability.empty());
  EXPECT_GT(p.compute_units, 0);
}

TEST(CudaDevice, TwoGpusCopyDirectlyOrThroughTheHost) {
  ANVIL_REQUIRE_CUDA(2);
  Tensor x = arange(0, 1000, 1, Device("cuda:0"));
  Tensor y = x.to(Device("cuda:1"));
  EXPECT_EQ(y.device(), Device("cuda:1"));
  EXPECT_EQ(y.to_vector<float>(), x.to_vector<float>());
  EXPECT_THROW((void)(x + y), DeviceMismatch);
}

#else  // no CUDA toolkit at build time

TEST(CudaBackend, NotCompiledInSaysSo) {
  EXPECT_EQ(cuda_count(), 0);
  EXPECT_NE(device_unavailable_reason(DeviceType::CUDA).find("not compiled in"), std::string::npos);
  EXPECT_THROW((void)ones({1}, Device("cuda:0")), NotCompiled);
}

#endif

}  // namespace
