// Conformance of the per-element meaning (src/kernels/scalar.h) over special
// values: NaN, ±inf, ±0, denormals, ±1, large and small, integer limits, zero
// divisors; every unary and binary op, every dtype the op takes.
//  - CpuMatchesPyTorch: the CPU against PyTorch 1.13's results
//    (tests/conformance_reference.inc, written by tests/python/conformance_reference.py);
//  - Conformance.AgreesWithTheCpu: every device against the CPU, tensor and
//    scalar operands alike.
// Exact ops must agree bit for bit (NaN matches any NaN; the sign of zero
// counts). Ops that round through the platform's math library are held to
// the ulp bound stated in their row (kUlp: f32, f64).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "core/backend.h"
#include "core/env_flag.h"
#include "device_test.h"
#include "ops/op_common.h"

namespace {

using namespace anvil;

struct RefInputs {
  const char* dtype;
  const char* bits;
};
struct RefResult {
  const char* op;
  const char* dtype;
  const char* out_dtype;
  const char* bits;
};
#include "conformance_reference.inc"

using Bits = std::vector<std::uint64_t>;

std::string tname(DType t) { return std::string(to_string(t)); }

DType dtype_named(const std::string& s) {
  for (DType t : {f32, f64, i32, i64, u8, boolean})
    if (s == to_string(t)) return t;
  throw std::invalid_argument("unknown dtype " + s);
}

Bits parse_bits(const char* text, DType t) {
  Bits out;
  if (t == boolean) {
    for (const char* p = text; *p; ++p) out.push_back(*p == '1');
    return out;
  }
  std::istringstream in(text);
  std::string word;
  while (in >> word) out.push_back(std::stoull(word, nullptr, 16));
  return out;
}

const Bits& inputs(DType t) {
  static const std::map<DType, Bits> table = [] {
    std::map<DType, Bits> m;
    for (const RefInputs& r : kRefInputs) m[dtype_named(r.dtype)] = parse_bits(r.bits, dtype_named(r.dtype));
    return m;
  }();
  return table.at(t);
}

template <typename T>
Tensor make_typed(const Bits& b, Device d, DType t) {
  std::vector<T> v(b.size());
  for (std::size_t i = 0; i < b.size(); ++i) std::memcpy(&v[i], &b[i], sizeof(T));  // little-endian low bytes
  return from_host(v.data(), {static_cast<std::int64_t>(v.size())}, t, d);
}

Tensor make(const Bits& b, DType t, Device d) {
  switch (t) {
    case DType::Bool:
    case DType::U8:
      return make_typed<std::uint8_t>(b, d, t);
    case DType::I32:
      return make_typed<std::uint32_t>(b, d, t);
    case DType::I64:
      return make_typed<std::uint64_t>(b, d, t);
    case DType::F32:
      return make_typed<std::uint32_t>(b, d, t);
    case DType::F64:
      return make_typed<std::uint64_t>(b, d, t);
    case DType::F16:
    case DType::BF16:
      return make_typed<std::uint16_t>(b, d, t);
  }
  return {};
}

Bits bits_of(const Tensor& t) {
  const Tensor h = t.to(cpu()).contiguous();
  const std::size_t n = static_cast<std::size_t>(h.numel()), es = element_size(h.dtype());
  Bits out(n, 0);
  const auto* p = static_cast<const unsigned char*>(h.raw_data_ptr());
  for (std::size_t i = 0; i < n; ++i) std::memcpy(&out[i], p + i * es, es);
  return out;
}

// Both operands of a binary op: every ordered pair of the special values.
std::pair<Bits, Bits> pairs(const Bits& v) {
  Bits a, b;
  for (std::uint64_t x : v)
    for (std::uint64_t y : v) a.push_back(x), b.push_back(y);
  return {a, b};
}

// The integer Div primitive: the frontend's div promotes integers to f32 (as
// PyTorch), so only the primitive reaches scalar.h's integer division.
Tensor int_div_primitive(const Tensor& a, const Tensor& b) {
  Tensor out = empty(a.shape(), a.dtype(), a.device());
  const detail::ElementwiseArgs args = detail::elementwise_args(out, {&a, &b});
  out.impl_ref().backend().binary(a.device().index(), detail::BinaryOp::Div, args);
  return out;
}

// The internal op that an activation's gradient rule runs.
std::function<Tensor(const Tensor&, const Tensor&)> activation_backward(detail::BinaryOp op) {
  return [op](const Tensor& g, const Tensor& y) { return detail::activation_backward(op, g, y); };
}

// ---- the table -------------------------------------------------------------------------

using Fn1 = std::function<Tensor(const Tensor&)>;
using Fn2 = std::function<Tensor(const Tensor&, const Tensor&)>;
using FnS = std::function<Tensor(const Tensor&, const Scalar&)>;

struct Ulp {
  int f32 = 0, f64 = 0;  // 0: exact
};

struct OpCase {
  std::string name;  // the op's name(); a suffix tells variants apart: "clamp(-1,1)"
  Fn1 unary;
  Fn2 binary;
  FnS with_scalar;  // binary ops: the tensor-scalar overload
  std::vector<DType> dtypes;
  Ulp ulp;
};

const std::vector<DType> kNumeric = {f32, f64, i32, i64, u8};
const std::vector<DType> kEvery = {f32, f64, i32, i64, u8, boolean};
const std::vector<DType> kSigned = {f32, f64, i32, i64};
const std::vector<DType> kFloat = {f32, f64};

// Ulp bounds (f32, f64): what the OpenCL 1.2 full profile allows a device's
// math library (§7.4: exp, log, expm1 3; log1p 2; sin, cos 4; tanh 5; pow, erf 16; sqrt 3 and
// divide 2.5 in f32, correctly rounded in f64) plus the CPU's own error (its
// f32 exp is a polynomial of ~2 ulp), rounded up; CUDA's documented bounds
// are within them. "measured": the largest distance seen here (CPU against
// PyTorch 1.13, PoCL against the CPU; ANVIL_CONFORMANCE_REPORT=1 prints it).
std::vector<OpCase> cases() {
  auto un = [](std::string n, Fn1 f, std::vector<DType> d, Ulp u = {}) {
    return OpCase{std::move(n), std::move(f), nullptr, nullptr, std::move(d), u};
  };
  auto bin = [](std::string n, Fn2 f, FnS s, std::vector<DType> d, Ulp u = {}) {
    return OpCase{std::move(n), nullptr, std::move(f), std::move(s), std::move(d), u};
  };
  const double nan = std::numeric_limits<double>::quiet_NaN();
  return {
      un(
          "neg", [](const Tensor& x) { return neg(x); }, kNumeric),
      un(
          "abs", [](const Tensor& x) { return abs(x); }, kEvery),
      un("exp", [](const Tensor& x) { return exp(x); }, kEvery, {5, 3}),          // measured 0, 1
      un("log", [](const Tensor& x) { return log(x); }, kEvery, {3, 3}),          // measured 0, 0
      un("sqrt", [](const Tensor& x) { return sqrt(x); }, kEvery, {3, 0}),        // measured 0, 0
      un("rsqrt", [](const Tensor& x) { return rsqrt(x); }, kEvery, {4, 1}),      // measured 0, 0
      un("sin", [](const Tensor& x) { return sin(x); }, kEvery, {4, 4}),          // measured 1, 1
      un("cos", [](const Tensor& x) { return cos(x); }, kEvery, {4, 4}),          // measured 1, 1
      un("tanh", [](const Tensor& x) { return tanh(x); }, kEvery, {5, 5}),        // measured 1, 0
      un("sigmoid", [](const Tensor& x) { return sigmoid(x); }, kEvery, {6, 4}),  // measured 0, 0
      un(
          "relu", [](const Tensor& x) { return relu(x); }, kEvery),
      un(
          "sign", [](const Tensor& x) { return sign(x); }, kNumeric),
      un(
          "square", [](const Tensor& x) { return square(x); }, kEvery),
      un("reciprocal", [](const Tensor& x) { return reciprocal(x); }, kEvery, {3, 0}),  // measured 0, 0
      un(
          "logical_not", [](const Tensor& x) { return logical_not(x); }, kEvery),
      un("log1p", [](const Tensor& x) { return log1p(x); }, kEvery, {3, 3}),  // measured 1, 1
      un("expm1", [](const Tensor& x) { return expm1(x); }, kEvery, {3, 3}),  // measured 1, 1
      un("erf", [](const Tensor& x) { return erf(x); }, kEvery, {16, 16}),    // measured 1, 0
      // x/2 (1 + erf(x/√2)) cancels for x < 0: erf's error grows by up to ~80x
      // at x = -2.5 (1 + erf = 0.012), so erf's 16 ulp may become ~1300.
      un("gelu", [](const Tensor& x) { return gelu(x); }, kEvery, {2048, 2048}),    // measured 2, 0
      un("softplus", [](const Tensor& x) { return softplus(x); }, kEvery, {6, 6}),  // measured 1, 1
      un(
          "floor", [](const Tensor& x) { return floor(x); }, kNumeric),
      un(
          "ceil", [](const Tensor& x) { return ceil(x); }, kNumeric),
      un(
          "round", [](const Tensor& x) { return round(x); }, kNumeric),
      un("atan", [](const Tensor& x) { return atan(x); }, kEvery, {4, 4}),  // measured 1, 1
      un("asin", [](const Tensor& x) { return asin(x); }, kEvery, {4, 4}),  // measured 0, 0
      un("acos", [](const Tensor& x) { return acos(x); }, kEvery, {4, 4}),  // measured 0, 1
      // OpenCL 1.2 allows sinh, cosh, asinh and acosh 4 ulp, atanh 5.
      un("sinh", [](const Tensor& x) { return sinh(x); }, kEvery, {4, 4}),    // measured 1, 1
      un("cosh", [](const Tensor& x) { return cosh(x); }, kEvery, {4, 4}),    // measured 1, 1
      un("asinh", [](const Tensor& x) { return asinh(x); }, kEvery, {4, 4}),  // measured 1, 1
      un("acosh", [](const Tensor& x) { return acosh(x); }, kEvery, {4, 4}),  // measured 0, 1
      un("atanh", [](const Tensor& x) { return atanh(x); }, kEvery, {5, 5}),  // measured 0, 1
      un(
          "isnan", [](const Tensor& x) { return isnan(x); }, kEvery),
      un(
          "isinf", [](const Tensor& x) { return isinf(x); }, kEvery),
      un(
          "isfinite", [](const Tensor& x) { return isfinite(x); }, kEvery),
      un(
          "clamp(-1,1)", [](const Tensor& x) { return clamp(x, -1.0, 1.0); }, kFloat),
      un(
          "clamp(0.5,)", [](const Tensor& x) { return clamp(x, 0.5, std::nullopt); }, kFloat),
      un(
          "clamp(,-0.5)", [](const Tensor& x) { return clamp(x, std::nullopt, -0.5); }, kFloat),
      un(
          "clamp(2,1)", [](const Tensor& x) { return clamp(x, 2.0, 1.0); }, kFloat),
      un(
          "clamp(nan,1)", [nan](const Tensor& x) { return clamp(x, nan, 1.0); }, kFloat),
      un("clamp(-5,5)", [](const Tensor& x) { return clamp(x, -5, 5); }, {i32, i64}),
      un("clamp(0,)", [](const Tensor& x) { return clamp(x, 0, std::nullopt); }, {i32, i64}),
      un("clamp(,0)", [](const Tensor& x) { return clamp(x, std::nullopt, 0); }, {i32, i64}),
      un("clamp(5,-5)", [](const Tensor& x) { return clamp(x, 5, -5); }, {i32, i64}),
      un("clamp(3,100)", [](const Tensor& x) { return clamp(x, 3, 100); }, {u8}),
      un("clamp(100,3)", [](const Tensor& x) { return clamp(x, 100, 3); }, {u8}),
      bin(
          "add", [](const Tensor& a, const Tensor& b) { return add(a, b); },
          [](const Tensor& a, const Scalar& s) { return add(a, s); }, kEvery),
      bin(
          "sub", [](const Tensor& a, const Tensor& b) { return sub(a, b); },
          [](const Tensor& a, const Scalar& s) { return sub(a, s); }, kNumeric),
      bin(
          "mul", [](const Tensor& a, const Tensor& b) { return mul(a, b); },
          [](const Tensor& a, const Scalar& s) { return mul(a, s); }, kEvery),
      bin(
          "div", [](const Tensor& a, const Tensor& b) { return div(a, b); },
          [](const Tensor& a, const Scalar& s) { return div(a, s); }, kEvery, {3, 0}),  // measured 0, 0
      bin("div_int", int_div_primitive, nullptr, {i32, i64, u8}),
      bin(
          "pow", [](const Tensor& a, const Tensor& b) { return pow(a, b); },
          [](const Tensor& a, const Scalar& s) { return pow(a, s); }, kEvery, {16, 16}),  // measured 1, 1
      bin(
          "maximum", [](const Tensor& a, const Tensor& b) { return maximum(a, b); },
          [](const Tensor& a, const Scalar& s) { return maximum(a, s); }, kEvery),
      bin(
          "minimum", [](const Tensor& a, const Tensor& b) { return minimum(a, b); },
          [](const Tensor& a, const Scalar& s) { return minimum(a, s); }, kEvery),
      // The activations' backward ops (internal: no tensor-scalar form),
      // against ATen's threshold_backward, sigmoid_backward, ….
      bin("relu_backward", activation_backward(detail::BinaryOp::ReluBackward), nullptr, kFloat),
      bin("sigmoid_backward", activation_backward(detail::BinaryOp::SigmoidBackward), nullptr, kFloat),
      bin("tanh_backward", activation_backward(detail::BinaryOp::TanhBackward), nullptr, kFloat),
      // cdf + x pdf cancels for x < 0 as gelu's sum does: gelu's bound.
      bin("gelu_backward", activation_backward(detail::BinaryOp::GeluBackward), nullptr, kFloat,
          {2048, 2048}),  // measured 6, 0
      bin("softplus_backward", activation_backward(detail::BinaryOp::SoftplusBackward), nullptr, kFloat,
          {6, 6}),  // measured 0, 2
      bin("atan2", [](const Tensor& a, const Tensor& b) { return atan2(a, b); }, nullptr, kEvery, {6, 6}),
      bin(
          "copysign", [](const Tensor& a, const Tensor& b) { return copysign(a, b); }, nullptr, kEvery),
      // OpenCL 1.2 allows hypot 4 ulp; logaddexp adds exp's and log1p's.
      bin("hypot", [](const Tensor& a, const Tensor& b) { return hypot(a, b); }, nullptr, kEvery, {4, 4}),
      bin("logaddexp", [](const Tensor& a, const Tensor& b) { return logaddexp(a, b); }, nullptr, kEvery, {8, 8}),
      bin("logaddexp2", [](const Tensor& a, const Tensor& b) { return logaddexp2(a, b); }, nullptr, kEvery, {8, 8}),
      bin(
          "floor_divide", [](const Tensor& a, const Tensor& b) { return floor_divide(a, b); },
          [](const Tensor& a, const Scalar& s) { return floor_divide(a, s); }, kNumeric),
      bin(
          "remainder", [](const Tensor& a, const Tensor& b) { return remainder(a, b); },
          [](const Tensor& a, const Scalar& s) { return remainder(a, s); }, kNumeric),
      bin(
          "bitwise_and", [](const Tensor& a, const Tensor& b) { return bitwise_and(a, b); },
          [](const Tensor& a, const Scalar& s) { return bitwise_and(a, s); }, {i32, i64, u8, boolean}),
      bin(
          "bitwise_or", [](const Tensor& a, const Tensor& b) { return bitwise_or(a, b); },
          [](const Tensor& a, const Scalar& s) { return bitwise_or(a, s); }, {i32, i64, u8, boolean}),
      bin(
          "bitwise_xor", [](const Tensor& a, const Tensor& b) { return bitwise_xor(a, b); },
          [](const Tensor& a, const Scalar& s) { return bitwise_xor(a, s); }, {i32, i64, u8, boolean}),
      bin(
          "bitwise_left_shift", [](const Tensor& a, const Tensor& b) { return bitwise_left_shift(a, b); },
          [](const Tensor& a, const Scalar& s) { return bitwise_left_shift(a, s); }, {i32, i64, u8}),
      bin(
          "bitwise_right_shift", [](const Tensor& a, const Tensor& b) { return bitwise_right_shift(a, b); },
          [](const Tensor& a, const Scalar& s) { return bitwise_right_shift(a, s); }, {i32, i64, u8}),
      bin(
          "eq", [](const Tensor& a, const Tensor& b) { return eq(a, b); },
          [](const Tensor& a, const Scalar& s) { return eq(a, s); }, kEvery),
      bin(
          "ne", [](const Tensor& a, const Tensor& b) { return ne(a, b); },
          [](const Tensor& a, const Scalar& s) { return ne(a, s); }, kEvery),
      bin(
          "lt", [](const Tensor& a, const Tensor& b) { return lt(a, b); },
          [](const Tensor& a, const Scalar& s) { return lt(a, s); }, kEvery),
      bin(
          "le", [](const Tensor& a, const Tensor& b) { return le(a, b); },
          [](const Tensor& a, const Scalar& s) { return le(a, s); }, kEvery),
      bin(
          "gt", [](const Tensor& a, const Tensor& b) { return gt(a, b); },
          [](const Tensor& a, const Scalar& s) { return gt(a, s); }, kEvery),
      bin(
          "ge", [](const Tensor& a, const Tensor& b) { return ge(a, b); },
          [](const Tensor& a, const Scalar& s) { return ge(a, s); }, kEvery),
  };
}

std::string base_name(const std::string& n) { return n == "div_int" ? "div" : n.substr(0, n.find('(')); }

// ---- comparing -----------------------------------------------------------------------

// Position of a float on the line of representable values: adjacent floats
// differ by 1, +0 and -0 are both 0.
std::int64_t ordered(std::uint64_t bits, DType t) {
  if (t == f32) {
    const auto u = static_cast<std::uint32_t>(bits);
    const std::int64_t mag = u & 0x7fffffffu;
    return (u >> 31) ? -mag : mag;
  }
  const std::int64_t mag = static_cast<std::int64_t>(bits & 0x7fffffffffffffffull);
  return (bits >> 63) ? -mag : mag;
}

bool is_nan(std::uint64_t bits, DType t) {
  if (t == f32) return (bits & 0x7fffffffu) > 0x7f800000u;
  return (bits & 0x7fffffffffffffffull) > 0x7ff0000000000000ull;
}
bool is_inf_or_zero(std::uint64_t bits, DType t) {
  const std::uint64_t mag = t == f32 ? (bits & 0x7fffffffu) : (bits & 0x7fffffffffffffffull);
  return mag == 0 || mag == (t == f32 ? 0x7f800000u : 0x7ff0000000000000ull);
}

std::string show(std::uint64_t bits, DType t) {
  std::ostringstream s;
  if (t == f32) {
    float f;
    const auto u = static_cast<std::uint32_t>(bits);
    std::memcpy(&f, &u, 4);
    s.precision(9);
    s << f;
  } else if (t == f64) {
    double f;
    std::memcpy(&f, &bits, 8);
    s.precision(17);
    s << f;
  } else if (t == i32) {
    s << static_cast<std::int32_t>(static_cast<std::uint32_t>(bits));
  } else if (t == i64) {
    s << static_cast<std::int64_t>(bits);
  } else {
    s << bits;
  }
  return s.str();
}

// The ulp distance of got from want (0 when they agree); -1 when they differ
// where no distance is allowed: NaN against a number, integers, the sign of a
// zero, zero against infinity.
std::int64_t distance(std::uint64_t want, std::uint64_t got, DType t) {
  if (want == got) return 0;
  if (t != f32 && t != f64) return -1;
  const bool wn = is_nan(want, t), gn = is_nan(got, t);
  if (wn || gn) return wn && gn ? 0 : -1;
  if (is_inf_or_zero(want, t) && is_inf_or_zero(got, t)) return -1;  // -0 vs +0, inf vs 0, ±inf
  // Otherwise the distance on the line of floats, where inf follows the
  // largest finite value: PyTorch's pow(DBL_MAX, 1) = inf is 1 ulp off.
  const std::int64_t d = ordered(want, t) - ordered(got, t);
  return d < 0 ? -d : d;
}

// The largest distance seen per op and dtype (ANVIL_CONFORMANCE_REPORT=1 prints it).
std::map<std::string, std::int64_t>& measured() {
  static std::map<std::string, std::int64_t> m;
  return m;
}

struct Operands {
  Bits a, b;  // b empty for unary ops
};

std::string operands_str(const Operands& in, std::size_t i, DType t) {
  return in.b.empty() ? "(" + show(in.a[i], t) + ")" : "(" + show(in.a[i], t) + ", " + show(in.b[i], t) + ")";
}

// Compares element by element; returns the number of mismatches (reported up to a few).
int expect_agree(const std::string& what, const OpCase& c, DType in_t, DType out_t, const Operands& in,
                 const Bits& want, const Bits& got) {
  if (want.size() != got.size()) {
    ADD_FAILURE() << what << ": " << got.size() << " results, expected " << want.size();
    return 1;
  }
  const int bound = out_t == f32 ? c.ulp.f32 : out_t == f64 ? c.ulp.f64 : 0;
  int bad = 0;
  std::int64_t worst = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    const std::int64_t d = distance(want[i], got[i], out_t);
    if (d >= 0) worst = std::max(worst, d);
    if (d < 0 || d > bound) {
      if (++bad <= 5)
        ADD_FAILURE() << what << " " << c.name << operands_str(in, i, in_t) << " " << to_string(in_t) << ": got "
                      << show(got[i], out_t) << ", expected " << show(want[i], out_t)
                      << (d < 0 ? " (must match exactly)"
                                : " (" + std::to_string(d) + " ulp > " + std::to_string(bound) + ")");
    }
  }
  std::int64_t& m = measured()[c.name + " " + tname(out_t)];
  m = std::max(m, worst);
  if (bad > 5) ADD_FAILURE() << what << " " << c.name << " " << to_string(in_t) << ": " << bad - 5 << " more";
  return bad;
}

Operands operands_for(const OpCase& c, DType t) {
  if (c.unary) return {inputs(t), {}};
  auto [a, b] = pairs(inputs(t));
  return {a, b};
}

Tensor run(const OpCase& c, const Operands& in, DType t, Device d) {
  if (c.unary) return c.unary(make(in.a, t, d));
  return c.binary(make(in.a, t, d), make(in.b, t, d));
}

void report_measured() {
  if (!anvil::detail::env_flag("ANVIL_CONFORMANCE_REPORT")) return;
  for (const auto& [k, v] : measured())
    if (v > 0) std::printf("measured %s: %lld ulp\n", k.c_str(), static_cast<long long>(v));
}

// ---- tests -----------------------------------------------------------------------------

TEST(Conformance, TableCoversEveryOp) {
  std::map<std::string, int> rows;
  for (const OpCase& c : cases()) ++rows[base_name(c.name)];
  for (int i = 0; i < static_cast<int>(detail::UnaryOp::Count); ++i)
    EXPECT_TRUE(rows.count(detail::name(static_cast<detail::UnaryOp>(i))))
        << "unary op " << detail::name(static_cast<detail::UnaryOp>(i)) << " has no conformance row";
  for (int i = 0; i < static_cast<int>(detail::BinaryOp::Count); ++i)
    EXPECT_TRUE(rows.count(detail::name(static_cast<detail::BinaryOp>(i))))
        << "binary op " << detail::name(static_cast<detail::BinaryOp>(i)) << " has no conformance row";
}

// Where PyTorch defines the result, the CPU gives it. Every (op, dtype) of
// the table that PyTorch accepts has a reference row; the rows PyTorch
// rejects are listed at the end of conformance_reference.inc.
TEST(Conformance, CpuMatchesPyTorch) {
  std::map<std::pair<std::string, std::string>, const RefResult*> refs;
  for (const RefResult& r : kRefResults) refs[{r.op, r.dtype}] = &r;
  int checked = 0;
  for (const OpCase& c : cases())
    for (DType t : c.dtypes) {
      const auto it = refs.find({c.name, tname(t)});
      if (it == refs.end()) continue;
      const DType out_t = dtype_named(it->second->out_dtype);
      const Operands in = operands_for(c, t);
      const Tensor got = run(c, in, t, cpu());
      ASSERT_EQ(got.dtype(), out_t) << c.name << " " << to_string(t);
      expect_agree("cpu vs PyTorch:", c, t, out_t, in, parse_bits(it->second->bits, out_t), bits_of(got));
      ++checked;
    }
  EXPECT_GE(checked, 180) << "fewer (op, dtype) pairs matched a PyTorch row than the table has";
  report_measured();
}

// torch.pow(int tensor, negative int) raises; a tensor exponent is computed
// (scalar.h: 1 for base 1, ±1 for base -1, else 0), as in PyTorch.
TEST(Conformance, IntegerToNegativeScalarPowerIsAnError) {
  const Tensor x = tensor(std::vector<std::int32_t>{2, -1, 1});
  EXPECT_THROW(pow(x, -1), ValueError);
  EXPECT_THROW(pow(x.to(u8), -2), ValueError);
  EXPECT_EQ(pow(x, 0).to_vector<std::int32_t>(), (std::vector<std::int32_t>{1, 1, 1}));
  EXPECT_EQ(pow(x, tensor(std::vector<std::int32_t>{-1, -3, -5})).to_vector<std::int32_t>(),
            (std::vector<std::int32_t>{0, -1, 1}));
  EXPECT_EQ(pow(x, -1.0).dtype(), f32);  // a float exponent promotes
  EXPECT_EQ(pow(2, x).to_vector<std::int32_t>(), (std::vector<std::int32_t>{4, 0, 2}));
}

class Conformance : public anvil::testing::DeviceTest {};

// Every device computes what the CPU computes: tensor operands, then the
// tensor-scalar form with three of the special values as the scalar.
TEST_P(Conformance, AgreesWithTheCpu) {
  const Device d = device();
  const bool fp64 = properties(d).fp64;
  for (const OpCase& c : cases())
    for (DType t : c.dtypes) {
      if (t == f64 && !fp64) continue;  // the capability check is the frontend's (test_core_device)
      const Operands in = operands_for(c, t);
      const Tensor want = run(c, in, t, cpu());
      const Tensor got = run(c, in, t, d);
      ASSERT_EQ(got.dtype(), want.dtype()) << c.name << " " << to_string(t);
      const std::string where = d.str() + " vs cpu:";
      expect_agree(where, c, t, want.dtype(), in, bits_of(want), bits_of(got));
      if (!c.with_scalar) continue;
      const Bits& v = inputs(t);
      for (std::size_t k : {std::size_t{0}, v.size() / 2, v.size() - 1}) {
        const Tensor a = make(v, t, d);
        const Tensor sv = make(Bits{v[k]}, t, cpu());
        const Scalar s = is_floating(t) ? Scalar(sv.to(f64).item<double>())
                         : t == boolean ? Scalar(sv.item<bool>())
                                        : Scalar(sv.to(i64).item<std::int64_t>());
        if (c.name == "pow" && !is_floating(t) && s.to_double() < 0) {  // PyTorch raises too
          EXPECT_THROW(c.with_scalar(a, s), ValueError) << to_string(t);
          continue;
        }
        const Tensor ref = c.binary(make(v, t, cpu()), make(Bits(v.size(), v[k]), t, cpu()));
        const Tensor res = c.with_scalar(a, s);
        ASSERT_EQ(res.dtype(), ref.dtype()) << c.name << " " << to_string(t) << " scalar";
        Operands sin{v, Bits(v.size(), v[k])};
        expect_agree(where + " (scalar operand)", c, t, ref.dtype(), sin, bits_of(ref), bits_of(res));
      }
    }
  report_measured();
}

// ---- the dense kernels' vector and element forms (Note [Vector loads], kernel_specs.h) ----

// A dense view `off` elements into a buffer of off + x.numel() + 8 values,
// the guard (values(…, seed)), holding x's values, on x's device: with off
// not a whole vector, the element kernels run instead of the vector kernels.
struct Placed {
  Tensor buffer, view, guard;
};

// n values of type t on the CPU, different for each seed: small integers
// (and halves for floats), exact in every dtype, 0/1 for bool.
Tensor values(DType t, std::int64_t n, int seed) {
  std::vector<double> v(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i)
    v[static_cast<std::size_t>(i)] =
        t == boolean ? ((i + seed) % 3 == 0)
                     : static_cast<double>((i * 7 + seed * 13) % 101) + (is_floating(t) ? 0.5 : 0.0);
  return from_host(v.data(), {n}, f64, cpu()).to(t);
}

Placed placed(const Tensor& x, std::int64_t off, int seed) {
  Placed p;
  p.guard = values(x.dtype(), off + x.numel() + 8, seed);
  p.buffer = p.guard.to(x.device()).clone();
  p.view = p.buffer.narrow(0, off, x.numel());
  p.view.copy_(x);
  return p;
}

// What p's buffer should hold once `want` is written into its view.
Tensor with_view(const Placed& p, const Tensor& want) {
  Tensor expected = p.guard.clone();
  expected.narrow(0, p.view.offset() - p.buffer.offset(), want.numel()).copy_(want);
  return expected;
}

// A NaN of any float dtype: its sign and payload are not part of a result
// (as in AgreesWithTheCpu).
bool any_nan(std::uint64_t bits, DType t) {
  if (t == f16) return (bits & 0x7fffu) > 0x7c00u;
  if (t == bf16) return (bits & 0x7fffu) > 0x7f80u;
  return (t == f32 || t == f64) && is_nan(bits, t);
}

// The same bits, element by element, where `checked(i)` (all when null).
void expect_same_bits(const std::string& what, const Tensor& want, const Tensor& got,
                      const std::function<bool(std::size_t)>& checked = nullptr) {
  ASSERT_EQ(got.dtype(), want.dtype()) << what;
  const Bits w = bits_of(want), g = bits_of(got);
  ASSERT_EQ(g.size(), w.size()) << what;
  int bad = 0;
  for (std::size_t i = 0; i < w.size(); ++i) {
    if ((checked && !checked(i)) || w[i] == g[i] || (any_nan(w[i], want.dtype()) && any_nan(g[i], want.dtype())))
      continue;
    if (++bad <= 3)
      ADD_FAILURE() << what << ": element " << i << " of " << w.size() << " is " << show(g[i], want.dtype())
                    << ", expected " << show(w[i], want.dtype());
  }
  if (bad > 3) ADD_FAILURE() << what << ": " << bad - 3 << " more";
}

// Whether C defines converting float v to integer type t: its integer part
// fits (devices differ elsewhere, and so do a CPU's scalar and vector code).
bool fits(double v, DType t) {
  if (t == u8) return v > -1 && v < 256;
  if (t == i32) return v > -2147483649.0 && v < 2147483648.0;
  return v >= -9223372036854775808.0 && v < 9223372036854775808.0;  // i64
}

// Every op of the table, every dtype: on tensors that start at 0 (the
// vector kernels) and on views that start 1 and 3 elements in (the
// element kernels), tensor and scalar operands alike: the same bits.
TEST_P(Conformance, VectorAndElementKernelsGiveTheSameBits) {
  const Device d = device();
  const bool fp64 = properties(d).fp64;
  for (const OpCase& c : cases())
    for (DType t : c.dtypes) {
      if (t == f64 && !fp64) continue;
      const Operands in = operands_for(c, t);
      const std::string what = d.str() + " " + c.name + " " + tname(t);
      const Tensor a = make(in.a, t, d), a1 = placed(a, 1, 5).view;
      if (c.unary) {
        expect_same_bits(what, c.unary(a), c.unary(a1));
        continue;
      }
      const Tensor b = make(in.b, t, d), b3 = placed(b, 3, 6).view;
      expect_same_bits(what, c.binary(a, b), c.binary(a1, b3));
      if (!c.with_scalar || (c.name == "pow" && !is_floating(t))) continue;
      const Scalar s = t == boolean ? Scalar(true) : is_floating(t) ? Scalar(2.5) : Scalar(std::int64_t{3});
      expect_same_bits(what + " (scalar operand)", c.with_scalar(a, s), c.with_scalar(a1, s));
    }
  // Casts between every pair of dtypes, special values included.
  const std::vector<DType> all = {boolean, u8, i32, i64, f32, f64, f16, bf16};
  for (DType from : all)
    for (DType to : all) {
      if (from == to || ((from == f64 || to == f64) && !fp64)) continue;
      const Tensor a = is_half(from) ? make(inputs(f32), f32, cpu()).to(from).to(d) : make(inputs(from), from, d);
      const std::vector<double> v = a.to(cpu()).to(f64).to_vector<double>();
      const bool float_to_int = is_floating(from) && !is_floating(to) && to != boolean;
      expect_same_bits(d.str() + " " + tname(from) + " to " + tname(to), a.to(to), placed(a, 1, 5).view.to(to),
                       [&](std::size_t i) { return !float_to_int || fits(v[i], to); });
    }
}

// Dense views at offsets 0..7 (in vectors of 2, 4, 8 or 16 elements: aligned
// or not, each operand on its own), sizes around a vector and its tail,
// every dtype, against the CPU on fresh tensors; a view's buffer outside
// the view stays as it was.
TEST_P(Conformance, ElementwiseKernelsOnMisalignedViewsOddSizesAndEveryDtype) {
  const Device d = device();
  const std::vector<DType> dtypes = {boolean, u8, i32, i64, f32, f64, f16, bf16};
  // Offsets of (out or cond, a, b): all aligned, all alike, one operand off.
  const int offsets[][3] = {{0, 0, 0}, {1, 1, 1}, {2, 2, 2}, {4, 4, 4}, {7, 7, 7},
                            {0, 0, 5}, {0, 6, 0}, {3, 0, 0}, {2, 6, 4}, {5, 3, 1}};
  for (std::size_t k = 0; k < dtypes.size(); ++k) {
    const DType t = dtypes[k], cast_to = dtypes[(k + 3) % dtypes.size()];
    if ((t == f64 || cast_to == f64) && !properties(d).fp64) continue;
    for (std::int64_t n : {0, 1, 3, 15, 17, 1023, 4099}) {
      const Tensor ha = values(t, n, 1), hb = values(t, n, 2), hc = values(boolean, n, 3);
      for (const auto& off : offsets) {
        const std::string what = d.str() + " " + tname(t) + " n=" + std::to_string(n) + " offsets (" +
                                 std::to_string(off[0]) + ", " + std::to_string(off[1]) + ", " +
                                 std::to_string(off[2]) + "):";
        const Placed a = placed(ha.to(d), off[1], 7), b = placed(hb.to(d), off[2], 8);
        const Tensor cond = placed(hc.to(d), off[0], 9).view;
        expect_same_bits(what + " add", add(ha, hb), add(a.view, b.view));
        expect_same_bits(what + " lt", lt(ha, hb), lt(a.view, b.view));
        expect_same_bits(what + " abs", abs(ha), abs(a.view));
        expect_same_bits(what + " add scalar", add(ha, Scalar(true)), add(a.view, Scalar(true)));
        if (t != boolean) expect_same_bits(what + " scalar sub", 3 - ha, 3 - a.view);
        expect_same_bits(what + " to " + tname(cast_to), ha.to(cast_to), a.view.to(cast_to));
        expect_same_bits(what + " where", where(hc, ha, hb), where(cond, a.view, b.view));
        expect_same_bits(what + " where scalar", where(hc, ha, Scalar(1)), where(cond, a.view, Scalar(1)));
        // Into views: add_out and a cast by copy_ at out's offset, neg_ in place.
        Placed out = placed(values(t, n, 11).to(d), off[0], 10);
        add_out(out.view, a.view, b.view);
        expect_same_bits(what + " add_out", with_view(out, add(ha, hb)), out.buffer);
        Placed cast = placed(values(cast_to, n, 12).to(d), off[0], 11);
        cast.view.copy_(a.view);
        expect_same_bits(what + " copy_ to " + tname(cast_to), with_view(cast, ha.to(cast_to)), cast.buffer);
        if (t == boolean) continue;
        Placed self = placed(ha.to(d), off[1], 13);
        self.view.neg_();
        expect_same_bits(what + " neg_", with_view(self, neg(ha)), self.buffer);
      }
    }
  }
}

ANVIL_INSTANTIATE_DEVICE_TEST(Conformance);

}  // namespace
