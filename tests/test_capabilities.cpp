// Capabilities are asked once (DESIGN §2): on an OpenCL device without fp64
// every f64 op raises NotSupported naming the op, the dtype, the device and
// the fix, before any kernel is built; every f32 op still runs (its kernels
// compiled without a single double), rand/randn/randint included.
//
// PoCL has fp64, so this program hides it: ANVIL_OPENCL_NO_FP64=1 is set
// before anything in the process asks for a device (the first static
// initialiser below), and DeviceReportsNoFp64 checks it took effect.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

namespace {
const bool kFp64Hidden = [] { return setenv("ANVIL_OPENCL_NO_FP64", "1", 1) == 0; }();
}  // namespace

#include "anvil/anvil.h"
#include "device_test.h"
#include "ops/dispatch.h"

namespace {

using namespace anvil;

std::vector<Device> opencl_devices() {
  std::vector<Device> out;
  for (const Device& d : anvil::testing::test_devices())
    if (d.type() == DeviceType::OpenCL) out.push_back(d);
  return out;
}

#define ANVIL_REQUIRE_OPENCL()                                                                            \
  do {                                                                                                    \
    if (opencl_devices().empty()) {                                                                       \
      const std::string why = "needs an OpenCL device; " + device_unavailable_reason(DeviceType::OpenCL); \
      if (anvil::testing::required_device_types().count(DeviceType::OpenCL)) FAIL() << why;               \
      GTEST_SKIP() << why;                                                                                \
    }                                                                                                     \
  } while (0)

// Runs `f`, which must raise NotSupported naming each of `parts`.
void expect_not_supported(const std::string& what, const std::function<void()>& f,
                          const std::vector<std::string>& parts) {
  try {
    f();
    ADD_FAILURE() << what << ": expected NotSupported, nothing was raised";
  } catch (const NotSupported& e) {
    const std::string msg = e.what();
    for (const std::string& p : parts) EXPECT_NE(msg.find(p), std::string::npos) << what << ": " << msg;
  } catch (const std::exception& e) {
    ADD_FAILURE() << what << ": expected NotSupported, got " << e.what();
  }
}

void expect_close(const std::string& what, const Tensor& got, const Tensor& want, double tol = 1e-5) {
  ASSERT_EQ(got.shape(), want.shape()) << what;
  const std::vector<double> g = got.to_vector<double>(), w = want.to_vector<double>();
  for (std::size_t i = 0; i < g.size(); ++i) {
    if (std::isnan(w[i])) {
      EXPECT_TRUE(std::isnan(g[i])) << what << " [" << i << "]";
      continue;
    }
    ASSERT_NEAR(g[i], w[i], tol * std::max(1.0, std::abs(w[i]))) << what << " [" << i << "]";
  }
}

TEST(Capabilities, DeviceReportsNoFp64) {
  ASSERT_TRUE(kFp64Hidden);
  ANVIL_REQUIRE_OPENCL();
  for (const Device& d : opencl_devices()) EXPECT_FALSE(properties(d).fp64) << d;
  EXPECT_TRUE(properties(cpu()).fp64);
}

// Every way to put f64 on the device: factories, conversions on the device,
// moves onto it. A dtype the device cannot compute in cannot live there.
TEST(Capabilities, EveryWayToF64OnTheDeviceRaisesNotSupported) {
  ANVIL_REQUIRE_OPENCL();
  for (const Device& d : opencl_devices()) {
    const std::string dev = d.str();
    const Tensor x32 = ones({2, 3}, d);
    const Tensor h64 = ones({2, 3}, cpu(), f64);
    const std::vector<std::pair<std::string, std::function<void()>>> cases = {
        {"empty", [&] { (void)empty({2}, d, f64); }},
        {"zeros", [&] { (void)zeros({2}, d, f64); }},
        {"ones", [&] { (void)ones({2}, d, f64); }},
        {"full", [&] { (void)full({2}, 1.5, d, f64); }},
        {"arange", [&] { (void)arange(0, 4, 1, d, f64); }},
        {"linspace", [&] { (void)linspace(0, 1, 5, d, f64); }},
        {"rand", [&] { (void)rand({4}, d, f64); }},
        {"randn", [&] { (void)randn({4}, d, f64); }},
        {"randint", [&] { (void)randint(0, 5, {4}, d, f64); }},
        {"zeros", [&] { (void)eye(3, std::nullopt, d, f64); }},
        {"to",
         [&] {
           (void)tensor(std::vector<double>{1.0, 2.0}, d);
         }},
        {"to", [&] { (void)x32.to(f64); }},
        {"to", [&] { (void)x32.to(d, f64); }},
        {"to", [&] { (void)h64.to(d); }},
        {"to", [&] { (void)h64.copy_to(d); }},
        {"to", [&] { (void)ones({2}, cpu()).to(d, f64); }},
    };
    for (const auto& [op, f] : cases)
      expect_not_supported(op + " on " + dev, f, {op + ": f64 is not supported on " + dev, "fp64", ".to(f32)"});
  }
}

// The full message, as DESIGN §2 and STYLE "Errors" ask for it.
TEST(Capabilities, TheMessageNamesOpDtypeDeviceAndFix) {
  ANVIL_REQUIRE_OPENCL();
  const Device d = opencl_devices().front();
  try {
    (void)ones({2}, d).to(f64);
    FAIL() << "expected NotSupported";
  } catch (const NotSupported& e) {
    EXPECT_EQ(std::string(e.what()), "to: f64 is not supported on " + d.str() +
                                         " (the device has no fp64); expected f32, got f64; use .to(f32) or another "
                                         "device");
  }
}

// The frontend's dispatch asks before every primitive: each op family with
// an f64 operand stops there, naming the op, before a kernel is built or
// any memory is touched (the operands' handles are null).
TEST(Capabilities, EveryPrimitiveAsksBeforeDispatch) {
  ANVIL_REQUIRE_OPENCL();
  using namespace anvil::detail;
  for (const Device& d : opencl_devices()) {
    const std::vector<std::string> parts = {"f64 is not supported on " + d.str(), "(the device has no fp64)",
                                            "expected f32, got f64", ".to(f32)"};
    ElementwiseArgs ew;
    ew.ndim = 1;
    ew.shape[0] = ew.numel = 4;
    ew.out.dtype = DType::F64;
    ew.nin = 2;
    ew.in[0].dtype = ew.in[1].dtype = DType::F64;
    for (int op = 0; op < static_cast<int>(UnaryOp::Count); ++op) {
      const auto u = static_cast<UnaryOp>(op);
      std::vector<std::string> p = parts;
      p.push_back(std::string(name(u)) + ": ");
      expect_not_supported(
          name(u), [&] { dispatch::unary(d, u, {}, ew); }, p);
    }
    for (int op = 0; op < static_cast<int>(BinaryOp::Count); ++op) {
      const auto b = static_cast<BinaryOp>(op);
      ElementwiseArgs cmp = ew;  // comparisons write bool: the f64 input is what is refused
      if (is_comparison(b)) cmp.out.dtype = DType::Bool;
      std::vector<std::string> p = parts;
      p.push_back(std::string(name(b)) + ": ");
      expect_not_supported(
          name(b), [&] { dispatch::binary(d, b, cmp); }, p);
    }
    ElementwiseArgs mixed = ew;  // f32 out of an f64 input: still refused
    mixed.out.dtype = DType::F32;
    expect_not_supported(
        "copy", [&] { dispatch::copy("to", d, mixed); }, parts);
    ElementwiseArgs w = ew;
    w.nin = 3;
    w.in[0].dtype = DType::Bool;
    w.in[2].dtype = DType::F64;
    expect_not_supported(
        "where", [&] { dispatch::where(d, w); }, parts);
    for (int op = 0; op < static_cast<int>(ReduceOp::Count); ++op) {
      ReduceArgs r;
      r.in.dtype = DType::F64;
      const bool is_arg = op == static_cast<int>(ReduceOp::ArgMax) || op == static_cast<int>(ReduceOp::ArgMin);
      r.out.dtype = is_arg ? DType::I64 : DType::F64;
      expect_not_supported(
          name(static_cast<ReduceOp>(op)),
          [&] { dispatch::reduce(name(static_cast<ReduceOp>(op)), d, static_cast<ReduceOp>(op), r); }, parts);
    }
    GemmArgs g;
    g.dtype = DType::F64;
    expect_not_supported(
        "matmul", [&] { dispatch::gemm("matmul", d, g); }, parts);
    IndexArgs ix;
    ix.out.dtype = ix.src.dtype = DType::F64;
    ix.index.dtype = DType::I64;
    expect_not_supported(
        "gather", [&] { dispatch::index("gather", d, ix); }, parts);
    KernelOperand o;
    o.dtype = DType::F64;
    expect_not_supported(
        "fill", [&] { dispatch::fill("fill_", d, o, 4, 1.0); }, parts);
    expect_not_supported(
        "arange", [&] { dispatch::arange("arange", d, o, 4, 0, 1); }, parts);
    RandomArgs ra;
    ra.out.dtype = DType::F64;
    expect_not_supported(
        "randn", [&] { dispatch::random("randn", d, ra); }, parts);
    // And the fused window kernels are not offered in f64.
    EXPECT_FALSE(backend_checked(d).supports_fused(FusedOp::Im2col, DType::F64, d.index()));
    EXPECT_TRUE(backend_checked(d).supports_fused(FusedOp::Im2col, DType::F32, d.index()));
  }
}

// Everything that is not f64 still runs, against the CPU: one op of every
// kernel family, the reductions' wide-sum and two-pass variants, both GEMM
// paths, the fused window kernels, and conversions between the other dtypes.
TEST(Capabilities, EveryF32OpStillRuns) {
  ANVIL_REQUIRE_OPENCL();
  manual_seed(7);
  const Tensor hx = rand({64, 33}, cpu()) * 4 - 2;  // f32 in [-2, 2)
  const Tensor hy = rand({64, 33}, cpu()) + 0.5;
  const Tensor hbig = rand({4, 70000}, cpu());
  const Tensor hidx = tensor(std::vector<std::int64_t>{3, 0, 7, 7, 1}, cpu());
  const Tensor himg = rand({2, 3, 9, 9}, cpu());
  const Tensor hw = rand({4, 3, 3, 3}, cpu());
  using Op = std::function<Tensor(const Tensor& x, const Tensor& y, const Tensor& big, const Tensor& idx,
                                  const Tensor& img, const Tensor& w)>;
  const std::vector<std::pair<std::string, Op>> ops = {
      {"exp", [](auto& x, auto&, auto&, auto&, auto&, auto&) { return exp(x); }},
      {"log", [](auto&, auto& y, auto&, auto&, auto&, auto&) { return log(y); }},
      {"sqrt rsqrt", [](auto&, auto& y, auto&, auto&, auto&, auto&) { return sqrt(y) + rsqrt(y); }},
      {"sin cos tanh sigmoid",
       [](auto& x, auto&, auto&, auto&, auto&, auto&) { return sin(x) + cos(x) + tanh(x) + sigmoid(x); }},
      {"abs neg sign relu square reciprocal clamp",
       [](auto& x, auto& y, auto&, auto&, auto&, auto&) {
         return abs(x) - neg(x) + sign(x) + relu(x) + square(x) + reciprocal(y) + clamp(x, -1, 1);
       }},
      {"add sub mul div pow", [](auto& x, auto& y, auto&, auto&, auto&, auto&) { return (x + y) * (x - y) / y + pow(y, x); }},
      {"maximum minimum", [](auto& x, auto& y, auto&, auto&, auto&, auto&) { return maximum(x, y) + minimum(x, 0.5); }},
      {"compare where", [](auto& x, auto& y, auto&, auto&, auto&, auto&) { return where(x > y, x, y * 2); }},
      {"broadcast strided", [](auto& x, auto& y, auto&, auto&, auto&, auto&) { return x.t() + y.sum({0}, true).t(); }},
      {"sum mean", [](auto& x, auto&, auto&, auto&, auto&, auto&) { return x.sum({1}) + mean(x, {1}); }},
      {"long sums", [](auto&, auto&, auto& big, auto&, auto&, auto&) { return big.sum({1}) / 70000; }},
      {"total sum", [](auto&, auto&, auto& big, auto&, auto&, auto&) { return big.sum() / 280000; }},
      {"max min prod", [](auto& x, auto& y, auto&, auto&, auto&, auto&) { return amax(x, {0}) + amin(x, {0}) + prod(y, {0}); }},
      {"argmax", [](auto& x, auto&, auto&, auto&, auto&, auto&) { return argmax(x, 1).to(f32); }},
      {"softmax logsumexp var",
       [](auto& x, auto&, auto&, auto&, auto&, auto&) { return softmax(x, 1).sum({1}) + logsumexp(x, {1}) + var(x, {1}); }},
      {"matmul", [](auto& x, auto& y, auto&, auto&, auto&, auto&) { return matmul(x, y.t()); }},
      {"small matmul", [](auto& x, auto& y, auto&, auto&, auto&, auto&) {
         return matmul(x.narrow(0, 0, 3).narrow(1, 0, 3), y.narrow(0, 0, 3).narrow(1, 0, 3));
       }},
      {"int matmul", [](auto& x, auto& y, auto&, auto&, auto&, auto&) {
         return matmul((x * 10).to(i32), (y * 10).to(i32).t()).to(f32);
       }},
      {"index_select gather", [](auto& x, auto&, auto&, auto& idx, auto&, auto&) {
         return index_select(x, 0, idx).sum({1}) + gather(x.narrow(1, 0, 1).reshape({64}), 0, idx);
       }},
      {"conv2d max_pool2d avg_pool2d", [](auto&, auto&, auto&, auto&, auto& img, auto& w) {
         return conv2d(img, w, {}, {1, 1}, {1, 1}).sum({1}) + max_pool2d(img, {3, 3}, {2, 2}, {1, 1}).sum({1}).sum() +
                avg_pool2d(img, {2, 2}, {2, 2}).sum();
       }},
      {"conversions", [](auto& x, auto&, auto&, auto&, auto&, auto&) {
         return (abs(x) * 50).to(i64).to(i32).to(u8).to(f32) + (x > 0).to(f32) + (x * 3).to(i64).sum({1}).to(f32).reshape({64, 1});
       }},
      {"arange linspace full", [](auto& x, auto&, auto&, auto&, auto&, auto&) {
         const Device d = x.device();
         return arange(0, 64, 1, d).reshape({64, 1}) + linspace(-1, 1, 33, d) + full({64, 33}, 0.25, d) +
                eye(64, 33, d);
       }},
  };
  for (const Device& d : opencl_devices()) {
    const Tensor x = hx.to(d), y = hy.to(d), big = hbig.to(d), idx = hidx.to(d), img = himg.to(d), w = hw.to(d);
    for (const auto& [name, op] : ops) {
      SCOPED_TRACE(name + " on " + d.str());
      Tensor got;
      try {
        got = op(x, y, big, idx, img, w);
        ASSERT_EQ(got.device(), d);
      } catch (const std::exception& e) {
        FAIL() << name << " on " << d << " raised: " << e.what();
      }
      expect_close(name + " on " + d.str(), got, op(hx, hy, hbig, hidx, himg, hw), 1e-4);
    }
  }
}

// Note [Random numbers without fp64] (src/kernels/philox.h): uniforms and
// randint are the same bits as the CPU's; normals computed in float are
// within 2e-6 of the CPU's f64 path rounded to f32 (measured: see the note).
TEST(Capabilities, RandomWithoutFp64) {
  ANVIL_REQUIRE_OPENCL();
  const std::int64_t n = 1 << 20;
  for (const Device& d : opencl_devices()) {
    SCOPED_TRACE(d.str());
    manual_seed(1234);
    const std::vector<float> du = rand({n}, d).to_vector<float>();
    const std::vector<float> dn = randn({n}, d).to_vector<float>();
    const std::vector<std::int64_t> di = randint(-5, 1000003, {n}, d).to_vector<std::int64_t>();
    manual_seed(1234);
    const std::vector<float> cu = rand({n}, cpu()).to_vector<float>();
    const std::vector<float> cn = randn({n}, cpu()).to_vector<float>();
    const std::vector<std::int64_t> ci = randint(-5, 1000003, {n}, cpu()).to_vector<std::int64_t>();
    EXPECT_EQ(du, cu) << "uniforms must be bit-identical";
    EXPECT_EQ(di, ci) << "randint must be identical";
    double max_abs = 0, max_rel = 0;
    for (std::int64_t i = 0; i < n; ++i) {
      const double err = std::abs(static_cast<double>(dn[i]) - cn[i]);
      max_abs = std::max(max_abs, err);
      if (std::abs(cn[i]) > 0.5) max_rel = std::max(max_rel, err / std::abs(cn[i]));
    }
    std::printf(
        "%s: randn in f32 vs the f64 path over %lld normals: max abs error %.3g, max rel error (|z| > 0.5) %.3g\n",
        d.str().c_str(), static_cast<long long>(n), max_abs, max_rel);
    EXPECT_LE(max_abs, 2e-6);
    EXPECT_GT(max_abs, 0.0) << "identical to the f64 path: is the f32 path really running?";
    double mean = 0, sq = 0;
    for (float z : dn) {
      mean += z;
      sq += static_cast<double>(z) * z;
    }
    mean /= static_cast<double>(n);
    EXPECT_NEAR(mean, 0.0, 5e-3);
    EXPECT_NEAR(sq / static_cast<double>(n) - mean * mean, 1.0, 5e-3);
  }
}

// The CPU keeps every dtype: nothing above is a CPU limitation.
TEST(Capabilities, TheCpuStillRunsF64) {
  const Tensor x = linspace(0, 1, 5, cpu(), f64);
  EXPECT_DOUBLE_EQ(exp(x).sum().item<double>(),
                   std::exp(0.0) + std::exp(0.25) + std::exp(0.5) + std::exp(0.75) + std::exp(1.0));
  EXPECT_EQ(randn({8}, cpu(), f64).dtype(), f64);
}

}  // namespace
