// A unary op fused into a binary op (anvil::lazy, Note [Unary into binary]),
// on every device: the fused kernel gives the op-by-op result, it really
// runs (the intermediate is never allocated), and every case it does not
// take (broadcast, strided, mixed dtypes, integers, gradients, autocast,
// errors) still runs, op by op, with the op-by-op result and errors.
// ctest runs this suite again under ANVIL_NO_FUSED=1, where nothing fuses.
#include <gtest/gtest.h>

#include <cstdlib>
#include <functional>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "device_test.h"
#include "reference.h"

namespace {

using namespace anvil;

bool fusion_disabled() {
  const char* v = std::getenv("ANVIL_NO_FUSED");
  return v != nullptr && std::string_view(v) == "1";
}

// Inputs where every unary op below is defined and finite: (0.1, 2.1).
Tensor positive(const Shape& shape, Device d, DType t) { return (rand(shape, d) * 2.0 + 0.1).to(t); }

// The fused result against the op-by-op one: bit for bit on the CPU, which
// runs the same per-op loops on blocks; within a rounding on devices, whose
// compilers may contract the two ops (and keep a 16-bit intermediate in f32).
void expect_same(const Tensor& fused, const Tensor& op_by_op, const std::string& what) {
  ASSERT_EQ(fused.dtype(), op_by_op.dtype()) << what;
  ASSERT_EQ(fused.shape(), op_by_op.shape()) << what;
  ASSERT_EQ(fused.device(), op_by_op.device()) << what;
  if (fused.device().is_cpu()) {
    EXPECT_TRUE(equal(fused, op_by_op)) << what;
  } else {
    const ref::Tolerance tol = ref::tol(fused.dtype());
    EXPECT_TRUE(allclose(fused.to(f64), op_by_op.to(f64), tol.rtol, tol.atol)) << what;
  }
}

struct Case {
  const char* name;
  std::function<Tensor(const Tensor&, const Tensor&)> fused, op_by_op;
};

const std::vector<Case> kCases = {
    {"exp(a) * b", [](const Tensor& a, const Tensor& b) { return lazy(a).exp() * b; },
     [](const Tensor& a, const Tensor& b) { return exp(a) * b; }},
    {"a + sigmoid(b)", [](const Tensor& a, const Tensor& b) { return a + lazy(b).sigmoid(); },
     [](const Tensor& a, const Tensor& b) { return a + sigmoid(b); }},
    {"tanh(a) - relu(b)", [](const Tensor& a, const Tensor& b) { return lazy(a).tanh() - lazy(b).relu(); },
     [](const Tensor& a, const Tensor& b) { return tanh(a) - relu(b); }},
    {"exp(a) * 2.5", [](const Tensor& a, const Tensor&) { return lazy(a).exp() * 2.5; },
     [](const Tensor& a, const Tensor&) { return exp(a) * 2.5; }},
    {"log(a) / sqrt(b)", [](const Tensor& a, const Tensor& b) { return lazy(a).log() / lazy(b).sqrt(); },
     [](const Tensor& a, const Tensor& b) { return log(a) / sqrt(b); }},
    {"neg(a) * square(b)", [](const Tensor& a, const Tensor& b) { return lazy(a).neg() * lazy(b).square(); },
     [](const Tensor& a, const Tensor& b) { return neg(a) * square(b); }},
    {"gelu(a) * b", [](const Tensor& a, const Tensor& b) { return lazy(a).gelu() * b; },
     [](const Tensor& a, const Tensor& b) { return gelu(a) * b; }},
    {"1 - sigmoid(b)", [](const Tensor&, const Tensor& b) { return 1.0 - lazy(b).sigmoid(); },
     [](const Tensor&, const Tensor& b) { return 1.0 - sigmoid(b); }},
    {"1 / rsqrt(a)", [](const Tensor& a, const Tensor&) { return 1 / lazy(a).rsqrt(); },
     [](const Tensor& a, const Tensor&) { return 1 / rsqrt(a); }},
    {"softplus(a) + 3", [](const Tensor& a, const Tensor&) { return lazy(a).softplus() + 3; },
     [](const Tensor& a, const Tensor&) { return softplus(a) + 3; }},
    {"exp(log(a)) * b: the first op computed", [](const Tensor& a, const Tensor& b) { return lazy(a).log().exp() * b; },
     [](const Tensor& a, const Tensor& b) { return exp(log(a)) * b; }},
};

class Fusion : public anvil::testing::DeviceTest {};

TEST_P(Fusion, MatchesOpByOpOnEveryFloatDtypeAndSize) {
  const Device d = device();
  for (DType t : {f32, f64, f16, bf16}) {
    if (t == f64 && !properties(d).fp64) continue;
    std::vector<Shape> shapes = {Shape{}, Shape{0}, Shape{1}, Shape{1023}, Shape{3, 1025}};
    if (t == f32) shapes.push_back(Shape{300001});  // past the CPU's threshold for two threads
    for (const Shape& shape : shapes) {
      const Tensor a = positive(shape, d, t), b = positive(shape, d, t);
      // f32 runs every case; the other dtypes the first four (a prologue on
      // a, on b, on both, and with a scalar): each case is a kernel to build.
      const std::size_t cases = t == f32 ? kCases.size() : 4;
      for (std::size_t k = 0; k < cases; ++k) {
        const Case& c = kCases[k];
        expect_same(c.fused(a, b), c.op_by_op(a, b),
                    std::string(c.name) + " " + std::string(to_string(t)) + " " + shape.str() + " on " + d.str());
      }
    }
  }
}

// Every unary op a Lazy has (each is its own kernel on a device; the
// cases above put them on the other side too).
TEST_P(Fusion, EveryUnaryOp) {
  const Device d = device();
  const Tensor a = positive({257}, d, f32), b = positive({257}, d, f32);
  using Method = Lazy (Lazy::*)() const;
  using Op = Tensor (*)(const Tensor&);
  const std::vector<std::tuple<const char*, Method, Op>> ops = {
      {"neg", &Lazy::neg, &anvil::neg},
      {"abs", &Lazy::abs, &anvil::abs},
      {"exp", &Lazy::exp, &anvil::exp},
      {"log", &Lazy::log, &anvil::log},
      {"sqrt", &Lazy::sqrt, &anvil::sqrt},
      {"rsqrt", &Lazy::rsqrt, &anvil::rsqrt},
      {"sin", &Lazy::sin, &anvil::sin},
      {"cos", &Lazy::cos, &anvil::cos},
      {"tanh", &Lazy::tanh, &anvil::tanh},
      {"sigmoid", &Lazy::sigmoid, &anvil::sigmoid},
      {"relu", &Lazy::relu, &anvil::relu},
      {"square", &Lazy::square, &anvil::square},
      {"reciprocal", &Lazy::reciprocal, &anvil::reciprocal},
      {"log1p", &Lazy::log1p, &anvil::log1p},
      {"expm1", &Lazy::expm1, &anvil::expm1},
      {"erf", &Lazy::erf, &anvil::erf},
      {"gelu", &Lazy::gelu, &anvil::gelu},
      {"softplus", &Lazy::softplus, &anvil::softplus},
  };
  for (const auto& [name, method, op] : ops) {
    expect_same((Lazy(a).*method)() * b, op(a) * b, std::string(name) + "(a) * b on " + d.str());
  }
}

TEST_P(Fusion, TheIntermediateIsNeverAllocated) {
  const Device d = device();
  const std::int64_t n = 1 << 18;
  const Tensor a = positive({n}, d, f32), b = positive({n}, d, f32);
  synchronize(d);
  const std::uint64_t before = memory_stats(d).allocated;
  reset_peak_memory_stats(d);
  Tensor c = lazy(a).exp() * b;
  synchronize(d);
  const std::uint64_t grown = memory_stats(d).peak_allocated - before;
  const std::uint64_t bytes = static_cast<std::uint64_t>(n) * 4;
  if (fusion_disabled())
    EXPECT_GE(grown, 2 * bytes) << "under ANVIL_NO_FUSED=1, exp(a) is stored before the product";
  else
    EXPECT_LT(grown, 2 * bytes) << "exp(a) * b fused allocates its result alone; grew by " << grown << " bytes";
  EXPECT_TRUE(allclose(c, exp(a) * b));
}

TEST_P(Fusion, CasesItDoesNotTakeRunOpByOp) {
  const Device d = device();
  const Tensor a = positive({3, 4}, d, f32), b = positive({3, 4}, d, f32);
  // broadcast
  const Tensor row = positive({1, 4}, d, f32);
  expect_same(lazy(a).exp() * row, exp(a) * row, "broadcast");
  // strided
  expect_same(lazy(a.t()).exp() * b.t(), exp(a.t()) * b.t(), "transposed");
  // mixed dtypes promote as op by op
  if (properties(d).fp64) {
    const Tensor b64 = b.to(f64);
    const Tensor c = lazy(a).exp() * b64;
    EXPECT_EQ(c.dtype(), f64);
    expect_same(c, exp(a) * b64, "f32 * f64");
  }
  // integers compute exp in f32, as exp does
  const Tensor i = arange(12, d).reshape({3, 4});
  const Tensor ci = lazy(i).exp() + 1;
  EXPECT_EQ(ci.dtype(), f32);
  expect_same(ci, exp(i) + 1, "exp of i64");
  // a scalar that promotes: an integer tensor times 2.5 is f32
  expect_same(lazy(i).abs() * 2.5, abs(i) * 2.5, "i64 abs * 2.5");
}

TEST_P(Fusion, GradientsFlowThroughTheOpByOpPath) {
  const Device d = device();
  const Tensor a = positive({5}, d, f32).requires_grad_(), b = positive({5}, d, f32).requires_grad_();
  (lazy(a).exp() * lazy(b).sigmoid()).sum().backward();
  const Tensor sb = sigmoid(b.detach());
  EXPECT_TRUE(allclose(a.grad(), exp(a.detach()) * sb, 1e-5, 1e-6));
  EXPECT_TRUE(allclose(b.grad(), exp(a.detach()) * sb * (1.0 - sb), 1e-5, 1e-6));
}

TEST_P(Fusion, ErrorsAreTheOpsOwn) {
  const Device d = device();
  const Tensor a = positive({3}, d, f32);
  EXPECT_THROW(lazy(a).exp() * positive({4}, d, f32), ShapeError);
  EXPECT_THROW(lazy(Tensor{}).exp() * a, ValueError);
  if (d.is_cpu() && device_count(DeviceType::OpenCL) > 0) {
    try {
      (void)(lazy(a).exp() * positive({3}, Device("opencl:0"), f32));
      FAIL() << "expected DeviceMismatch";
    } catch (const DeviceMismatch& e) {
      EXPECT_NE(std::string(e.what()).find("mul"), std::string::npos) << e.what();
    }
  }
  // and the library goes on
  expect_same(lazy(a).exp() * a, exp(a) * a, "after the errors");
}

ANVIL_INSTANTIATE_DEVICE_TEST(Fusion);

}  // namespace
