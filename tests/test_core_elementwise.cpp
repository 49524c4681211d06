// Elementwise ops against the float64 reference, on every device: every
// unary and binary op of ops.h, scalar overloads, C++ operators, in-place
// forms, where and clamp; on contiguous, transposed, stepped, broadcast,
// zero-size and odd-size inputs, for f32/f64/i32/i64 where meaningful.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "device_test.h"
#include "ops/op_common.h"
#include "reference.h"

namespace {

using namespace anvil;
using ref::Domain;
using ref::Layout;

using Op1 = std::function<Tensor(const Tensor&)>;
using Op2 = std::function<Tensor(const Tensor&, const Tensor&)>;
using Ref1 = std::function<double(double)>;
using Ref2 = std::function<double(double, double)>;

const std::vector<ref::Dims> kShapes = {{}, {0}, {1}, {7}, {1023}, {100003}, {3, 5}, {4, 0}, {2, 3, 7}, {33, 65}};
const Layout kLayouts[] = {Layout::Contiguous, Layout::Transposed, Layout::Stepped};
// f16 and bf16 run every float case, with ref::tol's tolerances for them.
const std::vector<DType> kFloat = {f32, f64, f16, bf16};
const std::vector<DType> kAll = {f32, f64, f16, bf16, i32, i64};
const std::vector<DType> kInt = {i32, i64};

ref::Tolerance tolerance_for(DType t, double rtol32 = 1e-5, double atol32 = 1e-6) {
  if (t == f32) return {rtol32, atol32};
  return ref::tol(t);
}

std::string trace(DType dt, const ref::Dims& shape, Layout l) {
  return std::string(to_string(dt)) + " shape=" + ref::dims_str(shape) + " " + ref::name(l);
}

// What the reference expects the tensor to hold once stored in `dt`:
// integers wrap and truncate like the dtype; f32 and f64 are compared
// unrounded; f16 and bf16 rounded, so a value past 65504 is f16's inf.
ref::Array expected_in(const ref::Array& a, DType dt) { return is_floating(dt) && !is_half(dt) ? a : ref::cast(a, dt); }

// ---- unary -------------------------------------------------------------------------------

enum class Out { Same, Bool, FloatForInt };

DType out_dtype(Out o, DType in) {
  switch (o) {
    case Out::Same:
      return in;
    case Out::Bool:
      return boolean;
    case Out::FloatForInt:
      return is_floating(in) ? in : f32;
  }
  return in;
}

struct UnaryCase {
  Op1 op;
  Ref1 ref;
  Domain dom;
  std::vector<DType> dtypes;
  Out out = Out::Same;
  double rtol32 = 1e-5, atol32 = 1e-6;
};

void run_unary(Device d, const UnaryCase& c) {
  std::uint64_t seed = 1;
  for (DType dt : c.dtypes)
    for (const auto& shape : kShapes)
      for (Layout layout : kLayouts) {
        SCOPED_TRACE(trace(dt, shape, layout));
        ref::guarded([&] {
          Domain dom = c.dom;
          if (!is_floating(dt)) dom.integer_valued = true;
          const ref::Input in = ref::make_input(shape, layout, dt, d, dom, seed++);
          const Tensor out = c.op(in.t);
          const DType want_dt = out_dtype(c.out, dt);
          EXPECT_EQ(out.dtype(), want_dt);
          EXPECT_EQ(out.device(), d);
          EXPECT_EQ(out.shape(), Shape(shape));
          EXPECT_TRUE(
              ref::close(out, expected_in(ref::map(in.r, c.ref), want_dt), tolerance_for(want_dt, c.rtol32, c.atol32)));
          // The input is left alone.
          EXPECT_TRUE(ref::exact(in.t, in.r));
        });
      }
}

class ElementwiseUnary : public anvil::testing::DeviceTest {};

#define UNARY_TEST(NAME, ...) \
  TEST_P(ElementwiseUnary, NAME) { run_unary(device(), UnaryCase{__VA_ARGS__}); }

const Domain kSym{-3, 3};
const Domain kInts{-50, 50, true};

double sigmoid_ref(double x) { return 1.0 / (1.0 + std::exp(-x)); }
double sign_ref(double x) { return x > 0 ? 1.0 : (x < 0 ? -1.0 : 0.0); }
double gelu_ref(double x) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); }
double softplus_ref(double x) { return x > 20 ? x : std::log1p(std::exp(x)); }
double round_ref(double x) { return std::nearbyint(x); }  // half to even in the default rounding mode

UNARY_TEST(
    neg, [](const Tensor& x) { return neg(x); }, [](double x) { return -x; }, kSym, kAll)
UNARY_TEST(
    neg_operator, [](const Tensor& x) { return -x; }, [](double x) { return -x; }, kSym, kAll)
UNARY_TEST(
    neg_method, [](const Tensor& x) { return x.neg(); }, [](double x) { return -x; }, kSym, kAll)
UNARY_TEST(
    abs, [](const Tensor& x) { return abs(x); }, [](double x) { return std::fabs(x); }, kSym, kAll)
UNARY_TEST(
    abs_method, [](const Tensor& x) { return x.abs(); }, [](double x) { return std::fabs(x); }, kSym, kAll)
UNARY_TEST(
    exp, [](const Tensor& x) { return exp(x); }, [](double x) { return std::exp(x); }, Domain{-5, 5}, kFloat)
UNARY_TEST(
    exp_method, [](const Tensor& x) { return x.exp(); }, [](double x) { return std::exp(x); }, Domain{-5, 5}, kFloat)
// Near the ends of the f32 range a vectorised exp must still be within a few ulp.
UNARY_TEST(
    exp_wide_range, [](const Tensor& x) { return exp(x); }, [](double x) { return std::exp(x); }, Domain{-80, 80},
    kFloat)
UNARY_TEST(
    log, [](const Tensor& x) { return log(x); }, [](double x) { return std::log(x); }, Domain{0.01, 100}, kFloat)
UNARY_TEST(
    log_method, [](const Tensor& x) { return x.log(); }, [](double x) { return std::log(x); }, Domain{0.01, 100},
    kFloat)
UNARY_TEST(
    sqrt, [](const Tensor& x) { return sqrt(x); }, [](double x) { return std::sqrt(x); }, Domain{0, 100}, kFloat)
UNARY_TEST(
    sqrt_method, [](const Tensor& x) { return x.sqrt(); }, [](double x) { return std::sqrt(x); }, Domain{0, 100},
    kFloat)
UNARY_TEST(
    rsqrt, [](const Tensor& x) { return rsqrt(x); }, [](double x) { return 1.0 / std::sqrt(x); }, Domain{0.01, 100},
    kFloat)
UNARY_TEST(
    rsqrt_method, [](const Tensor& x) { return x.rsqrt(); }, [](double x) { return 1.0 / std::sqrt(x); },
    Domain{0.01, 100}, kFloat)
UNARY_TEST(
    sin, [](const Tensor& x) { return sin(x); }, [](double x) { return std::sin(x); }, Domain{-10, 10}, kFloat)
UNARY_TEST(
    sin_method, [](const Tensor& x) { return x.sin(); }, [](double x) { return std::sin(x); }, Domain{-10, 10}, kFloat)
UNARY_TEST(
    cos, [](const Tensor& x) { return cos(x); }, [](double x) { return std::cos(x); }, Domain{-10, 10}, kFloat)
UNARY_TEST(
    cos_method, [](const Tensor& x) { return x.cos(); }, [](double x) { return std::cos(x); }, Domain{-10, 10}, kFloat)
UNARY_TEST(
    tanh, [](const Tensor& x) { return tanh(x); }, [](double x) { return std::tanh(x); }, Domain{-10, 10}, kFloat)
UNARY_TEST(
    tanh_method, [](const Tensor& x) { return x.tanh(); }, [](double x) { return std::tanh(x); }, Domain{-10, 10},
    kFloat)
UNARY_TEST(
    sigmoid, [](const Tensor& x) { return sigmoid(x); }, sigmoid_ref, Domain{-20, 20}, kFloat)
UNARY_TEST(
    sigmoid_method, [](const Tensor& x) { return x.sigmoid(); }, sigmoid_ref, Domain{-20, 20}, kFloat)
UNARY_TEST(
    relu, [](const Tensor& x) { return relu(x); }, [](double x) { return x > 0 ? x : 0.0; }, kSym, kAll)
UNARY_TEST(
    relu_method, [](const Tensor& x) { return x.relu(); }, [](double x) { return x > 0 ? x : 0.0; }, kSym, kAll)
UNARY_TEST(
    sign, [](const Tensor& x) { return sign(x); }, sign_ref, Domain{-3, 3, true}, kAll)
UNARY_TEST(
    square, [](const Tensor& x) { return square(x); }, [](double x) { return x * x; }, kSym, kAll)
UNARY_TEST(
    reciprocal, [](const Tensor& x) { return reciprocal(x); }, [](double x) { return 1.0 / x; },
    Domain{-3, 3, false, true}, kFloat)
UNARY_TEST(
    logical_not, [](const Tensor& x) { return logical_not(x); }, [](double x) { return x == 0 ? 1.0 : 0.0; },
    Domain{-2, 2, true}, kAll, Out::Bool)
// NaN and inf made inside the op chain (the random inputs are finite).
UNARY_TEST(
    isnan_of_log, [](const Tensor& x) { return isnan(log(x)); }, [](double x) { return x < 0 ? 1.0 : 0.0; },
    Domain{-2, 2, true}, kFloat, Out::Bool)
UNARY_TEST(
    isinf_of_reciprocal, [](const Tensor& x) { return reciprocal(x).isinf(); },
    [](double x) { return x == 0 ? 1.0 : 0.0; }, Domain{-2, 2, true}, kFloat, Out::Bool)
UNARY_TEST(
    isfinite_of_log, [](const Tensor& x) { return isfinite(log(x)); }, [](double x) { return x > 0 ? 1.0 : 0.0; },
    Domain{-2, 2, true}, kFloat, Out::Bool)
UNARY_TEST(
    isnan_isinf_isfinite_of_ints, [](const Tensor& x) { return isfinite(x) & logical_not(isnan(x) | isinf(x)); },
    [](double) { return 1.0; }, kInts, kInt, Out::Bool)
UNARY_TEST(
    pow_scalar_2, [](const Tensor& x) { return pow(x, 2); }, [](double x) { return x * x; }, kSym, kAll)
UNARY_TEST(
    pow_scalar_3_method, [](const Tensor& x) { return x.pow(3); }, [](double x) { return x * x * x; }, Domain{-5, 5},
    kAll)
UNARY_TEST(
    pow_scalar_half, [](const Tensor& x) { return pow(x, 0.5); }, [](double x) { return std::sqrt(x); }, Domain{0, 50},
    kFloat)
UNARY_TEST(
    pow_scalar_negative, [](const Tensor& x) { return pow(x, -1.5); }, [](double x) { return std::pow(x, -1.5); },
    Domain{0.1, 10}, kFloat)
UNARY_TEST(
    pow_scalar_base, [](const Tensor& x) { return pow(2.0, x); }, [](double x) { return std::pow(2.0, x); },
    Domain{-4, 4}, kFloat)
UNARY_TEST(
    clamp_both, [](const Tensor& x) { return clamp(x, Scalar(-1), Scalar(2)); },
    [](double x) { return std::min(std::max(x, -1.0), 2.0); }, kSym, kAll)
UNARY_TEST(
    clamp_lo_only, [](const Tensor& x) { return clamp(x, Scalar(0.5), std::nullopt); },
    [](double x) { return std::max(x, 0.5); }, kSym, kFloat)
UNARY_TEST(
    clamp_hi_only_method, [](const Tensor& x) { return x.clamp(std::nullopt, Scalar(1)); },
    [](double x) { return std::min(x, 1.0); }, kSym, kAll)

UNARY_TEST(
    log1p, [](const Tensor& x) { return log1p(x); }, [](double x) { return std::log1p(x); }, Domain{-0.99, 10}, kFloat)
UNARY_TEST(
    log1p_method, [](const Tensor& x) { return x.log1p(); }, [](double x) { return std::log1p(x); },
    Domain{-1e-3, 1e-3}, kFloat)
UNARY_TEST(
    expm1, [](const Tensor& x) { return expm1(x); }, [](double x) { return std::expm1(x); }, Domain{-10, 10}, kFloat)
UNARY_TEST(
    expm1_method, [](const Tensor& x) { return x.expm1(); }, [](double x) { return std::expm1(x); },
    Domain{-1e-3, 1e-3}, kFloat)
UNARY_TEST(
    erf, [](const Tensor& x) { return erf(x); }, [](double x) { return std::erf(x); }, Domain{-4, 4}, kFloat)
UNARY_TEST(
    erf_method, [](const Tensor& x) { return x.erf(); }, [](double x) { return std::erf(x); }, kSym, kFloat)
UNARY_TEST(
    gelu, [](const Tensor& x) { return gelu(x); }, gelu_ref, Domain{-6, 6}, kFloat)
UNARY_TEST(
    softplus, [](const Tensor& x) { return softplus(x); }, softplus_ref, Domain{-30, 30}, kFloat)
UNARY_TEST(
    floor, [](const Tensor& x) { return floor(x); }, [](double x) { return std::floor(x); }, Domain{-5, 5}, kFloat)
UNARY_TEST(
    floor_method, [](const Tensor& x) { return x.floor(); }, [](double x) { return std::floor(x); }, kSym, kFloat)
UNARY_TEST(
    ceil, [](const Tensor& x) { return ceil(x); }, [](double x) { return std::ceil(x); }, Domain{-5, 5}, kFloat)
UNARY_TEST(
    ceil_method, [](const Tensor& x) { return x.ceil(); }, [](double x) { return std::ceil(x); }, kSym, kFloat)
UNARY_TEST(
    round, [](const Tensor& x) { return round(x); }, round_ref, Domain{-5, 5}, kFloat)
UNARY_TEST(
    round_method, [](const Tensor& x) { return x.round(); }, round_ref, kSym, kFloat)
UNARY_TEST(
    atan, [](const Tensor& x) { return atan(x); }, [](double x) { return std::atan(x); }, Domain{-20, 20}, kFloat)
UNARY_TEST(
    atan_method, [](const Tensor& x) { return x.atan(); }, [](double x) { return std::atan(x); }, kSym, kFloat)
UNARY_TEST(
    asin, [](const Tensor& x) { return asin(x); }, [](double x) { return std::asin(x); }, Domain{-1, 1}, kFloat)
UNARY_TEST(
    asin_method, [](const Tensor& x) { return x.asin(); }, [](double x) { return std::asin(x); }, Domain{-0.5, 0.5},
    kFloat)
UNARY_TEST(
    acos, [](const Tensor& x) { return acos(x); }, [](double x) { return std::acos(x); }, Domain{-1, 1}, kFloat)
UNARY_TEST(
    acos_method, [](const Tensor& x) { return x.acos(); }, [](double x) { return std::acos(x); }, Domain{-0.5, 0.5},
    kFloat)
UNARY_TEST(
    sinh, [](const Tensor& x) { return sinh(x); }, [](double x) { return std::sinh(x); }, Domain{-10, 10}, kFloat)
UNARY_TEST(
    sinh_method, [](const Tensor& x) { return x.sinh(); }, [](double x) { return std::sinh(x); }, kSym, kFloat)
UNARY_TEST(
    cosh, [](const Tensor& x) { return cosh(x); }, [](double x) { return std::cosh(x); }, Domain{-10, 10}, kFloat)
UNARY_TEST(
    cosh_method, [](const Tensor& x) { return x.cosh(); }, [](double x) { return std::cosh(x); }, kSym, kFloat)
UNARY_TEST(
    asinh, [](const Tensor& x) { return asinh(x); }, [](double x) { return std::asinh(x); }, Domain{-100, 100}, kFloat)
UNARY_TEST(
    asinh_method, [](const Tensor& x) { return x.asinh(); }, [](double x) { return std::asinh(x); }, kSym, kFloat)
UNARY_TEST(
    acosh, [](const Tensor& x) { return acosh(x); }, [](double x) { return std::acosh(x); }, Domain{1, 100}, kFloat)
UNARY_TEST(
    acosh_method, [](const Tensor& x) { return x.acosh(); }, [](double x) { return std::acosh(x); }, Domain{1, 3},
    kFloat)
UNARY_TEST(
    atanh, [](const Tensor& x) { return atanh(x); }, [](double x) { return std::atanh(x); }, Domain{-0.99, 0.99},
    kFloat)
UNARY_TEST(
    atanh_method, [](const Tensor& x) { return x.atanh(); }, [](double x) { return std::atanh(x); }, Domain{-0.5, 0.5},
    kFloat)

// Integer unary ops keep the integer dtype over a wider range.
UNARY_TEST(
    neg_ints_wide, [](const Tensor& x) { return neg(x); }, [](double x) { return -x; }, kInts, kInt)
UNARY_TEST(
    abs_ints_wide, [](const Tensor& x) { return abs(x); }, [](double x) { return std::fabs(x); }, kInts, kInt)

// Floating unary ops on integers compute in f32 (PyTorch's int → float rule).
UNARY_TEST(
    exp_of_ints, [](const Tensor& x) { return exp(x); }, [](double x) { return std::exp(x); }, Domain{-5, 5, true},
    kInt, Out::FloatForInt)
UNARY_TEST(
    sqrt_of_ints, [](const Tensor& x) { return sqrt(x); }, [](double x) { return std::sqrt(x); }, Domain{0, 100, true},
    kInt, Out::FloatForInt)
UNARY_TEST(
    log1p_of_ints, [](const Tensor& x) { return log1p(x); }, [](double x) { return std::log1p(x); },
    Domain{0, 50, true}, kInt, Out::FloatForInt)
UNARY_TEST(
    expm1_of_ints, [](const Tensor& x) { return expm1(x); }, [](double x) { return std::expm1(x); },
    Domain{-5, 5, true}, kInt, Out::FloatForInt)
UNARY_TEST(
    erf_of_ints, [](const Tensor& x) { return erf(x); }, [](double x) { return std::erf(x); }, Domain{-3, 3, true},
    kInt, Out::FloatForInt)
UNARY_TEST(
    atan_of_ints, [](const Tensor& x) { return atan(x); }, [](double x) { return std::atan(x); }, Domain{-5, 5, true},
    kInt, Out::FloatForInt)
UNARY_TEST(
    asin_of_ints, [](const Tensor& x) { return asin(x); }, [](double x) { return std::asin(x); }, Domain{-1, 1, true},
    kInt, Out::FloatForInt)
UNARY_TEST(
    acos_of_ints, [](const Tensor& x) { return acos(x); }, [](double x) { return std::acos(x); }, Domain{-1, 1, true},
    kInt, Out::FloatForInt)
UNARY_TEST(
    sinh_of_ints, [](const Tensor& x) { return sinh(x); }, [](double x) { return std::sinh(x); }, Domain{-5, 5, true},
    kInt, Out::FloatForInt)
UNARY_TEST(
    cosh_of_ints, [](const Tensor& x) { return cosh(x); }, [](double x) { return std::cosh(x); }, Domain{-5, 5, true},
    kInt, Out::FloatForInt)
UNARY_TEST(
    asinh_of_ints, [](const Tensor& x) { return asinh(x); }, [](double x) { return std::asinh(x); },
    Domain{-50, 50, true}, kInt, Out::FloatForInt)
UNARY_TEST(
    acosh_of_ints, [](const Tensor& x) { return acosh(x); }, [](double x) { return std::acosh(x); },
    Domain{1, 50, true}, kInt, Out::FloatForInt)
UNARY_TEST(
    atanh_of_ints, [](const Tensor& x) { return atanh(x); }, [](double x) { return std::atanh(x); }, Domain{0, 0, true},
    kInt, Out::FloatForInt)
UNARY_TEST(
    gelu_of_ints, [](const Tensor& x) { return gelu(x); }, gelu_ref, Domain{-5, 5, true}, kInt, Out::FloatForInt)
UNARY_TEST(
    softplus_of_ints, [](const Tensor& x) { return softplus(x); }, softplus_ref, Domain{-30, 30, true}, kInt,
    Out::FloatForInt)
// An integer is its own floor, ceil and round, in its own dtype (PyTorch's rule).
UNARY_TEST(
    floor_of_ints, [](const Tensor& x) { return floor(x); }, [](double x) { return x; }, kInts, kInt)
UNARY_TEST(
    ceil_of_ints, [](const Tensor& x) { return x.ceil(); }, [](double x) { return x; }, kInts, kInt)
UNARY_TEST(
    round_of_ints, [](const Tensor& x) { return round(x); }, [](double x) { return x; }, kInts, kInt)
UNARY_TEST(
    sigmoid_of_ints, [](const Tensor& x) { return sigmoid(x); }, sigmoid_ref, Domain{-5, 5, true}, kInt,
    Out::FloatForInt)

ANVIL_INSTANTIATE_DEVICE_TEST(ElementwiseUnary);

// ---- special values ------------------------------------------------------------------------

class ElementwiseSpecial : public anvil::testing::DeviceTest {};

TEST_P(ElementwiseSpecial, InfinitiesAndNaNs) {
  const Device d = device();
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  const ref::Array x({6}, {0.0, -1.0, inf, -inf, nan, 1.0});
  struct Case {
    const char* name;
    Op1 op;
    Ref1 ref;
  };
  const Case cases[] = {
      {"exp", [](const Tensor& t) { return exp(t); }, [](double v) { return std::exp(v); }},
      {"log", [](const Tensor& t) { return log(t); }, [](double v) { return std::log(v); }},
      {"sqrt", [](const Tensor& t) { return sqrt(t); }, [](double v) { return std::sqrt(v); }},
      {"rsqrt", [](const Tensor& t) { return rsqrt(t); }, [](double v) { return 1.0 / std::sqrt(v); }},
      {"tanh", [](const Tensor& t) { return tanh(t); }, [](double v) { return std::tanh(v); }},
      {"sigmoid", [](const Tensor& t) { return sigmoid(t); }, sigmoid_ref},
      {"abs", [](const Tensor& t) { return abs(t); }, [](double v) { return std::fabs(v); }},
      {"reciprocal", [](const Tensor& t) { return reciprocal(t); }, [](double v) { return 1.0 / v; }},
  };
  for (DType dt : kFloat)
    for (const auto& c : cases) {
      SCOPED_TRACE(std::string(c.name) + " " + std::string(to_string(dt)));
      auto t = ref::to_tensor(x, dt, d);
      EXPECT_TRUE(ref::close(c.op(t), ref::map(x, c.ref), tolerance_for(dt)));
    }
  // Large arguments saturate instead of overflowing to NaN.
  auto big = ref::to_tensor(ref::Array({4}, {-100, 100, -1000, 1000}), f32, d);
  EXPECT_TRUE(ref::close(sigmoid(big), ref::Array({4}, {0, 1, 0, 1}), tolerance_for(f32)));
  EXPECT_TRUE(ref::close(tanh(big), ref::Array({4}, {-1, 1, -1, 1}), tolerance_for(f32)));
  EXPECT_TRUE(ref::close(exp(big), ref::Array({4}, {0, inf, 0, inf}), tolerance_for(f32)));
  // maximum/minimum propagate NaN, as torch.maximum does.
  auto a = ref::to_tensor(ref::Array({3}, {nan, 1, 2}), f32, d);
  auto b = ref::to_tensor(ref::Array({3}, {0, nan, 1}), f32, d);
  EXPECT_TRUE(ref::close(maximum(a, b), ref::Array({3}, {nan, nan, 2}), tolerance_for(f32)));
  EXPECT_TRUE(ref::close(minimum(a, b), ref::Array({3}, {nan, nan, 1}), tolerance_for(f32)));
  // Division by zero follows IEEE for floats.
  auto z = ref::to_tensor(ref::Array({3}, {1, -1, 0}), f32, d);
  EXPECT_TRUE(ref::close(z / 0.0, ref::Array({3}, {inf, -inf, nan}), tolerance_for(f32)));
}

// round is half to even, as torch.round; floor, ceil and round keep the sign of zero.
TEST_P(ElementwiseSpecial, RoundingHalvesAndZeros) {
  const Device d = device();
  for (DType dt : kFloat) {
    SCOPED_TRACE(to_string(dt));
    const Tensor x = ref::to_tensor(ref::Array({8}, {0.5, 1.5, 2.5, -0.5, -1.5, -2.5, -0.25, 0.25}), dt, d);
    EXPECT_EQ(round(x).to(f64).to_vector<double>(), (std::vector<double>{0, 2, 2, -0., -2, -2, -0., 0}));
    EXPECT_TRUE(std::signbit(round(x).to(f64).to_vector<double>()[3]));
    EXPECT_TRUE(std::signbit(ceil(x).to(f64).to_vector<double>()[6]));
    EXPECT_EQ(floor(x).to(f64).to_vector<double>(), (std::vector<double>{0, 1, 2, -1, -2, -3, -1, 0}));
  }
  const Tensor b = ref::to_tensor(ref::Array({2}, {0, 1}), boolean, d);
  EXPECT_THROW(floor(b), DTypeError);
  EXPECT_THROW(ceil(b), DTypeError);
  EXPECT_THROW(round(b), DTypeError);
}

ANVIL_INSTANTIATE_DEVICE_TEST(ElementwiseSpecial);

// ---- binary --------------------------------------------------------------------------------

struct ShapePair {
  ref::Dims a, b;
};
const std::vector<ShapePair> kShapePairs = {
    {{}, {}},
    {{1}, {1}},
    {{7}, {7}},
    {{1023}, {1023}},
    {{100003}, {100003}},
    {{33, 65}, {33, 65}},
    {{}, {3, 4}},
    {{3, 4}, {}},
    {{0}, {0}},
    {{0, 3}, {1, 3}},
    {{3, 1}, {1, 4}},
    {{2, 3, 4}, {4}},
    {{4}, {2, 3, 4}},
    {{5, 1, 7}, {1, 6, 1}},
    {{4, 1}, {4, 5}},
    {{1, 9}, {7, 1}},
    {{2, 1, 3, 1}, {4, 1, 5}},
};
const std::pair<Layout, Layout> kLayoutPairs[] = {{Layout::Contiguous, Layout::Contiguous},
                                                  {Layout::Transposed, Layout::Stepped},
                                                  {Layout::Stepped, Layout::Transposed},
                                                  {Layout::Transposed, Layout::Transposed}};

struct BinaryCase {
  Op2 op;
  Ref2 ref;
  Domain da, db;
  std::vector<DType> dtypes;
  Out out = Out::Same;
  double rtol32 = 1e-5, atol32 = 1e-6;
};

void run_binary(Device d, const BinaryCase& c) {
  std::uint64_t seed = 100;
  for (DType dt : c.dtypes)
    for (const auto& sp : kShapePairs)
      for (auto [la, lb] : kLayoutPairs) {
        SCOPED_TRACE(std::string(to_string(dt)) + " " + ref::dims_str(sp.a) + " " + ref::name(la) + " op " +
                     ref::dims_str(sp.b) + " " + ref::name(lb));
        ref::guarded([&] {
          Domain da = c.da, db = c.db;
          if (!is_floating(dt)) da.integer_valued = db.integer_valued = true;
          const ref::Input a = ref::make_input(sp.a, la, dt, d, da, seed++);
          const ref::Input b = ref::make_input(sp.b, lb, dt, d, db, seed++);
          const Tensor out = c.op(a.t, b.t);
          const DType want_dt = out_dtype(c.out, dt);
          EXPECT_EQ(out.dtype(), want_dt);
          EXPECT_EQ(out.device(), d);
          EXPECT_TRUE(ref::close(out, expected_in(ref::zip(a.r, b.r, c.ref), want_dt),
                                 tolerance_for(want_dt, c.rtol32, c.atol32)));
          EXPECT_TRUE(ref::exact(a.t, a.r));
          EXPECT_TRUE(ref::exact(b.t, b.r));
        });
      }
}

class ElementwiseBinary : public anvil::testing::DeviceTest {};

#define BINARY_TEST(NAME, ...) \
  TEST_P(ElementwiseBinary, NAME) { run_binary(device(), BinaryCase{__VA_ARGS__}); }

const Domain kDivisor{-3, 3, false, true};
const Domain kTies{-2, 2, true};  // integer-valued so that eq/le/ge see ties

BINARY_TEST(
    add, [](const Tensor& a, const Tensor& b) { return add(a, b); }, std::plus<double>(), kSym, kSym, kAll)
BINARY_TEST(
    add_operator, [](const Tensor& a, const Tensor& b) { return a + b; }, std::plus<double>(), kSym, kSym, kAll)
BINARY_TEST(
    add_alpha, [](const Tensor& a, const Tensor& b) { return add(a, b, 3); },
    [](double x, double y) { return x + 3 * y; }, kSym, kSym, kAll)
BINARY_TEST(
    sub, [](const Tensor& a, const Tensor& b) { return sub(a, b); }, std::minus<double>(), kSym, kSym, kAll)
BINARY_TEST(
    sub_operator, [](const Tensor& a, const Tensor& b) { return a - b; }, std::minus<double>(), kSym, kSym, kAll)
BINARY_TEST(
    mul, [](const Tensor& a, const Tensor& b) { return mul(a, b); }, std::multiplies<double>(), kSym, kSym, kAll)
BINARY_TEST(
    mul_operator, [](const Tensor& a, const Tensor& b) { return a * b; }, std::multiplies<double>(), kSym, kSym, kAll)
BINARY_TEST(
    div, [](const Tensor& a, const Tensor& b) { return div(a, b); }, std::divides<double>(), kSym, kDivisor, kFloat)
BINARY_TEST(
    div_operator, [](const Tensor& a, const Tensor& b) { return a / b; }, std::divides<double>(), kSym, kDivisor,
    kFloat)
BINARY_TEST(
    div_ints_is_true_division, [](const Tensor& a, const Tensor& b) { return a / b; }, std::divides<double>(),
    Domain{-20, 20}, Domain{1, 7}, kInt, Out::FloatForInt)
BINARY_TEST(
    atan2, [](const Tensor& a, const Tensor& b) { return atan2(a, b); },
    [](double y, double x) { return std::atan2(y, x); }, kSym, kSym, kFloat)
BINARY_TEST(
    atan2_method, [](const Tensor& a, const Tensor& b) { return a.atan2(b); },
    [](double y, double x) { return std::atan2(y, x); }, Domain{-20, 20}, Domain{-1, 1}, kFloat)
BINARY_TEST(
    atan2_of_ints, [](const Tensor& a, const Tensor& b) { return atan2(a, b); },
    [](double y, double x) { return std::atan2(y, x); }, Domain{-20, 20}, Domain{-20, 20}, kInt, Out::FloatForInt)
BINARY_TEST(
    copysign, [](const Tensor& a, const Tensor& b) { return copysign(a, b); },
    [](double a, double b) { return std::copysign(a, b); }, kSym, kSym, kFloat)
BINARY_TEST(
    copysign_method_of_ints, [](const Tensor& a, const Tensor& b) { return a.copysign(b); },
    [](double a, double b) { return std::copysign(a, b); }, Domain{-20, 20}, Domain{-20, 20}, kInt, Out::FloatForInt)
BINARY_TEST(
    hypot, [](const Tensor& a, const Tensor& b) { return hypot(a, b); },
    [](double a, double b) { return std::hypot(a, b); }, kSym, kSym, kFloat)
BINARY_TEST(
    hypot_method_of_ints, [](const Tensor& a, const Tensor& b) { return a.hypot(b); },
    [](double a, double b) { return std::hypot(a, b); }, Domain{-20, 20}, Domain{-20, 20}, kInt, Out::FloatForInt)
BINARY_TEST(
    logaddexp, [](const Tensor& a, const Tensor& b) { return logaddexp(a, b); },
    [](double a, double b) { return std::max(a, b) + std::log1p(std::exp(-std::fabs(a - b))); }, Domain{-30, 30},
    Domain{-30, 30}, kFloat)
BINARY_TEST(
    logaddexp2_method, [](const Tensor& a, const Tensor& b) { return a.logaddexp2(b); },
    [](double a, double b) { return std::max(a, b) + std::log2(1 + std::exp2(-std::fabs(a - b))); }, Domain{-30, 30},
    Domain{-30, 30}, kFloat)
BINARY_TEST(
    logaddexp2_of_ints, [](const Tensor& a, const Tensor& b) { return logaddexp2(a, b); },
    [](double a, double b) { return std::max(a, b) + std::log2(1 + std::exp2(-std::fabs(a - b))); }, Domain{-20, 20},
    Domain{-20, 20}, kInt, Out::FloatForInt)
// Integer-valued operands, so a / b rounds the same in every dtype and the
// floor is the reference's: the sign cases of Python's // and %.
double floor_divide_ref(double a, double b) { return b == 0 ? 0 : std::floor(a / b); }
double remainder_ref(double a, double b) { return b == 0 ? 0 : a - std::floor(a / b) * b; }
BINARY_TEST(
    floor_divide, [](const Tensor& a, const Tensor& b) { return floor_divide(a, b); }, floor_divide_ref, kInts,
    Domain{-7, 7, true, true}, kAll)
BINARY_TEST(
    floor_divide_method_of_ints_by_zero, [](const Tensor& a, const Tensor& b) { return a.floor_divide(b); },
    floor_divide_ref, kInts, Domain{-3, 3, true}, kInt)
BINARY_TEST(
    remainder, [](const Tensor& a, const Tensor& b) { return remainder(a, b); }, remainder_ref, kInts,
    Domain{-7, 7, true, true}, kAll)
BINARY_TEST(
    remainder_method_of_ints_by_zero, [](const Tensor& a, const Tensor& b) { return a.remainder(b); }, remainder_ref,
    kInts, Domain{-3, 3, true}, kInt)
BINARY_TEST(
    bitwise_and, [](const Tensor& a, const Tensor& b) { return bitwise_and(a, b); },
    [](double x, double y) { return static_cast<double>(static_cast<std::int64_t>(x) & static_cast<std::int64_t>(y)); },
    kInts, kInts, kInt)
BINARY_TEST(
    bitwise_or_operator, [](const Tensor& a, const Tensor& b) { return a | b; },
    [](double x, double y) { return static_cast<double>(static_cast<std::int64_t>(x) | static_cast<std::int64_t>(y)); },
    kInts, kInts, kInt)
BINARY_TEST(
    bitwise_xor_method, [](const Tensor& a, const Tensor& b) { return a.bitwise_xor(b); },
    [](double x, double y) { return static_cast<double>(static_cast<std::int64_t>(x) ^ static_cast<std::int64_t>(y)); },
    kInts, kInts, kInt)
BINARY_TEST(
    bitwise_left_shift, [](const Tensor& a, const Tensor& b) { return bitwise_left_shift(a, b); },
    [](double x, double y) { return x * std::ldexp(1.0, static_cast<int>(y)); }, kInts, Domain{0, 20, true}, kInt)
BINARY_TEST(
    bitwise_right_shift, [](const Tensor& a, const Tensor& b) { return a.bitwise_right_shift(b); },
    [](double x, double y) { return std::floor(x / std::ldexp(1.0, static_cast<int>(y))); }, kInts, Domain{0, 8, true},
    kInt)
BINARY_TEST(
    pow, [](const Tensor& a, const Tensor& b) { return pow(a, b); }, [](double x, double y) { return std::pow(x, y); },
    Domain{0.1, 3}, Domain{-3, 3}, kFloat)
BINARY_TEST(
    pow_method, [](const Tensor& a, const Tensor& b) { return a.pow(b); },
    [](double x, double y) { return std::pow(x, y); }, Domain{0.1, 3}, Domain{-3, 3}, kFloat)
BINARY_TEST(
    pow_ints, [](const Tensor& a, const Tensor& b) { return pow(a, b); },
    [](double x, double y) { return std::pow(x, y); }, Domain{-4, 4}, Domain{0, 5}, kInt)
BINARY_TEST(
    maximum, [](const Tensor& a, const Tensor& b) { return maximum(a, b); },
    [](double x, double y) { return std::max(x, y); }, kSym, kSym, kAll)
BINARY_TEST(
    minimum, [](const Tensor& a, const Tensor& b) { return minimum(a, b); },
    [](double x, double y) { return std::min(x, y); }, kSym, kSym, kAll)
BINARY_TEST(
    eq, [](const Tensor& a, const Tensor& b) { return eq(a, b); },
    [](double x, double y) { return x == y ? 1.0 : 0.0; }, kTies, kTies, kAll, Out::Bool)
BINARY_TEST(
    ne, [](const Tensor& a, const Tensor& b) { return ne(a, b); },
    [](double x, double y) { return x != y ? 1.0 : 0.0; }, kTies, kTies, kAll, Out::Bool)
BINARY_TEST(
    lt, [](const Tensor& a, const Tensor& b) { return lt(a, b); }, [](double x, double y) { return x < y ? 1.0 : 0.0; },
    kTies, kTies, kAll, Out::Bool)
BINARY_TEST(
    le, [](const Tensor& a, const Tensor& b) { return le(a, b); },
    [](double x, double y) { return x <= y ? 1.0 : 0.0; }, kTies, kTies, kAll, Out::Bool)
BINARY_TEST(
    gt, [](const Tensor& a, const Tensor& b) { return gt(a, b); }, [](double x, double y) { return x > y ? 1.0 : 0.0; },
    kTies, kTies, kAll, Out::Bool)
BINARY_TEST(
    ge, [](const Tensor& a, const Tensor& b) { return ge(a, b); },
    [](double x, double y) { return x >= y ? 1.0 : 0.0; }, kTies, kTies, kAll, Out::Bool)
BINARY_TEST(
    eq_operator, [](const Tensor& a, const Tensor& b) { return a == b; },
    [](double x, double y) { return x == y ? 1.0 : 0.0; }, kTies, kTies, kAll, Out::Bool)
BINARY_TEST(
    ne_operator, [](const Tensor& a, const Tensor& b) { return a != b; },
    [](double x, double y) { return x != y ? 1.0 : 0.0; }, kTies, kTies, kAll, Out::Bool)
BINARY_TEST(
    lt_operator, [](const Tensor& a, const Tensor& b) { return a < b; },
    [](double x, double y) { return x < y ? 1.0 : 0.0; }, kTies, kTies, kAll, Out::Bool)
BINARY_TEST(
    le_operator, [](const Tensor& a, const Tensor& b) { return a <= b; },
    [](double x, double y) { return x <= y ? 1.0 : 0.0; }, kTies, kTies, kAll, Out::Bool)
BINARY_TEST(
    gt_operator, [](const Tensor& a, const Tensor& b) { return a > b; },
    [](double x, double y) { return x > y ? 1.0 : 0.0; }, kTies, kTies, kAll, Out::Bool)
BINARY_TEST(
    ge_operator, [](const Tensor& a, const Tensor& b) { return a >= b; },
    [](double x, double y) { return x >= y ? 1.0 : 0.0; }, kTies, kTies, kAll, Out::Bool)
// u8 arithmetic wraps like uint8_t.
BINARY_TEST(add_u8_wraps, [](const Tensor& a, const Tensor& b) { return a + b; }, std::plus<double>(), Domain{0, 255},
            Domain{0, 255}, {u8})
BINARY_TEST(sub_u8_wraps, [](const Tensor& a, const Tensor& b) { return a - b; }, std::minus<double>(), Domain{0, 255},
            Domain{0, 255}, {u8})

// The activations' backward ops that their gradient rules run (internal;
// Note [Activation backward as one op]): a is the gradient, b the forward's
// output (relu, sigmoid, tanh) or input (gelu, softplus).
Op2 activation_backward(detail::BinaryOp op) {
  return [op](const Tensor& g, const Tensor& y) { return detail::activation_backward(op, g, y); };
}
const double kInvSqrt2Pi = 0.39894228040143267794;
BINARY_TEST(
    relu_backward, activation_backward(detail::BinaryOp::ReluBackward),
    [](double g, double y) { return y <= 0 ? 0.0 : g; }, kSym, kTies, kFloat)
BINARY_TEST(
    sigmoid_backward, activation_backward(detail::BinaryOp::SigmoidBackward),
    [](double g, double y) { return g * (1 - y) * y; }, kSym, Domain{0, 1}, kFloat)
BINARY_TEST(
    tanh_backward, activation_backward(detail::BinaryOp::TanhBackward),
    [](double g, double y) { return g * (1 - y * y); }, kSym, Domain{-1, 1}, kFloat)
BINARY_TEST(
    gelu_backward, activation_backward(detail::BinaryOp::GeluBackward),
    [](double g, double x) {
      return g * (0.5 * std::erfc(-x / std::sqrt(2.0)) + x * kInvSqrt2Pi * std::exp(-x * x / 2));
    },
    kSym, Domain{-5, 5}, kFloat)
// Both sides of the threshold: g where x > 20, else g sigmoid(x).
BINARY_TEST(
    softplus_backward, activation_backward(detail::BinaryOp::SoftplusBackward),
    [](double g, double x) { return x > 20 ? g : g / (1 + std::exp(-x)); }, kSym, Domain{-30, 30}, kFloat)

TEST_P(ElementwiseBinary, ActivationBackwardTakesFloatsOnly) {
  const Tensor g = ones({3}, i32, device());
  EXPECT_THROW(detail::activation_backward(detail::BinaryOp::ReluBackward, g, g), DTypeError);
  EXPECT_THROW(detail::activation_backward(detail::BinaryOp::TanhBackward, g.to(boolean), g.to(boolean)), DTypeError);
  // Mixed dtypes promote as for any binary op: to a float here.
  EXPECT_EQ(detail::activation_backward(detail::BinaryOp::TanhBackward, g.to(f32), g).dtype(), f32);
  const Tensor y = full({3}, 0.5, device(), f16);
  EXPECT_EQ(detail::activation_backward(detail::BinaryOp::SigmoidBackward, g.to(f32), y).dtype(), f32);
}

ANVIL_INSTANTIATE_DEVICE_TEST(ElementwiseBinary);

// ---- mixed dtypes ----------------------------------------------------------------------------

class ElementwiseMixed : public anvil::testing::DeviceTest {};

TEST_P(ElementwiseMixed, PromotesThenComputes) {
  const Device d = device();
  struct Case {
    DType a, b, want;
  };
  const Case cases[] = {{i32, f32, f32}, {f32, i64, f32}, {i32, i64, i64},    {f32, f64, f64},
                        {i64, f64, f64}, {u8, i32, i32},  {boolean, f32, f32}};
  std::uint64_t seed = 7;
  for (const auto& c : cases) {
    for (auto [la, lb] : kLayoutPairs) {
      SCOPED_TRACE(std::string(to_string(c.a)) + " + " + std::string(to_string(c.b)) + " " + ref::name(la) + "/" +
                   ref::name(lb));
      const Domain da{0, 5, !is_floating(c.a)}, db{0, 5, !is_floating(c.b)};
      const auto a = ref::make_input({3, 5}, la, c.a, d, c.a == boolean ? Domain{0, 1, true} : da, seed++);
      const auto b = ref::make_input({5}, lb, c.b, d, db, seed++);
      const Tensor s = a.t + b.t, p = a.t * b.t;
      EXPECT_EQ(s.dtype(), c.want);
      EXPECT_EQ(p.dtype(), c.want);
      EXPECT_TRUE(ref::close(s, ref::zip(a.r, b.r, std::plus<double>()), tolerance_for(c.want)));
      EXPECT_TRUE(ref::close(p, ref::zip(a.r, b.r, std::multiplies<double>()), tolerance_for(c.want)));
      EXPECT_TRUE(ref::exact(lt(a.t, b.t), ref::zip(a.r, b.r, [](double x, double y) { return x < y ? 1.0 : 0.0; })));
    }
  }
}

TEST_P(ElementwiseMixed, ShapesThatDoNotBroadcastThrow) {
  const Device d = device();
  auto a = zeros({3}, d), b = zeros({4}, d);
  try {
    (void)(a + b);
    ADD_FAILURE() << "no error";
  } catch (const ShapeError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("add"), std::string::npos) << m;
    EXPECT_NE(m.find("[3]"), std::string::npos) << m;
    EXPECT_NE(m.find("[4]"), std::string::npos) << m;
  }
  EXPECT_THROW(mul(zeros({2, 3}, d), zeros({3, 2}, d)), ShapeError);
  EXPECT_THROW(maximum(zeros({2, 3}, d), zeros({2}, d)), ShapeError);
  EXPECT_THROW(where(zeros({2}, d, boolean), zeros({3}, d), zeros({2}, d)), ShapeError);
  EXPECT_THROW(eq(zeros({0}, d), zeros({2}, d)), ShapeError);
}

ANVIL_INSTANTIATE_DEVICE_TEST(ElementwiseMixed);

// ---- tensor op scalar --------------------------------------------------------------------------

struct ScalarCase {
  Op1 op;
  Ref1 ref;
  Domain dom;
  std::vector<DType> dtypes;
  std::function<DType(DType)> out;
  // An expression of several ops rounds to 16 bits after each, and an
  // error in exp's argument grows: its f16/bf16 tolerance times this.
  double half_scale = 1;
};

DType same(DType t) { return t; }
DType float_for_int(DType t) { return is_floating(t) ? t : f32; }
DType to_bool(DType) { return boolean; }

void run_scalar(Device d, const ScalarCase& c) {
  std::uint64_t seed = 500;
  const std::vector<ref::Dims> shapes = {{}, {0}, {7}, {1023}, {100003}, {33, 65}, {2, 3, 7}};
  for (DType dt : c.dtypes)
    for (const auto& shape : shapes)
      for (Layout layout : kLayouts) {
        SCOPED_TRACE(trace(dt, shape, layout));
        ref::guarded([&] {
          Domain dom = c.dom;
          if (!is_floating(dt)) dom.integer_valued = true;
          const ref::Input in = ref::make_input(shape, layout, dt, d, dom, seed++);
          const Tensor out = c.op(in.t);
          const DType want_dt = c.out(dt);
          EXPECT_EQ(out.dtype(), want_dt);
          EXPECT_EQ(out.device(), d);
          ref::Tolerance tol = tolerance_for(want_dt);
          if (is_half(want_dt)) tol = {tol.rtol * c.half_scale, tol.atol * c.half_scale};
          EXPECT_TRUE(ref::close(out, expected_in(ref::map(in.r, c.ref), want_dt), tol));
        });
      }
}

class ElementwiseScalar : public anvil::testing::DeviceTest {};

#define SCALAR_TEST(NAME, ...) \
  TEST_P(ElementwiseScalar, NAME) { run_scalar(device(), ScalarCase{__VA_ARGS__}); }

SCALAR_TEST(
    add_int, [](const Tensor& x) { return add(x, 2); }, [](double x) { return x + 2; }, kSym, kAll, same)
SCALAR_TEST(
    add_int_operator, [](const Tensor& x) { return x + 2; }, [](double x) { return x + 2; }, kSym, kAll, same)
SCALAR_TEST(
    add_int_operator_left, [](const Tensor& x) { return 2 + x; }, [](double x) { return x + 2; }, kSym, kAll, same)
SCALAR_TEST(
    add_float, [](const Tensor& x) { return x + 2.5; }, [](double x) { return x + 2.5; }, kSym, kAll, float_for_int)
SCALAR_TEST(
    sub, [](const Tensor& x) { return sub(x, 2); }, [](double x) { return x - 2; }, kSym, kAll, same)
SCALAR_TEST(
    sub_operator, [](const Tensor& x) { return x - 0.5; }, [](double x) { return x - 0.5; }, kSym, kAll, float_for_int)
SCALAR_TEST(
    rsub, [](const Tensor& x) { return sub(2, x); }, [](double x) { return 2 - x; }, kSym, kAll, same)
SCALAR_TEST(
    rsub_operator, [](const Tensor& x) { return 1.5 - x; }, [](double x) { return 1.5 - x; }, kSym, kAll, float_for_int)
SCALAR_TEST(
    mul, [](const Tensor& x) { return mul(x, 3); }, [](double x) { return 3 * x; }, kSym, kAll, same)
SCALAR_TEST(
    mul_operator_left, [](const Tensor& x) { return -0.25 * x; }, [](double x) { return -0.25 * x; }, kSym, kAll,
    float_for_int)
SCALAR_TEST(
    div, [](const Tensor& x) { return div(x, 4); }, [](double x) { return x / 4; }, kSym, kAll, float_for_int)
SCALAR_TEST(
    div_operator, [](const Tensor& x) { return x / 0.5; }, [](double x) { return x / 0.5; }, kSym, kAll, float_for_int)
SCALAR_TEST(
    rdiv, [](const Tensor& x) { return div(3, x); }, [](double x) { return 3 / x; }, kDivisor, kAll, float_for_int)
SCALAR_TEST(
    rdiv_operator, [](const Tensor& x) { return 1.0 / x; }, [](double x) { return 1 / x; }, kDivisor, kFloat,
    float_for_int)
SCALAR_TEST(
    pow, [](const Tensor& x) { return pow(x, 2); }, [](double x) { return x * x; }, kSym, kAll, same)
SCALAR_TEST(
    rpow, [](const Tensor& x) { return pow(3, x); }, [](double x) { return std::pow(3.0, x); }, Domain{-3, 3}, kFloat,
    same)
SCALAR_TEST(
    rpow_ints, [](const Tensor& x) { return pow(2, x); }, [](double x) { return std::pow(2.0, x); }, Domain{0, 20},
    kInt, same)
SCALAR_TEST(
    maximum, [](const Tensor& x) { return maximum(x, 0.5); }, [](double x) { return std::max(x, 0.5); }, kSym, kFloat,
    same)
SCALAR_TEST(
    maximum_int, [](const Tensor& x) { return maximum(x, 1); }, [](double x) { return std::max(x, 1.0); }, kSym, kAll,
    same)
SCALAR_TEST(
    minimum, [](const Tensor& x) { return minimum(x, -1); }, [](double x) { return std::min(x, -1.0); }, kSym, kAll,
    same)
SCALAR_TEST(
    eq, [](const Tensor& x) { return eq(x, 1); }, [](double x) { return x == 1 ? 1.0 : 0.0; }, kTies, kAll, to_bool)
SCALAR_TEST(
    ne, [](const Tensor& x) { return ne(x, 1); }, [](double x) { return x != 1 ? 1.0 : 0.0; }, kTies, kAll, to_bool)
SCALAR_TEST(
    lt, [](const Tensor& x) { return lt(x, 0.5); }, [](double x) { return x < 0.5 ? 1.0 : 0.0; }, kTies, kAll, to_bool)
SCALAR_TEST(
    le, [](const Tensor& x) { return le(x, 0); }, [](double x) { return x <= 0 ? 1.0 : 0.0; }, kTies, kAll, to_bool)
SCALAR_TEST(
    gt, [](const Tensor& x) { return gt(x, -1); }, [](double x) { return x > -1 ? 1.0 : 0.0; }, kTies, kAll, to_bool)
SCALAR_TEST(
    ge, [](const Tensor& x) { return ge(x, 1); }, [](double x) { return x >= 1 ? 1.0 : 0.0; }, kTies, kAll, to_bool)
SCALAR_TEST(
    operators_compare, [](const Tensor& x) { return (x == 1) != (x > 0); },
    [](double x) { return (x == 1) != (x > 0) ? 1.0 : 0.0; }, kTies, kAll, to_bool)
SCALAR_TEST(
    operators_compare_rest, [](const Tensor& x) { return logical_not((x < 1) == (x <= 0)); },
    [](double x) { return (x < 1) == (x <= 0) ? 0.0 : 1.0; }, kTies, kAll, to_bool)
SCALAR_TEST(
    ge_operator, [](const Tensor& x) { return x >= 0; }, [](double x) { return x >= 0 ? 1.0 : 0.0; }, kTies, kAll,
    to_bool)
// The chapter's expression: (z + 2).exp() * y.
SCALAR_TEST(
    chapter_expression, [](const Tensor& x) { return (x + 2).exp() * x; }, [](double x) { return std::exp(x + 2) * x; },
    kSym, kFloat, same, /*half_scale: x + 2 rounded to 5 * 2^-11 (f16), then exp, then *=*/3)

ANVIL_INSTANTIATE_DEVICE_TEST(ElementwiseScalar);

// ---- where and clamp -------------------------------------------------------------------------

class ElementwiseWhere : public anvil::testing::DeviceTest {};

TEST_P(ElementwiseWhere, BroadcastsAllThree) {
  const Device d = device();
  struct Case {
    ref::Dims c, a, b;
  };
  const Case cases[] = {
      {{7}, {7}, {7}},          {{1023}, {1023}, {1}}, {{3, 1}, {1, 4}, {4}},         {{}, {2, 3}, {}},
      {{2, 1, 5}, {3, 1}, {5}}, {{0, 3}, {3}, {1}},    {{33, 65}, {33, 65}, {33, 65}}};
  std::uint64_t seed = 900;
  for (DType dt : kAll)
    for (const auto& c : cases)
      for (auto [la, lb] : kLayoutPairs) {
        SCOPED_TRACE(std::string(to_string(dt)) + " cond " + ref::dims_str(c.c) + " a " + ref::dims_str(c.a) + " b " +
                     ref::dims_str(c.b) + " " + ref::name(la) + "/" + ref::name(lb));
        ref::guarded([&] {
          const auto cond = ref::make_input(c.c, lb, boolean, d, Domain{0, 1, true}, seed++);
          const Domain dom{-5, 5, !is_floating(dt)};
          const auto a = ref::make_input(c.a, la, dt, d, dom, seed++);
          const auto b = ref::make_input(c.b, lb, dt, d, dom, seed++);
          const Tensor out = where(cond.t, a.t, b.t);
          EXPECT_EQ(out.dtype(), dt);
          EXPECT_EQ(out.device(), d);
          EXPECT_TRUE(ref::exact(out, ref::where(cond.r, a.r, b.r)));
          // Scalar branches.
          EXPECT_TRUE(ref::close(where(cond.t, Scalar(0.5), b.t), ref::where(cond.r, ref::Array({}, {0.5}), b.r),
                                 tolerance_for(float_for_int(dt))));
          EXPECT_TRUE(ref::exact(where(cond.t, a.t, Scalar(-2)), ref::where(cond.r, a.r, ref::Array({}, {-2}))));
        });
      }
}

TEST_P(ElementwiseWhere, ComputedConditionAndPromotion) {
  const Device d = device();
  auto x = ref::make_input({4, 6}, Layout::Transposed, f32, d, kSym, 3);
  auto out = where(x.t > 0, x.t, zeros({1}, d));  // relu through where
  EXPECT_TRUE(ref::exact(out, ref::map(x.r, [](double v) { return v > 0 ? v : 0.0; })));
  // where promotes its two value operands like a binary op.
  auto i = ones({3}, d, i32), f = full({3}, 0.5, d);
  auto m = tensor(std::vector<std::uint8_t>{1, 0, 1}, d, boolean);
  auto w = where(m, i, f);
  EXPECT_EQ(w.dtype(), f32);
  EXPECT_TRUE(ref::exact(w, ref::Array({3}, {1, 0.5, 1})));
  EXPECT_EQ(where(m, i, Scalar(2)).dtype(), i32);
  EXPECT_EQ(where(m, i, Scalar(2.5)).dtype(), f32);
}

TEST_P(ElementwiseWhere, ConditionMustBeBool) {
  const Device d = device();
  EXPECT_THROW(where(ones({3}, d), ones({3}, d), zeros({3}, d)), DTypeError);
  EXPECT_THROW(where(ones({3}, d, i64), ones({3}, d), zeros({3}, d)), DTypeError);
}

TEST_P(ElementwiseWhere, ClampOnEveryLayout) {
  const Device d = device();
  std::uint64_t seed = 40;
  for (DType dt : kAll)
    for (const auto& shape : kShapes)
      for (Layout layout : kLayouts) {
        SCOPED_TRACE(trace(dt, shape, layout));
        ref::guarded([&] {
          const auto x = ref::make_input(shape, layout, dt, d, Domain{-10, 10, !is_floating(dt)}, seed++);
          EXPECT_TRUE(ref::exact(clamp(x.t, Scalar(-3), Scalar(4)),
                                 ref::map(x.r, [](double v) { return std::clamp(v, -3.0, 4.0); })));
          EXPECT_TRUE(
              ref::exact(x.t.clamp(Scalar(0), std::nullopt), ref::map(x.r, [](double v) { return std::max(v, 0.0); })));
          EXPECT_TRUE(ref::exact(clamp(x.t, std::nullopt, Scalar(-2)),
                                 ref::map(x.r, [](double v) { return std::min(v, -2.0); })));
          EXPECT_EQ(clamp(x.t, Scalar(-3), Scalar(4)).dtype(), dt);
        });
      }
}

// masked_fill keeps x's dtype and broadcasts the mask (torch.masked_fill).
TEST_P(ElementwiseWhere, MaskedFill) {
  const Device d = device();
  auto x = ref::make_input({2, 3}, Layout::Transposed, f32, d, kSym, 5);
  auto m = tensor(std::vector<std::uint8_t>{1, 0, 1}, d, boolean);
  auto out = masked_fill(x.t, m, -1.5);
  EXPECT_EQ(out.shape(), Shape({2, 3}));
  ref::Array want = x.r;
  for (std::int64_t i = 0; i < 6; ++i)
    if (i % 3 != 1) want.v[i] = -1.5;
  EXPECT_TRUE(ref::exact(out, want));
  EXPECT_TRUE(ref::exact(x.t.masked_fill(m, -1.5), want));
  auto i = tensor(std::vector<std::int64_t>{1, 2, 3}, d);
  EXPECT_EQ(masked_fill(i, m, 7.9).dtype(), i64);  // the value truncates into x's dtype
  EXPECT_EQ(masked_fill(i, m, 7.9).to_vector<std::int64_t>(), (std::vector<std::int64_t>{7, 2, 7}));
  auto b = tensor(std::vector<std::uint8_t>{1, 1, 0}, d, boolean);
  EXPECT_EQ(masked_fill(b, m, 0).to(i32).to_vector<std::int32_t>(), (std::vector<std::int32_t>{0, 1, 0}));
  EXPECT_EQ(masked_fill(ones({0, 3}, d), m, 2).shape(), Shape({0, 3}));
  EXPECT_THROW(masked_fill(x.t, ones({3}, d), 0), DTypeError);
  EXPECT_THROW(masked_fill(x.t, tensor(std::vector<std::uint8_t>{1, 0}, d, boolean), 0), ShapeError);
}

// tril/triu against the definition, on batches, offsets past either edge and every layout.
TEST_P(ElementwiseWhere, TrilTriu) {
  const Device d = device();
  std::uint64_t seed = 40;
  for (DType dt : kAll)
    for (const ref::Dims& shape : std::vector<ref::Dims>{{4, 6}, {2, 5, 3}, {1, 1}, {0, 3}, {3, 33, 65}})
      for (Layout layout : kLayouts)
        for (std::int64_t k : {-7, -1, 0, 2, 70}) {
          SCOPED_TRACE(trace(dt, shape, layout) + " diagonal=" + std::to_string(k));
          const ref::Input in = ref::make_input(shape, layout, dt, d, kSym, seed++);
          const std::int64_t rows = shape[shape.size() - 2], cols = shape.back();
          ref::Array lo = in.r, up = in.r;
          for (std::size_t e = 0; e < lo.v.size(); ++e) {
            const std::int64_t c = static_cast<std::int64_t>(e) % cols;
            const std::int64_t r = (static_cast<std::int64_t>(e) / cols) % rows;
            if (c - r > k) lo.v[e] = 0;
            if (c - r < k) up.v[e] = 0;
          }
          EXPECT_TRUE(ref::exact(tril(in.t, k), lo));
          EXPECT_TRUE(ref::exact(in.t.triu(k), up));
          EXPECT_EQ(tril(in.t, k).dtype(), dt);
        }
  EXPECT_TRUE(ref::exact(ones({2, 2}, d).tril(), ref::Array({2, 2}, {1, 0, 1, 1})));
  EXPECT_TRUE(ref::exact(triu(ones({2, 2}, d)), ref::Array({2, 2}, {1, 1, 0, 1})));
  EXPECT_THROW(tril(ones({3}, d)), ShapeError);
}

ANVIL_INSTANTIATE_DEVICE_TEST(ElementwiseWhere);

// ---- in place ------------------------------------------------------------------------------

class ElementwiseInPlace : public anvil::testing::DeviceTest {};

using InPlace2 = std::function<void(Tensor&, const Tensor&)>;
using InPlace1 = std::function<void(Tensor&)>;

// Runs `op` on a destination that is either a whole contiguous tensor or a
// transposed view of one, with `other` broadcasting into it; checks the
// values and that the write went into the original storage.
void run_in_place2(Device d, const InPlace2& op, const Ref2& r, Domain dom_other, const std::vector<DType>& dtypes) {
  std::uint64_t seed = 7000;
  const std::pair<ref::Dims, ref::Dims> shapes[] = {{{7}, {7}},       {{1023}, {1}},      {{100003}, {100003}},
                                                    {{33, 65}, {65}}, {{4, 5}, {4, 1}},   {{0, 3}, {3}},
                                                    {{}, {}},         {{2, 3, 7}, {3, 7}}};
  for (DType dt : dtypes)
    for (const auto& [sx, so] : shapes)
      for (auto [lx, lo] : kLayoutPairs) {
        SCOPED_TRACE(std::string(to_string(dt)) + " self " + ref::dims_str(sx) + " " + ref::name(lx) + ", other " +
                     ref::dims_str(so) + " " + ref::name(lo));
        ref::guarded([&] {
          Domain dx = kSym, dot = dom_other;
          if (!is_floating(dt)) dx.integer_valued = dot.integer_valued = true;
          ref::Input x = ref::make_input(sx, lx, dt, d, dx, seed++);
          const ref::Input o = ref::make_input(so, lo, dt, d, dot, seed++);
          const Tensor alias = x.t;                // another handle to the same tensor
          const Tensor base_view = x.t.flatten();  // a view or copy of x before the op
          const bool was_view = base_view.shares_storage(x.t);
          op(x.t, o.t);
          const ref::Array want = expected_in(ref::zip(x.r, o.r, r), dt);
          EXPECT_EQ(x.t.dtype(), dt);
          EXPECT_TRUE(x.t.is_same(alias));
          EXPECT_TRUE(ref::close(x.t, want, tolerance_for(dt)));
          if (was_view) {
            EXPECT_TRUE(ref::close(base_view, ref::reshape(want, {want.numel()}), tolerance_for(dt)));
          }
          EXPECT_TRUE(ref::exact(o.t, o.r));
        });
      }
}

TEST_P(ElementwiseInPlace, add_) {
  run_in_place2(
      device(), [](Tensor& x, const Tensor& o) { EXPECT_EQ(&x.add_(o), &x); }, std::plus<double>(), kSym, kAll);
}
TEST_P(ElementwiseInPlace, add_assign_operator) {
  run_in_place2(
      device(), [](Tensor& x, const Tensor& o) { EXPECT_EQ(&(x += o), &x); }, std::plus<double>(), kSym, kAll);
}
TEST_P(ElementwiseInPlace, sub_) {
  run_in_place2(
      device(), [](Tensor& x, const Tensor& o) { x.sub_(o); }, std::minus<double>(), kSym, kAll);
}
TEST_P(ElementwiseInPlace, sub_assign_operator) {
  run_in_place2(
      device(), [](Tensor& x, const Tensor& o) { x -= o; }, std::minus<double>(), kSym, kAll);
}
TEST_P(ElementwiseInPlace, mul_) {
  run_in_place2(
      device(), [](Tensor& x, const Tensor& o) { x.mul_(o); }, std::multiplies<double>(), kSym, kAll);
}
TEST_P(ElementwiseInPlace, mul_assign_operator) {
  run_in_place2(
      device(), [](Tensor& x, const Tensor& o) { x *= o; }, std::multiplies<double>(), kSym, kAll);
}
TEST_P(ElementwiseInPlace, div_) {
  run_in_place2(
      device(), [](Tensor& x, const Tensor& o) { x.div_(o); }, std::divides<double>(), kDivisor, kFloat);
}
TEST_P(ElementwiseInPlace, div_assign_operator) {
  run_in_place2(
      device(), [](Tensor& x, const Tensor& o) { x /= o; }, std::divides<double>(), kDivisor, kFloat);
}
TEST_P(ElementwiseInPlace, copy_) {
  run_in_place2(
      device(), [](Tensor& x, const Tensor& o) { EXPECT_EQ(&x.copy_(o), &x); }, [](double, double y) { return y; },
      kSym, kAll);
}

void run_in_place1(Device d, const InPlace1& op, const Ref1& r, Domain dom, const std::vector<DType>& dtypes) {
  std::uint64_t seed = 8000;
  for (DType dt : dtypes)
    for (const auto& shape : kShapes)
      for (Layout layout : kLayouts) {
        SCOPED_TRACE(trace(dt, shape, layout));
        ref::guarded([&] {
          Domain dx = dom;
          if (!is_floating(dt)) dx.integer_valued = true;
          ref::Input x = ref::make_input(shape, layout, dt, d, dx, seed++);
          const Tensor alias = x.t;
          op(x.t);
          EXPECT_TRUE(x.t.is_same(alias));
          EXPECT_EQ(x.t.dtype(), dt);
          EXPECT_TRUE(ref::close(x.t, expected_in(ref::map(x.r, r), dt), tolerance_for(dt)));
        });
      }
}

TEST_P(ElementwiseInPlace, add_scalar) {
  run_in_place1(
      device(), [](Tensor& x) { EXPECT_EQ(&x.add_(3), &x); }, [](double v) { return v + 3; }, kSym, kAll);
}
TEST_P(ElementwiseInPlace, add_assign_scalar) {
  run_in_place1(
      device(), [](Tensor& x) { x += 0.5; }, [](double v) { return v + 0.5; }, kSym, kFloat);
}
TEST_P(ElementwiseInPlace, sub_scalar) {
  run_in_place1(
      device(), [](Tensor& x) { x.sub_(2); }, [](double v) { return v - 2; }, kSym, kAll);
}
TEST_P(ElementwiseInPlace, sub_assign_scalar) {
  run_in_place1(
      device(), [](Tensor& x) { x -= 2; }, [](double v) { return v - 2; }, kSym, kAll);
}
TEST_P(ElementwiseInPlace, mul_scalar) {
  run_in_place1(
      device(), [](Tensor& x) { x.mul_(-3); }, [](double v) { return -3 * v; }, kSym, kAll);
}
TEST_P(ElementwiseInPlace, mul_assign_scalar) {
  run_in_place1(
      device(), [](Tensor& x) { x *= 1.5; }, [](double v) { return 1.5 * v; }, kSym, kFloat);
}
TEST_P(ElementwiseInPlace, div_scalar) {
  run_in_place1(
      device(), [](Tensor& x) { x.div_(4); }, [](double v) { return v / 4; }, kSym, kFloat);
}
TEST_P(ElementwiseInPlace, div_assign_scalar) {
  run_in_place1(
      device(), [](Tensor& x) { x /= -2; }, [](double v) { return v / -2; }, kSym, kFloat);
}
TEST_P(ElementwiseInPlace, pow_scalar) {
  run_in_place1(
      device(), [](Tensor& x) { x.pow_(2); }, [](double v) { return v * v; }, kSym, kAll);
}
TEST_P(ElementwiseInPlace, clamp_) {
  run_in_place1(
      device(), [](Tensor& x) { EXPECT_EQ(&x.clamp_(Scalar(-1), Scalar(1)), &x); },
      [](double v) { return std::clamp(v, -1.0, 1.0); }, kSym, kAll);
}
TEST_P(ElementwiseInPlace, relu_) {
  run_in_place1(
      device(), [](Tensor& x) { x.relu_(); }, [](double v) { return std::max(v, 0.0); }, kSym, kAll);
}
TEST_P(ElementwiseInPlace, exp_) {
  run_in_place1(
      device(), [](Tensor& x) { x.exp_(); }, [](double v) { return std::exp(v); }, kSym, kFloat);
}
TEST_P(ElementwiseInPlace, neg_) {
  run_in_place1(
      device(), [](Tensor& x) { x.neg_(); }, [](double v) { return -v; }, kSym, kAll);
}
TEST_P(ElementwiseInPlace, fill_) {
  run_in_place1(
      device(), [](Tensor& x) { EXPECT_EQ(&x.fill_(7), &x); }, [](double) { return 7.0; }, kSym, kAll);
}
TEST_P(ElementwiseInPlace, zero_) {
  run_in_place1(
      device(), [](Tensor& x) { x.zero_(); }, [](double) { return 0.0; }, kSym, kAll);
}

TEST_P(ElementwiseInPlace, WritesThroughAViewIntoTheBase) {
  const Device d = device();
  auto base = zeros({4, 6}, d);
  auto col = base.select(1, 2);  // stride 6
  col.add_(1);
  auto blk = base.slice(0, 1, 4, 2).slice(1, 3, 6);  // rows 1,3; cols 3..5
  blk += 2;
  base.t().select(0, 0).fill_(-1);  // column 0
  std::vector<double> want(24, 0.0);
  for (int r = 0; r < 4; ++r) want[static_cast<std::size_t>(r * 6 + 2)] = 1;
  for (int r : {1, 3})
    for (int c = 3; c < 6; ++c) want[static_cast<std::size_t>(r * 6 + c)] = 2;
  for (int r = 0; r < 4; ++r) want[static_cast<std::size_t>(r * 6)] = -1;
  EXPECT_TRUE(ref::exact(base, ref::Array({4, 6}, want)));
}

TEST_P(ElementwiseInPlace, ResultMustFitTheDestination) {
  const Device d = device();
  auto i = ones({3}, d, i32);
  // The destination's dtype must hold the result: int += float is an error.
  EXPECT_THROW(i += 2.5, DTypeError);
  EXPECT_THROW(i.add_(full({3}, 0.5, d)), DTypeError);
  EXPECT_THROW(i.div_(2), DTypeError);  // true division gives a float
  EXPECT_THROW(i /= ones({3}, d, i32), DTypeError);
  EXPECT_TRUE(ref::exact(i, ref::Array::filled({3}, 1))) << "a failed in-place op must leave its destination alone";
  // A float destination takes an integer operand.
  auto f = ones({3}, d);
  f += ones({3}, d, i64);
  EXPECT_TRUE(ref::exact(f, ref::Array::filled({3}, 2)));
  EXPECT_EQ(f.dtype(), f32);
  // The other operand broadcasts into the destination, never the reverse.
  auto small = ones({3}, d);
  EXPECT_THROW(small += ones({2, 3}, d), ShapeError);
  EXPECT_TRUE(ref::exact(small, ref::Array::filled({3}, 1)));
}

TEST_P(ElementwiseInPlace, OutVariantsWriteIntoExistingTensors) {
  const Device d = device();
  auto a = ref::make_input({5, 4}, Layout::Transposed, f32, d, kSym, 1);
  auto b = ref::make_input({4}, Layout::Stepped, f32, d, kSym, 2);
  auto out = empty({5, 4}, d);
  const Tensor alias = out;
  add_out(out, a.t, b.t);
  EXPECT_TRUE(out.is_same(alias));
  EXPECT_TRUE(ref::close(out, ref::zip(a.r, b.r, std::plus<double>()), f32));
  mul_out(out, a.t, b.t);
  EXPECT_TRUE(ref::close(out, ref::zip(a.r, b.r, std::multiplies<double>()), f32));
  auto wrong = empty({4, 5}, d);
  EXPECT_THROW(add_out(wrong, a.t, b.t), ShapeError);
  EXPECT_THROW(mul_out(wrong, a.t, b.t), ShapeError);
}

// Note [Overlapping operands]: an input sharing some of the output's
// elements is read as it was before the op, on every device and thread
// count (100,003 elements: many work-groups and threads, where a shifted
// copy read elements already overwritten); an input that is exactly the
// output is read in place.
TEST_P(ElementwiseInPlace, OverlappingInputsAreReadAsTheyWere) {
  const Device d = device();
  const std::int64_t n = 100003;
  const std::vector<double> before = arange(0, n, 1, cpu(), f64).to_vector<double>();
  auto expect_after = [&](const Tensor& x, const std::function<double(std::int64_t)>& want) {
    const std::vector<double> got = x.to(f64).cpu().to_vector<double>();
    std::int64_t wrong = 0;
    for (std::int64_t i = 0; i < n; ++i) wrong += got[static_cast<std::size_t>(i)] != want(i) ? 1 : 0;
    EXPECT_EQ(wrong, 0) << "of " << n << " elements";
  };
  auto fresh = [&] { return arange(0, n, 1, d, f32); };
  auto x = fresh();
  x.narrow(0, 0, n - 1).copy_(x.narrow(0, 1, n - 1));  // shift left
  expect_after(x, [&](std::int64_t i) { return i < n - 1 ? before[i + 1] : before[i]; });
  x = fresh();
  x.narrow(0, 1, n - 1).copy_(x.narrow(0, 0, n - 1));  // shift right
  expect_after(x, [&](std::int64_t i) { return i > 0 ? before[i - 1] : before[i]; });
  x = fresh();
  x.narrow(0, 1, n - 1).add_(x.narrow(0, 0, n - 1));
  expect_after(x, [&](std::int64_t i) { return i > 0 ? before[i] + before[i - 1] : before[i]; });
  x = fresh();
  Tensor out = x.narrow(0, 0, n - 1);
  add_out(out, x.narrow(0, 1, n - 1), ones({n - 1}, d));
  expect_after(x, [&](std::int64_t i) { return i < n - 1 ? before[i + 1] + 1 : before[i]; });
  x = fresh();
  x.add_(x);  // exactly the output: read in place
  expect_after(x, [&](std::int64_t i) { return 2 * before[i]; });
  // Rows gathered or scattered from this tensor's own memory.
  Tensor col = arange(0, 5, 1, d, f32).reshape({5, 1});
  col.index_copy_(0, tensor(std::vector<std::int64_t>{1, 2, 3}, d), col.narrow(0, 0, 3));
  EXPECT_EQ(col.cpu().to_vector<float>(), (std::vector<float>{0, 0, 1, 2, 4}));
  col = arange(0, 5, 1, d, f32).reshape({5, 1});
  col.index_add_(0, tensor(std::vector<std::int64_t>{1, 2, 3}, d), col.narrow(0, 0, 3));
  EXPECT_EQ(col.cpu().to_vector<float>(), (std::vector<float>{0, 1, 3, 5, 4}));
  col = arange(0, 5, 1, d, f32).reshape({5, 1});
  col.scatter_add_(0, tensor(std::vector<std::int64_t>{1, 2, 3}, d).reshape({3, 1}), col.narrow(0, 0, 3));
  EXPECT_EQ(col.cpu().to_vector<float>(), (std::vector<float>{0, 1, 3, 5, 4}));
  // A matrix product into one of its operands reads it whole first.
  const auto a = ref::make_input({48, 48}, Layout::Contiguous, f32, d, kSym, 3);
  const auto b = ref::make_input({48, 48}, Layout::Contiguous, f32, d, kSym, 4);
  Tensor into_a = a.t.clone();
  mm_out(into_a, into_a, b.t);
  EXPECT_TRUE(ref::close(into_a, ref::matmul(a.r, b.r), ref::Tolerance{1e-4, 1e-4}));
}

// clamp's bounds take part in the result's dtype, as in PyTorch; in place,
// a bound the tensor cannot hold is an error.
TEST_P(ElementwiseInPlace, ClampBoundsPromoteIntegers) {
  const Device d = device();
  const Tensor i = tensor(std::vector<std::int32_t>{-5, -1, 0, 1, 3, 5}, d);
  const Tensor c = clamp(i, -1.5, 2.5);
  EXPECT_EQ(c.dtype(), f32);
  EXPECT_EQ(c.cpu().to_vector<float>(), (std::vector<float>{-1.5f, -1, 0, 1, 2.5f, 2.5f}));
  EXPECT_EQ(clamp(i, -1, 2).dtype(), i32) << "integer bounds keep the dtype";
  Tensor j = i.clone();
  EXPECT_THROW(j.clamp_(0.5, std::nullopt), DTypeError);
  EXPECT_EQ(j.cpu().to_vector<std::int32_t>(), i.cpu().to_vector<std::int32_t>());
}

// An expanded tensor's elements share memory: writing into it is an error
// naming the op (PyTorch's rule), and nothing is written.
TEST_P(ElementwiseInPlace, ElementsSharingMemoryAreNotWritten) {
  const Device d = device();
  const Tensor base = zeros({1}, d);
  Tensor x = base.expand({5});
  auto expect_refused = [&](const char* op, const std::function<void()>& f) {
    try {
      f();
      ADD_FAILURE() << op << ": no error";
    } catch (const ValueError& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find(op), std::string::npos) << m;
      EXPECT_NE(m.find("clone()"), std::string::npos) << m;
    }
  };
  expect_refused("add_", [&] { x.add_(1); });
  expect_refused("copy_", [&] { x.copy_(arange(0, 5, 1, d, f32)); });
  expect_refused("fill_", [&] { x.fill_(3); });
  expect_refused("relu_", [&] { x.relu_(); });
  expect_refused("add", [&] { add_out(x, ones({5}, d), ones({5}, d)); });
  EXPECT_EQ(base.item<float>(), 0.0f) << "nothing was written";
  Tensor y = x.clone();
  y.add_(1);
  EXPECT_TRUE(ref::exact(y, ref::Array::filled({5}, 1)));
}

ANVIL_INSTANTIATE_DEVICE_TEST(ElementwiseInPlace);

}  // namespace
