// cuDNN in the CUDA backend (issue 30): the loader, the switches of
// anvil/backends.h, and on cuda:N convolution and batch norm through cuDNN
// against the generic paths (im2col + cuBLAS, norm.kern), and TF32 held to
// its tolerance.
//
// Without a GPU (CI) the loader still runs for real: cuDNN 9 ships with the
// CUDA toolkit here and dlopen needs no driver, so load_cudnn() must load it
// and report its version; ANVIL_CUDNN=0 and a bogus ANVIL_CUDNN_LIBRARY must
// say why not (in a child process: the library loads once per process). The
// cuda:N cases skip without a GPU; ANVIL_REQUIRE_DEVICES=cuda turns those
// skips into failures.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "anvil/anvil.h"
#include "anvil/backends.h"
#include "device_test.h"
#include "env_guard.h"

#ifdef ANVIL_WITH_CUDA
#include "backends/cuda/cudnn_api.h"
#endif

namespace {

using namespace anvil;

// Child mode: with ANVIL_TEST_CUDNN_CHILD set, the process prints what anvil
// says about cuDNN and exits before any test runs (the parent sets the
// environment the loader reads once per process).
[[maybe_unused]] const bool child_mode = [] {
  if (std::getenv("ANVIL_TEST_CUDNN_CHILD") == nullptr) return false;
  std::printf("available=%d version=%d status=%s\n", backends::cudnn::is_available() ? 1 : 0,
              backends::cudnn::version(), backends::cudnn::status().c_str());
  std::fflush(stdout);
  std::_Exit(0);
}();

// This executable run as a child with `env` ("NAME=value ..."), its output.
std::string run_child(const std::string& env) {
  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return "readlink failed";
  self[n] = '\0';
  const std::string cmd = "env " + env + " ANVIL_TEST_CUDNN_CHILD=1 '" + std::string(self) + "' 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return "popen failed";
  std::string out;
  char buf[512];
  while (std::fgets(buf, sizeof buf, p) != nullptr) out += buf;
  pclose(p);
  return out;
}

// Restores every switch of anvil/backends.h at scope exit.
struct SwitchesGuard {
  bool enabled = backends::cudnn::enabled(), tf32 = backends::cudnn::allow_tf32(),
       benchmark = backends::cudnn::benchmark();
  std::string precision = float32_matmul_precision();
  ~SwitchesGuard() {
    backends::cudnn::set_enabled(enabled);
    backends::cudnn::set_allow_tf32(tf32);
    backends::cudnn::set_benchmark(benchmark);
    set_float32_matmul_precision(precision);
  }
};

TEST(CudnnSwitches, DefaultsArePyTorchs) {
  // The environment of the test run may set them; the defaults are what an
  // unset environment gives.
  for (const char* v :
       {"ANVIL_CUDNN", "ANVIL_CUDNN_ALLOW_TF32", "ANVIL_CUDNN_BENCHMARK", "ANVIL_FLOAT32_MATMUL_PRECISION"})
    if (std::getenv(v) != nullptr) GTEST_SKIP() << v << " is set";
  EXPECT_TRUE(backends::cudnn::enabled());
  EXPECT_TRUE(backends::cudnn::allow_tf32());
  EXPECT_FALSE(backends::cudnn::benchmark());
  EXPECT_FALSE(backends::cuda::matmul::allow_tf32());
  EXPECT_EQ(float32_matmul_precision(), "highest");
}

TEST(CudnnSwitches, MatmulPrecisionAndAllowTf32AreOneSetting) {
  SwitchesGuard guard;
  set_float32_matmul_precision("high");
  EXPECT_TRUE(backends::cuda::matmul::allow_tf32());
  set_float32_matmul_precision("medium");
  EXPECT_TRUE(backends::cuda::matmul::allow_tf32());
  EXPECT_EQ(float32_matmul_precision(), "medium");
  backends::cuda::matmul::set_allow_tf32(false);
  EXPECT_EQ(float32_matmul_precision(), "highest");
  backends::cuda::matmul::set_allow_tf32(true);
  EXPECT_EQ(float32_matmul_precision(), "high");
  try {
    set_float32_matmul_precision("fast");
    FAIL() << "no ValueError";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("expected \"highest\", \"high\" or \"medium\", got \"fast\""),
              std::string::npos)
        << e.what();
  }
  backends::cudnn::set_allow_tf32(false);
  EXPECT_FALSE(backends::cudnn::allow_tf32());
  backends::cudnn::set_benchmark(true);
  EXPECT_TRUE(backends::cudnn::benchmark());
}

#ifdef ANVIL_WITH_CUDA

// Note [Finding cuDNN]: where the dynamic loader finds libcudnn.so.9, anvil
// loads it (no driver needed) and reports cuDNN 9.
TEST(CudnnLoader, LoadsCudnn9WhereTheLoaderFindsIt) {
  if (std::getenv("ANVIL_CUDNN") != nullptr || std::getenv("ANVIL_CUDNN_LIBRARY") != nullptr)
    GTEST_SKIP() << "ANVIL_CUDNN or ANVIL_CUDNN_LIBRARY is set";
  void* raw = dlopen("libcudnn.so.9", RTLD_NOW | RTLD_LOCAL);
  std::string why;
  const cuda::CudnnApi* api = cuda::load_cudnn(&why);
  if (raw == nullptr) {
    EXPECT_EQ(api, nullptr);
    EXPECT_NE(why.find("libcudnn.so.9 could not be loaded: "), std::string::npos) << why;
    EXPECT_FALSE(backends::cudnn::is_available());
    GTEST_SKIP() << "no libcudnn.so.9 on this machine: " << why;
  }
  ASSERT_NE(api, nullptr) << why;
  EXPECT_TRUE(why.empty()) << why;
  EXPECT_GE(api->version, 90000u);
  EXPECT_EQ(api->cudnnGetVersion(), api->version);
  EXPECT_NE(api->path.find("libcudnn.so.9"), std::string::npos) << api->path;
  EXPECT_NE(api->cudnnRNNForward, nullptr);  // the recurrent layers' symbols are bound too
  EXPECT_TRUE(backends::cudnn::is_available());
  EXPECT_EQ(backends::cudnn::version(), static_cast<int>(api->version));
  const std::string status = backends::cudnn::status();
  EXPECT_EQ(status.rfind("cuDNN 9.", 0), 0u) << status;
  EXPECT_NE(status.find(api->path), std::string::npos) << status;
  dlclose(raw);
}

TEST(CudnnLoader, OffByEnvironmentSaysSo) {
  const std::string out = run_child("ANVIL_CUDNN=0");
  EXPECT_NE(out.find("available=0 version=0 status="), std::string::npos) << out;
  EXPECT_NE(out.find("ANVIL_CUDNN=0"), std::string::npos) << out;
}

TEST(CudnnLoader, ABogusLibrarySaysWhy) {
  const std::string missing = run_child("ANVIL_CUDNN_LIBRARY=/nonexistent/libcudnn.so.9");
  EXPECT_NE(missing.find("available=0"), std::string::npos) << missing;
  EXPECT_NE(missing.find("/nonexistent/libcudnn.so.9 could not be loaded (ANVIL_CUDNN_LIBRARY): "), std::string::npos)
      << missing;
  // A library that loads but is not cuDNN: the first symbol it lacks.
  Dl_info info{};
  ASSERT_NE(dladdr(reinterpret_cast<void*>(&::cos), &info), 0);
  const std::string libm = info.dli_fname;
  const std::string wrong = run_child("ANVIL_CUDNN_LIBRARY=" + libm);
  EXPECT_NE(wrong.find("available=0"), std::string::npos) << wrong;
  EXPECT_NE(wrong.find(libm + " has no cudnnGetVersion"), std::string::npos) << wrong;
}

// Every cuDNN call goes through ANVIL_CUDNN_CHECK: the call, cuDNN's status
// name, file:line and the device. Without a driver cudnnCreate fails, which
// is a real failure to report; with one, a null descriptor is.
TEST(CudnnLoader, TheCheckMacroNamesTheCallTheStatusAndTheDevice) {
  const cuda::CudnnApi* api = cuda::load_cudnn(nullptr);
  if (api == nullptr) GTEST_SKIP() << backends::cudnn::status();
  try {
    ANVIL_CUDNN_CHECK("cuda:7", api->cudnnSetTensor4dDescriptorEx(nullptr, CUDNN_DATA_FLOAT, 1, 1, 1, 1, 1, 1, 1, 1));
    FAIL() << "no error";
  } catch (const BackendError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("cudnnSetTensor4dDescriptorEx(nullptr"), std::string::npos) << m;
    EXPECT_NE(m.find("CUDNN_STATUS_BAD_PARAM"), std::string::npos) << m;
    EXPECT_NE(m.find(" on cuda:7 at "), std::string::npos) << m;
    EXPECT_NE(m.find("test_cudnn.cpp:"), std::string::npos) << m;
  }
}

// ---- on cuda:N ---------------------------------------------------------------------

int cuda_count() { return device_count(DeviceType::CUDA); }

#define ANVIL_REQUIRE_CUDNN()                                                                                    \
  do {                                                                                                           \
    if (cuda_count() == 0) {                                                                                     \
      const std::string why = "needs a CUDA device; " + device_unavailable_reason(DeviceType::CUDA);             \
      if (anvil::testing::required_device_types().count(DeviceType::CUDA)) FAIL() << why;                        \
      GTEST_SKIP() << why;                                                                                       \
    }                                                                                                            \
    ASSERT_TRUE(backends::cudnn::is_available()) << "a CUDA device but no cuDNN: " << backends::cudnn::status(); \
  } while (0)

std::vector<float> values(const Tensor& t) { return t.detach().to(f32).cpu().contiguous().to_vector<float>(); }

// max |a - b| / max(max |b|, 1e-3), and the element count must agree.
double relative_error(const Tensor& a, const Tensor& b) {
  const std::vector<float> x = values(a), y = values(b);
  EXPECT_EQ(x.size(), y.size());
  double diff = 0, scale = 1e-3;
  for (std::size_t i = 0; i < std::min(x.size(), y.size()); ++i) {
    diff = std::max(diff, std::abs(static_cast<double>(x[i]) - y[i]));
    scale = std::max(scale, std::abs(static_cast<double>(y[i])));
  }
  return diff / scale;
}

struct ConvCase {
  const char* name;
  std::int64_t n, c, h, w, o, k;
  std::array<std::int64_t, 2> stride, padding, dilation;
  std::int64_t groups;
  bool bias, channels_last;
  bool weight_channels_last = false;
};

const ConvCase kConvCases[] = {
    {"3x3 pad 1", 4, 16, 12, 12, 32, 3, {1, 1}, {1, 1}, {1, 1}, 1, true, false},
    {"stride 2 no bias", 3, 8, 15, 13, 16, 3, {2, 2}, {1, 1}, {1, 1}, 1, false, false},
    {"1x1 stride 2", 2, 32, 8, 8, 64, 1, {2, 2}, {0, 0}, {1, 1}, 1, true, false},
    {"dilation 2", 2, 6, 14, 14, 10, 3, {1, 1}, {2, 2}, {2, 2}, 1, true, false},
    {"groups 4", 2, 16, 10, 10, 24, 3, {1, 2}, {1, 0}, {1, 1}, 4, true, false},
    {"depthwise", 2, 12, 9, 9, 12, 5, {1, 1}, {2, 2}, {1, 1}, 12, false, false},
    {"7x7 stride 2 (ResNet stem)", 2, 3, 32, 32, 16, 7, {2, 2}, {3, 3}, {1, 1}, 1, false, false},
    {"channels-last input", 2, 16, 10, 10, 16, 3, {1, 1}, {1, 1}, {1, 1}, 1, true, true},
    {"channels-last weight", 2, 8, 9, 9, 16, 3, {1, 1}, {1, 1}, {1, 1}, 1, true, false, true},
    {"channels-last input and weight", 2, 8, 9, 9, 16, 3, {2, 2}, {1, 1}, {1, 1}, 1, false, true, true},
    // A dim of size 1 makes a tensor NCHW and channels-last at once: these
    // stay NCHW in cuDNN (LeNet's one-channel first layer; a 1x1 map).
    {"one channel (LeNet's first layer)", 4, 1, 28, 28, 6, 5, {1, 1}, {2, 2}, {1, 1}, 1, true, false},
    {"one channel, channels-last", 2, 1, 12, 12, 8, 3, {1, 1}, {1, 1}, {1, 1}, 1, true, true, true},
    {"1x1 map, 1x1 filter", 4, 32, 1, 1, 16, 1, {1, 1}, {0, 0}, {1, 1}, 1, true, false},
    {"1x1 map, channels-last", 4, 32, 1, 1, 16, 1, {1, 1}, {0, 0}, {1, 1}, 1, false, true, true},
};

struct ConvResult {
  Tensor out, gx, gw, gb;
};

ConvResult run_conv(const ConvCase& c, Device d, DType t, bool cudnn) {
  backends::cudnn::set_enabled(cudnn);
  manual_seed(7);
  Tensor x = randn({c.n, c.c, c.h, c.w}, d).to(t);
  if (c.channels_last) x = x.permute({0, 2, 3, 1}).contiguous().permute({0, 3, 1, 2});
  Tensor w = (randn({c.o, c.c / c.groups, c.k, c.k}, d) * 0.2).to(t);
  if (c.weight_channels_last) w = w.permute({0, 2, 3, 1}).contiguous().permute({0, 3, 1, 2});
  Tensor b = c.bias ? randn({c.o}, d).to(t) : Tensor{};
  x.requires_grad_();
  w.requires_grad_();
  if (c.bias) b.requires_grad_();
  Tensor out = conv2d(x, w, b, c.stride, c.padding, c.dilation, c.groups);
  Tensor g = randn(out.shape(), d).to(t);
  out.backward(g);
  ConvResult r{out.detach(), x.grad(), w.grad(), c.bias ? b.grad() : Tensor{}};
  synchronize(d);
  return r;
}

// cuDNN against im2col + cuBLAS, strict f32 on both sides (TF32 off), and
// the 16-bit dtypes to their rounding.
TEST(CudnnConv, MatchesIm2colForEveryGeometryAndDtype) {
  ANVIL_REQUIRE_CUDNN();
  SwitchesGuard guard;
  backends::cudnn::set_allow_tf32(false);
  set_float32_matmul_precision("highest");
  const Device d("cuda:0");
  for (DType t : {f32, f16, bf16}) {
    const double tol = t == f32 ? 1e-4 : t == f16 ? 1e-2 : 4e-2;
    for (const ConvCase& c : kConvCases) {
      SCOPED_TRACE(std::string(c.name) + " " + std::string(to_string(t)));
      const std::uint64_t plans = cuda::cudnn_conv_plans_made();
      ConvResult fast;
      try {
        fast = run_conv(c, d, t, true);
      } catch (const std::exception& e) {
        ADD_FAILURE() << e.what();
        continue;
      }
      EXPECT_GE(cuda::cudnn_conv_plans_made(), plans + 3) << "cuDNN was not used for all three directions";
      const ConvResult ref = run_conv(c, d, t, false);
      EXPECT_LE(relative_error(fast.out, ref.out), tol);
      EXPECT_LE(relative_error(fast.gx, ref.gx), tol);
      EXPECT_LE(relative_error(fast.gw, ref.gw), tol);
      if (c.bias) {
        EXPECT_LE(relative_error(fast.gb, ref.gb), tol);
      }
    }
  }
}

// f64 is NCHW in cuDNN, as PyTorch keeps it (conv2d_dnn_takes): an NCHW f64
// convolution goes to cuDNN, a channels-last one to the generic path, which
// keeps its layout, and the two agree.
TEST(CudnnConv, F64ChannelsLastTakesTheGenericPath) {
  ANVIL_REQUIRE_CUDNN();
  SwitchesGuard guard;
  const Device d("cuda:0");
  const ConvCase nchw{"f64", 2, 8, 9, 9, 16, 3, {1, 1}, {1, 1}, {1, 1}, 1, true, false, false};
  const ConvCase nhwc{"f64 channels-last", 2, 8, 9, 9, 16, 3, {1, 1}, {1, 1}, {1, 1}, 1, true, true, true};
  std::uint64_t plans = cuda::cudnn_conv_plans_made();
  const ConvResult dnn = run_conv(nchw, d, f64, true);
  EXPECT_GE(cuda::cudnn_conv_plans_made(), plans + 3) << "NCHW f64 did not go to cuDNN";
  plans = cuda::cudnn_conv_plans_made();
  const ConvResult generic = run_conv(nhwc, d, f64, true);
  EXPECT_EQ(cuda::cudnn_conv_plans_made(), plans) << "channels-last f64 went to cuDNN";
  EXPECT_TRUE(generic.out.is_contiguous(MemoryFormat::ChannelsLast));
  EXPECT_LE(relative_error(generic.out, dnn.out), 1e-6);
  EXPECT_LE(relative_error(generic.gx, dnn.gx), 1e-6);
  EXPECT_LE(relative_error(generic.gw, dnn.gw), 1e-6);
}

// The second call of a geometry reuses its plan; a new geometry makes one;
// benchmark mode makes its own plans (timed) with the same results.
TEST(CudnnConv, PlansAreCachedPerGeometry) {
  ANVIL_REQUIRE_CUDNN();
  SwitchesGuard guard;
  backends::cudnn::set_enabled(true);
  const Device d("cuda:0");
  const Tensor x = randn({2, 8, 11, 11}, d), w = randn({8, 8, 3, 3}, d);
  (void)conv2d(x, w, {}, {1, 1}, {1, 1});
  const std::uint64_t after_first = cuda::cudnn_conv_plans_made();
  const Tensor again = conv2d(x, w, {}, {1, 1}, {1, 1});
  EXPECT_EQ(cuda::cudnn_conv_plans_made(), after_first);
  (void)conv2d(x, w, {}, {1, 1}, {0, 0});
  EXPECT_EQ(cuda::cudnn_conv_plans_made(), after_first + 1);
  backends::cudnn::set_benchmark(true);
  const Tensor timed = conv2d(x, w, {}, {1, 1}, {1, 1});
  EXPECT_EQ(cuda::cudnn_conv_plans_made(), after_first + 2);
  EXPECT_LE(relative_error(timed, again), 2e-3);  // TF32 may differ between algorithms
}

// The switch decides at dispatch: a convolution cuDNN ran forward takes its
// gradient from cuDNN too, even after set_enabled(false).
TEST(CudnnConv, SwitchingOffBetweenForwardAndBackward) {
  ANVIL_REQUIRE_CUDNN();
  SwitchesGuard guard;
  backends::cudnn::set_enabled(true);
  const Device d("cuda:0");
  Tensor x = randn({2, 4, 8, 8}, d).requires_grad_(), w = randn({6, 4, 3, 3}, d).requires_grad_();
  Tensor out = conv2d(x, w, {}, {1, 1}, {1, 1});
  backends::cudnn::set_enabled(false);
  out.sum().backward();
  Tensor x2 = x.detach().requires_grad_(), w2 = w.detach().requires_grad_();
  conv2d(x2, w2, {}, {1, 1}, {1, 1}).sum().backward();  // im2col now
  EXPECT_LE(relative_error(x.grad(), x2.grad()), 2e-3);
  EXPECT_LE(relative_error(w.grad(), w2.grad()), 2e-3);
}

// TF32 (on by default for convolutions, as in PyTorch): within TF32's
// tolerance of strict f32 (10-bit mantissa inputs: ~2^-11 relative per
// product, f32 accumulation); off, strict f32 to f32's rounding.
TEST(CudnnConv, Tf32StaysWithinItsTolerance) {
  ANVIL_REQUIRE_CUDNN();
  SwitchesGuard guard;
  backends::cudnn::set_enabled(true);
  const Device d("cuda:0");
  manual_seed(3);
  const Tensor x = randn({8, 64, 16, 16}, d), w = randn({64, 64, 3, 3}, d) * 0.05;
  const Tensor x64 = x.cpu().to(f64), w64 = w.cpu().to(f64);
  const Tensor ref = conv2d(x64, w64, {}, {1, 1}, {1, 1});
  backends::cudnn::set_allow_tf32(true);
  const double tf32 = relative_error(conv2d(x, w, {}, {1, 1}, {1, 1}), ref);
  backends::cudnn::set_allow_tf32(false);
  const double strict = relative_error(conv2d(x, w, {}, {1, 1}, {1, 1}), ref);
  EXPECT_LE(tf32, 5e-3);
  EXPECT_LE(strict, 1e-5);
  std::printf("conv2d [8, 64, 16, 16] * [64, 64, 3, 3]: TF32 relative error %.2e, strict f32 %.2e\n", tf32, strict);
}

// Matmul is strict f32 unless asked (PyTorch's default since 1.12).
TEST(CudaTf32, MatmulOnlyWhenAsked) {
  ANVIL_REQUIRE_CUDNN();
  SwitchesGuard guard;
  const Device d("cuda:0");
  manual_seed(5);
  const Tensor a = randn({512, 512}, d), b = randn({512, 512}, d);
  const Tensor ref = matmul(a.cpu().to(f64), b.cpu().to(f64));
  set_float32_matmul_precision("highest");
  const double strict = relative_error(matmul(a, b), ref);
  set_float32_matmul_precision("high");
  const double tf32 = relative_error(matmul(a, b), ref);
  EXPECT_LE(strict, 1e-5);
  EXPECT_LE(tf32, 5e-3);
  EXPECT_GT(tf32, strict) << "set_float32_matmul_precision(\"high\") did not reach cuBLAS";
  std::printf("matmul 512^3: TF32 relative error %.2e, strict f32 %.2e\n", tf32, strict);
}

struct NormResult {
  Tensor y, rm, rv, gx, gw, gb;
};

NormResult run_norm(Device d, bool cudnn, bool training, bool affine, bool input_grad, const Shape& shape,
                    DType t = f32) {
  backends::cudnn::set_enabled(cudnn);
  // cuDNN's batch norm is asked for (norm.kern is the default on CUDA too).
  const anvil::testing::EnvGuard ask("ANVIL_CUDNN_BATCH_NORM", cudnn ? "1" : nullptr);
  manual_seed(11);
  const std::int64_t c = shape[1];
  Tensor x = (randn(shape, d) * 3.0 + 1.5).to(t);
  Tensor w = affine ? randn({c}, d) : Tensor{}, b = affine ? randn({c}, d) : Tensor{};
  Tensor rm = randn({c}, d), rv = rand({c}, d) + 0.5;
  if (input_grad) x.requires_grad_();
  if (affine) {
    w.requires_grad_();
    b.requires_grad_();
  }
  Tensor y = batch_norm(x, rm, rv, w, b, training, 0.1, 1e-5);
  Tensor g = randn(shape, d).to(t);
  if (input_grad || affine) y.backward(g);
  NormResult r{
      y.detach(), rm, rv, input_grad ? x.grad() : Tensor{}, affine ? w.grad() : Tensor{}, affine ? b.grad() : Tensor{}};
  synchronize(d);
  return r;
}

// cuDNN's batch norm against norm.kern: output, running statistics
// (PyTorch's momentum, unbiased running variance) and gradients.
TEST(CudnnBatchNorm, MatchesTheGenericKernels) {
  ANVIL_REQUIRE_CUDNN();
  SwitchesGuard guard;
  const Device d("cuda:0");
  const Shape shapes[] = {{8, 16, 7, 7}, {32, 4, 3, 5}, {64, 10}};
  for (const Shape& shape : shapes)
    for (bool training : {true, false})
      for (bool affine : {true, false})
        for (bool input_grad : {true, false}) {
          if (!affine && !input_grad) continue;
          std::ostringstream what;
          what << shape << (training ? " train" : " eval") << (affine ? " affine" : "")
               << (input_grad ? " input grad" : "");
          SCOPED_TRACE(what.str());
          const NormResult fast = run_norm(d, true, training, affine, input_grad, shape);
          const NormResult ref = run_norm(d, false, training, affine, input_grad, shape);
          EXPECT_LE(relative_error(fast.y, ref.y), 1e-5);
          EXPECT_LE(relative_error(fast.rm, ref.rm), 1e-5);
          EXPECT_LE(relative_error(fast.rv, ref.rv), 1e-5);
          if (input_grad) {
            EXPECT_LE(relative_error(fast.gx, ref.gx), 1e-4);
          }
          if (affine) {
            EXPECT_LE(relative_error(fast.gw, ref.gw), 1e-4);
            EXPECT_LE(relative_error(fast.gb, ref.gb), 1e-4);
          }
        }
}

// 16-bit inputs with f32 statistics and parameters (autocast's batch norm):
// cuDNN's call against norm.kern's, both rounding an f32 result once.
TEST(CudnnBatchNorm, HalfInputsMatchTheGenericKernels) {
  ANVIL_REQUIRE_CUDNN();
  SwitchesGuard guard;
  const Device d("cuda:0");
  for (const DType t : {f16, bf16})
    for (const Shape& shape : {Shape{8, 16, 7, 7}, Shape{64, 3, 40, 40}}) {
      SCOPED_TRACE(::testing::Message() << t << " " << shape);
      const NormResult fast = run_norm(d, true, true, true, true, shape, t);
      const NormResult ref = run_norm(d, false, true, true, true, shape, t);
      const double tol = t == f16 ? 2e-3 : 1e-2;
      EXPECT_EQ(fast.y.dtype(), t);
      EXPECT_EQ(fast.rm.dtype(), f32);
      EXPECT_LE(relative_error(fast.y, ref.y), tol);
      EXPECT_LE(relative_error(fast.rm, ref.rm), 1e-4);
      EXPECT_LE(relative_error(fast.rv, ref.rv), 1e-4);
      EXPECT_LE(relative_error(fast.gx, ref.gx), tol);
      EXPECT_LE(relative_error(fast.gw, ref.gw), tol);
      EXPECT_LE(relative_error(fast.gb, ref.gb), tol);
    }
}

TEST(CudnnStatus, NamesCudnnOnAGpuMachine) {
  ANVIL_REQUIRE_CUDNN();
  const std::string s = backends::cudnn::status();
  EXPECT_EQ(s.rfind("cuDNN 9.", 0), 0u) << s;
  SwitchesGuard guard;
  backends::cudnn::set_enabled(false);
  EXPECT_EQ(backends::cudnn::status().rfind("off", 0), 0u) << backends::cudnn::status();
}

#endif  // ANVIL_WITH_CUDA

}  // namespace
