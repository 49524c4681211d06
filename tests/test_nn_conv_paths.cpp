// conv2d's two CPU paths (issue 12): the backend's direct convolution
// (oneDNN, the Conv2d family of fused ops) and im2col + OpenBLAS, which
// ANVIL_CONV_IM2COL=1 forces. On LeNet's and ResNet-18's shapes and on
// stride, padding, dilation, groups and input-layout cases, both give the
// same output and the same gradients of input, weight and bias, and both
// agree with the f64 result. Which path ran is seen through the CPU
// backend's counters (Note [oneDNN convolution in the CPU backend]); so is
// the routing of what the direct path does not take (f64, depthwise, one
// input channel without AVX-512) and its thread choice.
#include <gtest/gtest.h>

#include <cctype>
#include <cstdlib>
#include <initializer_list>
#include <string>
#include <tuple>
#include <vector>

#include "anvil/anvil.h"
#include "backends/cpu/threads.h"

namespace {

using namespace anvil;
namespace cpu_threads = anvil::cpu_backend;

struct Case {
  std::string name;
  Shape x, w;
  std::array<std::int64_t, 2> stride{1, 1}, padding{0, 0}, dilation{1, 1};
  std::int64_t groups = 1;
  bool bias = true;
  bool direct = true;  // whether the CPU's direct convolution takes it
};

// Whether oneDNN runs its avx512_core kernels here: read from the CPU
// itself, unless ONEDNN_MAX_CPU_ISA holds oneDNN below them.
bool has_avx512_core() {
  if (const char* cap = std::getenv("ONEDNN_MAX_CPU_ISA"); cap != nullptr && *cap != '\0') {
    std::string isa = cap;
    for (char& c : isa) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));  // oneDNN ignores case
    if (isa != "ALL" && isa.rfind("AVX512_CORE", 0) != 0) return false;
  }
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512cd") &&
         __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
}

const std::vector<Case> kCases = {
    {"lenet c2 6->16 5x5", {8, 6, 14, 14}, {16, 6, 5, 5}},
    {"d2l lenet 20->50 5x5", {4, 20, 13, 13}, {50, 20, 5, 5}},
    {"resnet 64->64 3x3 p1", {2, 64, 14, 14}, {64, 64, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 1, false},
    {"resnet 64->128 3x3 s2 p1", {2, 64, 14, 14}, {128, 64, 3, 3}, {2, 2}, {1, 1}, {1, 1}, 1, false},
    {"resnet 64->128 1x1 s2 projection", {2, 64, 14, 14}, {128, 64, 1, 1}, {2, 2}, {0, 0}, {1, 1}, 1, true},
    {"stride {2, 1} padding {1, 2}, 3x5", {3, 8, 11, 9}, {6, 8, 3, 5}, {2, 1}, {1, 2}},
    {"dilation {2, 3}", {2, 8, 12, 13}, {5, 8, 3, 3}, {1, 1}, {2, 1}, {2, 3}},
    {"groups 2, 4 channels each", {2, 8, 9, 9}, {6, 4, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 2},
    {"groups 4, stride 2, no bias", {2, 32, 10, 10}, {16, 8, 3, 3}, {2, 2}, {1, 1}, {1, 1}, 4, false},
    {"output 1x1", {3, 4, 5, 5}, {7, 4, 5, 5}},
    // One input channel: oneDNN's AVX-512 kernels take it, its AVX2 ones
    // lose to im2col (Note [oneDNN convolution in the CPU backend]).
    {"lenet c1 1->6", {4, 1, 28, 28}, {6, 1, 5, 5}, {1, 1}, {2, 2}, {1, 1}, 1, true, has_avx512_core()},
    {"depthwise: im2col", {2, 8, 9, 9}, {8, 1, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 8, true, false},
};

// Sets an environment variable for a scope.
class EnvScope {
 public:
  EnvScope(const char* name, const char* value) : name_(name) { ::setenv(name, value, 1); }
  ~EnvScope() { ::unsetenv(name_); }
  EnvScope(const EnvScope&) = delete;
  EnvScope& operator=(const EnvScope&) = delete;

 private:
  const char* name_;
};

struct Result {
  Tensor y, gx, gw, gb;
  std::uint64_t direct_calls = 0;  // oneDNN convolutions run
};

std::uint64_t direct_calls() {
  const auto s = cpu_threads::parallel_stats();
  return s.conv_single + s.conv_threaded;
}

// Forward and backward of one case from the given leaves, with grad_out as
// the output's gradient.
Result run(const Case& c, const Tensor& x0, const Tensor& w0, const Tensor& b0, const Tensor& grad_out) {
  const Tensor x = x0.detach().requires_grad_(), w = w0.detach().requires_grad_();
  const Tensor b = c.bias ? b0.detach().requires_grad_() : Tensor{};
  const std::uint64_t before = direct_calls();
  Result r;
  r.y = conv2d(x, w, b, c.stride, c.padding, c.dilation, c.groups);
  r.y.backward(grad_out.to(r.y.dtype()));
  r.direct_calls = direct_calls() - before;
  r.gx = x.grad(), r.gw = w.grad();
  if (c.bias) r.gb = b.grad();
  return r;
}

// A result in bf16 is rounded once from f32 (2^-9 of its size); four
// roundings' worth leaves room for summation order.
constexpr double kBf16Tolerance = 4.0 / 512;

void expect_close(const Tensor& got, const Tensor& want, const std::string& what, double tolerance = 2e-5) {
  ASSERT_EQ(got.shape(), want.shape()) << what;
  const double scale = 1.0 + amax(abs(want.to(DType::F64)), {}).item<double>();
  const double err = amax(abs(got.to(DType::F64) - want.to(DType::F64)), {}).item<double>();
  EXPECT_LE(err, tolerance * scale) << what << ": max |difference| " << err << " against max |value| " << scale - 1;
}

TEST(ConvPaths, DirectAndIm2colAgree) {
  manual_seed(12);
  for (const Case& c : kCases) {
    SCOPED_TRACE(c.name);
    const Tensor x = randn(c.x), w = randn(c.w) * 0.2, b = randn({c.w[0]});
    Tensor grad_out;
    {
      NoGradGuard g;
      grad_out = randn(conv2d(x, w, b, c.stride, c.padding, c.dilation, c.groups).shape());
    }
    const Result direct = run(c, x, w, b, grad_out);
    Result im2col, f64;
    {
      EnvScope force("ANVIL_CONV_IM2COL", "1");
      im2col = run(c, x, w, b, grad_out);
      f64 = run(c, x.to(DType::F64), w.to(DType::F64), b.to(DType::F64), grad_out);
    }
    // Forward, input gradient, weight gradient: three calls on the direct path.
    EXPECT_EQ(direct.direct_calls, c.direct ? 3u : 0u);
    EXPECT_EQ(im2col.direct_calls, 0u) << "ANVIL_CONV_IM2COL=1 forces the im2col path";
    EXPECT_EQ(f64.direct_calls, 0u);
    EXPECT_EQ(direct.y.dtype(), DType::F32);
    for (const Result* r : std::initializer_list<const Result*>{&direct, &im2col}) {
      const std::string path = r == &direct ? "direct" : "im2col";
      expect_close(r->y, f64.y, path + " output");
      expect_close(r->gx, f64.gx, path + " input gradient");
      expect_close(r->gw, f64.gw, path + " weight gradient");
      if (c.bias) expect_close(r->gb, f64.gb, path + " bias gradient");
    }
    expect_close(direct.y, im2col.y, "direct against im2col output");
    expect_close(direct.gx, im2col.gx, "direct against im2col input gradient");
    expect_close(direct.gw, im2col.gw, "direct against im2col weight gradient");
  }
}

// bf16 (what autocast runs conv2d in): both paths against f64 from the same
// bf16 values, within a few of bf16's roundings; on CPUs with bf16
// instructions the direct path is oneDNN's bf16 convolution.
TEST(ConvPaths, Bf16DirectAndIm2colAgree) {
  manual_seed(13);
  for (const Case& c : kCases) {
    SCOPED_TRACE(c.name);
    const Tensor x = randn(c.x).to(DType::BF16), w = (randn(c.w) * 0.2).to(DType::BF16),
                 b = randn({c.w[0]}).to(DType::BF16);
    Tensor grad_out;
    {
      NoGradGuard g;
      grad_out = randn(conv2d(x, w, b, c.stride, c.padding, c.dilation, c.groups).shape()).to(DType::BF16);
    }
    const Result direct = run(c, x, w, b, grad_out);
    Result im2col, f64;
    {
      EnvScope force("ANVIL_CONV_IM2COL", "1");
      im2col = run(c, x, w, b, grad_out);
      f64 = run(c, x.to(DType::F64), w.to(DType::F64), b.to(DType::F64), grad_out.to(DType::F64));
    }
    EXPECT_EQ(direct.y.dtype(), DType::BF16);
    EXPECT_EQ(im2col.direct_calls, 0u) << "ANVIL_CONV_IM2COL=1 forces the im2col path";
    EXPECT_TRUE(direct.direct_calls == 0u || direct.direct_calls == 3u);
    for (const Result* r : std::initializer_list<const Result*>{&direct, &im2col}) {
      const std::string path = r == &direct ? "direct" : "im2col";
      expect_close(r->y, f64.y, path + " output", kBf16Tolerance);
      expect_close(r->gx, f64.gx, path + " input gradient", kBf16Tolerance);
      expect_close(r->gw, f64.gw, path + " weight gradient", kBf16Tolerance);
      if (c.bias) expect_close(r->gb, f64.gb, path + " bias gradient", kBf16Tolerance);
    }
  }
}

TEST(ConvPaths, AnyInputLayout) {
  // Channels-last, contiguous and non-dense inputs and output gradients
  // (a slice, an expanded gradient) give the same results.
  manual_seed(7);
  const Case c{"layouts", {2, 8, 10, 10}, {12, 8, 3, 3}, {1, 1}, {1, 1}};
  const Tensor x = randn(c.x), w = randn(c.w) * 0.2, b = randn({12});
  const Tensor ones_out = ones({2, 12, 10, 10});
  Result want;
  {
    EnvScope force("ANVIL_CONV_IM2COL", "1");
    want = run(c, x, w, b, ones_out);
  }
  const Tensor channels_last = x.permute({0, 2, 3, 1}).contiguous().permute({0, 3, 1, 2});
  const Tensor sliced = cat({x, x}, 1).narrow(1, 0, 8);  // every other 8 channels
  const Tensor expanded = ones({1, 1, 1, 1}).expand({2, 12, 10, 10});
  for (const auto& [name, input, grad] : std::vector<std::tuple<std::string, Tensor, Tensor>>{
           {"contiguous", x, ones_out}, {"channels-last", channels_last, ones_out}, {"sliced", sliced, expanded}}) {
    SCOPED_TRACE(name);
    const Result got = run(c, input, w, b, grad);
    EXPECT_EQ(got.direct_calls, 3u);
    expect_close(got.y, want.y, "output");
    expect_close(got.gx, want.gx, "input gradient");
    expect_close(got.gw, want.gw, "weight gradient");
    expect_close(got.gb, want.gb, "bias gradient");
  }
}

// Note [Winograd convolution on the CPU]: a 3x3 stride-1 f32 convolution
// takes oneDNN's Winograd kernels on AVX-512 where the rule says they win
// (from 64 channels: the weight gradient always, forward and data gradient
// from 128 output tiles of 4x4), direct otherwise and with
// ANVIL_CPU_WINOGRAD=0; the results agree with f64 within the direct path's
// tolerance either way.
struct Algorithms {
  std::string forward, data, weight;
  Result result;
};
Algorithms algorithms_of(const Case& c, const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& grad_out) {
  profiler::Profile p;
  Algorithms out{.result = run(c, x, w, b, grad_out)};
  p.stop();
  for (const profiler::ConvAlgorithmStats& r : p.conv_algorithms()) {
    std::string& slot = r.choice.direction == "forward"         ? out.forward
                        : r.choice.direction == "backward_data" ? out.data
                                                                : out.weight;
    EXPECT_TRUE(slot.empty()) << "two records for " << r.choice.direction;
    slot = r.choice.algorithm;
  }
  return out;
}

TEST(ConvPaths, WinogradWhereItWins) {
  manual_seed(21);
  const bool avx512 = has_avx512_core();
  const auto wino = [](const std::string& algorithm) { return algorithm.find("wino") != std::string::npos; };
  struct Expect {
    Case c;
    bool forward, data, weight;  // Winograd in each direction on AVX-512
  };
  const std::vector<Expect> cases = {
      {{"8 x 64 x 14 x 14: 128 tiles", {8, 64, 14, 14}, {64, 64, 3, 3}, {1, 1}, {1, 1}}, true, true, true},
      {{"2 x 64 x 14 x 14: 32 tiles", {2, 64, 14, 14}, {64, 64, 3, 3}, {1, 1}, {1, 1}}, false, false, true},
      {{"stride 2", {8, 64, 14, 14}, {64, 64, 3, 3}, {2, 2}, {1, 1}}, false, false, false},
      {{"5x5", {8, 16, 14, 14}, {16, 16, 5, 5}, {1, 1}, {2, 2}}, false, false, false},
      {{"32 channels", {8, 32, 14, 14}, {32, 32, 3, 3}, {1, 1}, {1, 1}}, false, false, false},
      {{"64 -> 128 channels", {8, 64, 14, 14}, {128, 64, 3, 3}, {1, 1}, {1, 1}}, true, true, true},
  };
  for (const Expect& e : cases) {
    SCOPED_TRACE(e.c.name);
    const Tensor x = randn(e.c.x), w = randn(e.c.w) * 0.1, b = randn({e.c.w[0]});
    const Tensor grad_out = randn(conv2d(x, w, b, e.c.stride, e.c.padding).shape());
    const Algorithms got = algorithms_of(e.c, x, w, b, grad_out);
    EXPECT_EQ(wino(got.forward), avx512 && e.forward) << got.forward;
    EXPECT_EQ(wino(got.data), avx512 && e.data) << got.data;
    EXPECT_EQ(wino(got.weight), avx512 && e.weight) << got.weight;
    Algorithms off, f64;
    {
      EnvScope no("ANVIL_CPU_WINOGRAD", "0");
      off = algorithms_of(e.c, x, w, b, grad_out);
    }
    EXPECT_FALSE(wino(off.forward) || wino(off.data) || wino(off.weight)) << "ANVIL_CPU_WINOGRAD=0";
    {
      EnvScope force("ANVIL_CONV_IM2COL", "1");
      f64 = algorithms_of(e.c, x.to(DType::F64), w.to(DType::F64), b.to(DType::F64), grad_out);
    }
    for (const Result* r : std::initializer_list<const Result*>{&got.result, &off.result}) {
      const std::string path = r == &got.result ? "default" : "direct";
      expect_close(r->y, f64.result.y, path + " output");
      expect_close(r->gx, f64.result.gx, path + " input gradient");
      expect_close(r->gw, f64.result.gw, path + " weight gradient");
      expect_close(r->gb, f64.result.gb, path + " bias gradient");
    }
  }
}

TEST(ConvPaths, BiasGradientAloneAndNoGrad) {
  manual_seed(3);
  const Tensor x = randn({2, 8, 6, 6}), w = randn({4, 8, 3, 3});
  const Tensor b = randn({4}).requires_grad_();
  const Tensor y = conv2d(x, w, b);
  y.backward(ones_like(y));
  expect_close(b.grad(), full({4}, 2.0 * 4 * 4), "bias gradient alone");
  NoGradGuard g;
  EXPECT_FALSE(conv2d(x, w, b).requires_grad());
}

TEST(ConvPaths, SmallConvolutionsStayOnTheCallingThread) {
  // Note [Threads from the work's size]: a small convolution must not wake
  // the pool; a large one may use every allowed thread.
  const int saved = num_threads();
  set_num_threads(2);
  cpu_threads::set_load_bound(false);  // under ctest -j, other tests are load
  // The thresholds at the reference wake cost, whatever this machine's is
  // (Note [Threads from the measured wake cost]).
  cpu_threads::set_parallel_wake_us(cpu_threads::kReferenceWakeUs);
  const Tensor small = randn({1, 4, 6, 6}), small_w = randn({4, 4, 3, 3});
  const Tensor large = randn({16, 64, 28, 28}), large_w = randn({64, 64, 3, 3});
  cpu_threads::reset_parallel_stats();
  for (int i = 0; i < 3; ++i) (void)conv2d(small, small_w, Tensor{}, {1, 1}, {1, 1});
  auto s = cpu_threads::parallel_stats();
  EXPECT_EQ(s.conv_single, 3u);
  EXPECT_EQ(s.conv_threaded, 0u);
  EXPECT_EQ(num_threads(), 2) << "the convolution restores the caller's thread count";
  cpu_threads::reset_parallel_stats();
  (void)conv2d(large, large_w, Tensor{}, {1, 1}, {1, 1});
  s = cpu_threads::parallel_stats();
  EXPECT_EQ(s.conv_threaded, 1u);
  EXPECT_EQ(num_threads(), 2);
  // Note [Reorder threads]: around that convolution, the 147 KiB weight
  // reorder stays on one thread while the 3.2 MB image and output
  // reorders take both.
  EXPECT_GE(s.reorder_single, 1u) << "the small weight reorder woke the pool";
  EXPECT_GE(s.reorder_threaded, 2u) << "the large activation reorders ran on one thread";
  cpu_threads::set_parallel_wake_us(0);
  cpu_threads::set_load_bound(true);
  set_num_threads(saved);
}

}  // namespace
