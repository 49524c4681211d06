// Reductions against the float64 reference, on every device: over all and
// over given dims (negative, several), keepdim, non-contiguous inputs, long
// and odd-size inputs, empty reductions.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "device_test.h"
#include "reference.h"

namespace {

using namespace anvil;
using ref::Domain;
using ref::Layout;

using Reduce = std::function<Tensor(const Tensor&, const Shape&, bool)>;
using RefReduce = std::function<ref::Array(const ref::Array&, const ref::Dims&, bool)>;

struct DimsCase {
  ref::Dims shape;
  ref::Dims dims;  // empty = all
};
// {5, 3, 4, 4} over {0, 2, 3} is batch norm's statistics: short rows (Note
// [Short rows] in src/backends/cpu/cpu_reduce.cpp).
const std::vector<DimsCase> kCases = {
    {{7}, {}},
    {{1023}, {}},
    {{1023}, {0}},
    {{100003}, {}},
    {{}, {}},
    {{3, 5}, {}},
    {{3, 5}, {0}},
    {{3, 5}, {1}},
    {{3, 5}, {-1}},
    {{3, 5}, {-2}},
    {{3, 5}, {0, 1}},
    {{2, 3, 7}, {1}},
    {{2, 3, 7}, {0, 2}},
    {{2, 3, 7}, {-1, 0}},
    {{2, 3, 7}, {-2}},
    {{4, 1, 6}, {1}},
    {{33, 65}, {0}},
    {{33, 65}, {1}},
    {{2, 3, 4, 5}, {1, 3}},
    {{2, 3, 4, 5}, {0, 1, 2, 3}},
    {{1, 1}, {0}},
    {{257, 3}, {0}},
    {{5, 3, 4, 4}, {0, 2, 3}},
};
const Layout kLayouts[] = {Layout::Contiguous, Layout::Transposed, Layout::Stepped};

struct ReduceCase {
  Reduce op;
  RefReduce ref;
  Domain dom;
  std::vector<DType> dtypes;
  std::function<DType(DType)> out;
  double rtol32 = 1e-4, atol32 = 1e-3;  // f32 sums of up to 1e5 terms
};

DType same(DType t) { return t; }
DType sum_dtype(DType t) { return is_floating(t) ? t : i64; }  // torch.sum/prod of ints give i64

void run_reduce(Device d, const ReduceCase& c) {
  std::uint64_t seed = 1;
  for (DType dt : c.dtypes)
    for (const auto& rc : kCases)
      for (Layout layout : kLayouts)
        for (bool keepdim : {false, true}) {
          SCOPED_TRACE(std::string(to_string(dt)) + " shape=" + ref::dims_str(rc.shape) +
                       " dims=" + ref::dims_str(rc.dims) + " " + ref::name(layout) + (keepdim ? " keepdim" : ""));
          ref::guarded([&] {
            Domain dom = c.dom;
            if (!is_floating(dt)) dom.integer_valued = true;
            const auto in = ref::make_input(rc.shape, layout, dt, d, dom, seed++);
            const Tensor out = c.op(in.t, Shape(rc.dims), keepdim);
            const DType want_dt = c.out(dt);
            EXPECT_EQ(out.dtype(), want_dt);
            EXPECT_EQ(out.device(), d);
            const ref::Array want = c.ref(in.r, rc.dims, keepdim);
            ref::Tolerance tol = ref::tol(want_dt);
            if (want_dt == f32) tol = {c.rtol32, c.atol32};
            if (want_dt == f64) tol = {1e-10, 1e-10};
            EXPECT_TRUE(ref::close(out, want, tol));
            EXPECT_TRUE(ref::exact(in.t, in.r));
          });
        }
}

class Reductions : public anvil::testing::DeviceTest {};

#define REDUCE_TEST(NAME, ...) \
  TEST_P(Reductions, NAME) { run_reduce(device(), ReduceCase{__VA_ARGS__}); }

const Domain kSym{-2, 2};
// f16 and bf16 run every float case, with ref::tol's tolerances for them.
const std::vector<DType> kFloat = {f32, f64, f16, bf16};
const std::vector<DType> kAll = {f32, f64, f16, bf16, i32, i64};

REDUCE_TEST(
    sum, [](const Tensor& x, const Shape& s, bool k) { return sum(x, s, k); },
    [](const ref::Array& a, const ref::Dims& s, bool k) { return ref::sum(a, s, k); }, kSym, kAll, sum_dtype)
REDUCE_TEST(
    sum_method, [](const Tensor& x, const Shape& s, bool k) { return x.sum(s, k); },
    [](const ref::Array& a, const ref::Dims& s, bool k) { return ref::sum(a, s, k); }, kSym, kAll, sum_dtype)
REDUCE_TEST(
    mean, [](const Tensor& x, const Shape& s, bool k) { return mean(x, s, k); },
    [](const ref::Array& a, const ref::Dims& s, bool k) { return ref::mean(a, s, k); }, kSym, kFloat, same)
REDUCE_TEST(
    mean_method, [](const Tensor& x, const Shape& s, bool k) { return x.mean(s, k); },
    [](const ref::Array& a, const ref::Dims& s, bool k) { return ref::mean(a, s, k); }, kSym, kFloat, same)
// Values near 1 keep long products finite.
REDUCE_TEST(
    prod, [](const Tensor& x, const Shape& s, bool k) { return prod(x, s, k); },
    [](const ref::Array& a, const ref::Dims& s, bool k) { return ref::prod(a, s, k); }, Domain{0.999, 1.001}, kFloat,
    same, 1e-4, 1e-6)
REDUCE_TEST(
    amax, [](const Tensor& x, const Shape& s, bool k) { return amax(x, s, k); },
    [](const ref::Array& a, const ref::Dims& s, bool k) { return ref::amax(a, s, k); }, Domain{-100, 100}, kAll, same,
    0, 0)
REDUCE_TEST(
    amin, [](const Tensor& x, const Shape& s, bool k) { return amin(x, s, k); },
    [](const ref::Array& a, const ref::Dims& s, bool k) { return ref::amin(a, s, k); }, Domain{-100, 100}, kAll, same,
    0, 0)
REDUCE_TEST(
    var, [](const Tensor& x, const Shape& s, bool k) { return var(x, s, k); },
    [](const ref::Array& a, const ref::Dims& s, bool k) { return ref::var(a, s, k); }, kSym, kFloat, same)
REDUCE_TEST(
    var_correction_0, [](const Tensor& x, const Shape& s, bool k) { return var(x, s, k, 0); },
    [](const ref::Array& a, const ref::Dims& s, bool k) { return ref::var(a, s, k, 0); }, kSym, kFloat, same)
REDUCE_TEST(
    std, [](const Tensor& x, const Shape& s, bool k) { return anvil::std(x, s, k); },
    [](const ref::Array& a, const ref::Dims& s, bool k) { return ref::stdev(a, s, k); }, kSym, kFloat, same)
REDUCE_TEST(
    norm, [](const Tensor& x, const Shape& s, bool k) { return norm(x, s, k); },
    [](const ref::Array& a, const ref::Dims& s, bool k) { return ref::norm(a, s, k); }, kSym, kFloat, same)
REDUCE_TEST(
    logsumexp, [](const Tensor& x, const Shape& s, bool k) { return logsumexp(x, s, k); },
    [](const ref::Array& a, const ref::Dims& s, bool k) { return ref::logsumexp(a, s, k); }, Domain{-5, 5}, kFloat,
    same)
// Far from zero: only a max-shifted logsumexp stays finite.
REDUCE_TEST(
    logsumexp_large_values, [](const Tensor& x, const Shape& s, bool k) { return logsumexp(x, s, k); },
    [](const ref::Array& a, const ref::Dims& s, bool k) { return ref::logsumexp(a, s, k); }, Domain{900, 1000}, kFloat,
    same)
REDUCE_TEST(
    logsumexp_very_negative, [](const Tensor& x, const Shape& s, bool k) { return logsumexp(x, s, k); },
    [](const ref::Array& a, const ref::Dims& s, bool k) { return ref::logsumexp(a, s, k); }, Domain{-1000, -900},
    kFloat, same)

ANVIL_INSTANTIATE_DEVICE_TEST(Reductions);

// ---- arg reductions (single dim or flattened) ------------------------------------------------

class ArgReductions : public anvil::testing::DeviceTest {};

void run_arg(Device d, bool is_max) {
  std::uint64_t seed = 50;
  struct Case {
    ref::Dims shape;
    std::optional<int> dim;
  };
  const Case cases[] = {{{7}, std::nullopt},    {{1023}, 0},        {{100003}, std::nullopt},
                        {{3, 5}, std::nullopt}, {{3, 5}, 0},        {{3, 5}, 1},
                        {{3, 5}, -1},           {{2, 3, 7}, 1},     {{2, 3, 7}, -3},
                        {{33, 65}, 0},          {{}, std::nullopt}, {{4, 1, 6}, 1}};
  for (DType dt : {f32, f64, i32, i64})
    for (const auto& c : cases)
      for (Layout layout : kLayouts)
        for (bool keepdim : {false, true}) {
          SCOPED_TRACE(std::string(to_string(dt)) + " shape=" + ref::dims_str(c.shape) +
                       " dim=" + (c.dim ? std::to_string(*c.dim) : "none") + " " + ref::name(layout) +
                       (keepdim ? " keepdim" : ""));
          ref::guarded([&] {
            // Few distinct values: ties, where the first index must win.
            const auto in = ref::make_input(c.shape, layout, dt, d, Domain{-3, 3, true}, seed++);
            const Tensor out = is_max ? argmax(in.t, c.dim, keepdim) : argmin(in.t, c.dim, keepdim);
            EXPECT_EQ(out.dtype(), i64);
            EXPECT_EQ(out.device(), d);
            ref::Array want;
            if (c.dim) {
              want = is_max ? ref::argmax(in.r, {*c.dim}, keepdim) : ref::argmin(in.r, {*c.dim}, keepdim);
            } else {
              // Over the flattened tensor: a 0-dim index (keepdim keeps every dim as 1, like torch).
              const ref::Array flat = ref::reshape(in.r, {in.r.numel()});
              want = is_max ? ref::argmax(flat, {}, false) : ref::argmin(flat, {}, false);
              if (keepdim) want = ref::reshape(want, ref::Dims(c.shape.size(), 1));
            }
            EXPECT_TRUE(ref::exact(out, want));
          });
        }
}

TEST_P(ArgReductions, argmax) { run_arg(device(), true); }
TEST_P(ArgReductions, argmin) { run_arg(device(), false); }

TEST_P(ArgReductions, MethodsAndFirstIndexOnTies) {
  const Device d = device();
  auto x = tensor(std::vector<float>{1, 5, 5, -2, -2, 0}, Shape{2, 3}, d);
  EXPECT_EQ(x.argmax().item<std::int64_t>(), 1);
  EXPECT_EQ(x.argmin().item<std::int64_t>(), 3);
  EXPECT_TRUE(ref::exact(x.argmax(1), ref::Array({2}, {1, 2})));
  EXPECT_TRUE(ref::exact(x.argmin(0, true), ref::Array({1, 3}, {1, 1, 1})));
  EXPECT_EQ(x.max().item<float>(), 5.0f);
  EXPECT_EQ(x.min().item<float>(), -2.0f);
  EXPECT_EQ(x.max().dim(), 0);
}

ANVIL_INSTANTIATE_DEVICE_TEST(ArgReductions);

// ---- specific behaviour --------------------------------------------------------------------

class ReductionBehaviour : public anvil::testing::DeviceTest {};

TEST_P(ReductionBehaviour, ShapesOfResults) {
  const Device d = device();
  auto x = ones({2, 3, 4}, d);
  EXPECT_EQ(x.sum().shape(), Shape{});
  EXPECT_EQ(sum(x, {1}).shape(), (Shape{2, 4}));
  EXPECT_EQ(sum(x, {1}, true).shape(), (Shape{2, 1, 4}));
  EXPECT_EQ(sum(x, {0, 2}, true).shape(), (Shape{1, 3, 1}));
  EXPECT_EQ(sum(x, {}, true).shape(), (Shape{1, 1, 1}));
  EXPECT_EQ(mean(x, {-1}).shape(), (Shape{2, 3}));
  EXPECT_EQ(amax(x, {0}).shape(), (Shape{3, 4}));
  EXPECT_EQ(max(x, 0).values.shape(), (Shape{3, 4}));
  EXPECT_EQ(norm(x).shape(), Shape{});
  EXPECT_FLOAT_EQ(x.norm().item<float>(), std::sqrt(24.0f));
  EXPECT_EQ(logsumexp(x, {2}).shape(), (Shape{2, 3}));
  EXPECT_FLOAT_EQ(logsumexp(x, {2}).to_vector<float>()[0], 1.0f + std::log(4.0f));
  // A 0-dim tensor reduces to itself.
  auto s = full({}, 2.5, d);
  EXPECT_EQ(s.sum().item<float>(), 2.5f);
  EXPECT_EQ(s.max().item<float>(), 2.5f);
  EXPECT_EQ(argmax(s).item<std::int64_t>(), 0);
}

TEST_P(ReductionBehaviour, IntegerAndBoolSums) {
  const Device d = device();
  auto i = tensor(std::vector<std::int32_t>{2000000000, 2000000000}, d);
  auto s = i.sum();
  EXPECT_EQ(s.dtype(), i64);  // accumulates in i64, as torch.sum
  EXPECT_EQ(s.item<std::int64_t>(), 4000000000);
  auto b = tensor(std::vector<std::uint8_t>{1, 0, 1, 1}, d, boolean);
  EXPECT_EQ(b.sum().dtype(), i64);
  EXPECT_EQ(b.sum().item<std::int64_t>(), 3);
  EXPECT_EQ(prod(tensor(std::vector<std::int32_t>{3, 4, 5}, d)).item<std::int64_t>(), 60);
  EXPECT_EQ(max(i).dtype(), i32);
  // dtype=: the result in it, wrapped as its own arithmetic wraps (2 * 2e9 mod 2^32).
  auto s32 = sum(i, {}, false, i32);
  EXPECT_EQ(s32.dtype(), i32);
  EXPECT_EQ(s32.item<std::int32_t>(), static_cast<std::int32_t>(4000000000LL - 4294967296LL));
  auto u = tensor(std::vector<std::uint8_t>{200, 100}, d, u8);
  EXPECT_EQ(u.sum({}, false, u8).to(i64).item<std::int64_t>(), 44);
  EXPECT_EQ(prod(u, {0}, true, u8).to(i64).item<std::int64_t>(), 32);  // 20000 mod 256
  EXPECT_EQ(prod(u, {0}, true, u8).shape(), Shape{1});
  auto f = sum(i, {}, false, f64);
  EXPECT_EQ(f.dtype(), f64);
  EXPECT_EQ(f.item<double>(), 4e9);
  EXPECT_EQ(sum(tensor(std::vector<float>{0.5f, 0.25f}, d), {}, false, f64).item<double>(), 0.75);
}

TEST_P(ReductionBehaviour, LongSumsAreAccurate) {
  const Device d = device();
  // 1e6 copies of 0.1f: a naive running f32 sum drifts by ~1%; torch is within ~1e-6 relative.
  auto x = full({1000000}, 0.1, d);
  const double want = 1000000.0 * static_cast<double>(0.1f);
  EXPECT_NEAR(x.sum().item<float>(), want, want * 1e-5);
  EXPECT_NEAR(x.mean().item<float>(), static_cast<double>(0.1f), 1e-6);
  // Odd sizes around vector widths.
  for (std::int64_t n : {1, 3, 7, 15, 17, 31, 33, 63, 65, 1023, 1025, 100003}) {
    SCOPED_TRACE(n);
    const auto a = ref::make_input({n}, Layout::Contiguous, f32, d, Domain{-1, 1}, static_cast<std::uint64_t>(n));
    EXPECT_TRUE(ref::close(a.t.sum(), ref::sum(a.r), ref::Tolerance{1e-5, 1e-4}));
    EXPECT_TRUE(ref::close(a.t.max(), ref::amax(a.r), ref::Tolerance{0, 0}));
    EXPECT_TRUE(ref::close(norm(a.t), ref::norm(a.r), ref::Tolerance{1e-5, 1e-5}));
  }
}

TEST_P(ReductionBehaviour, EmptyReductions) {
  const Device d = device();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  auto e = zeros({0}, d);
  EXPECT_TRUE(ref::exact(e.sum(), ref::Array({}, {0})));                           // sum of nothing is 0
  EXPECT_TRUE(ref::exact(prod(e), ref::Array({}, {1})));                           // prod of nothing is 1
  EXPECT_TRUE(ref::close(e.mean(), ref::Array({}, {nan}), ref::Tolerance{0, 0}));  // torch: nan
  EXPECT_TRUE(ref::exact(norm(e), ref::Array({}, {0})));
  auto m = zeros({3, 0}, d);
  EXPECT_TRUE(ref::exact(sum(m, {1}), ref::Array({3}, {0, 0, 0})));
  EXPECT_TRUE(ref::exact(sum(m, {1}, true), ref::Array({3, 1}, {0, 0, 0})));
  EXPECT_TRUE(ref::exact(sum(m, {0}), ref::Array({0}, {})));
  EXPECT_TRUE(ref::exact(amax(m, {0}), ref::Array({0}, {})));  // nothing to reduce per output: fine
  EXPECT_TRUE(ref::exact(zeros({0}, d, i32).sum(), ref::Array({}, {0})));
  // max/min/argmax of nothing have no identity: an error naming the op.
  auto expect_error_naming = [](const std::function<void()>& f, const char* op) {
    try {
      f();
      ADD_FAILURE() << op << " of an empty tensor did not throw";
    } catch (const Error& err) {
      EXPECT_NE(std::string(err.what()).find(op), std::string::npos) << err.what();
    }
  };
  expect_error_naming([&] { (void)e.max(); }, "max");
  expect_error_naming([&] { (void)e.min(); }, "min");
  expect_error_naming([&] { (void)e.argmax(); }, "argmax");
  expect_error_naming([&] { (void)argmin(e); }, "argmin");
  expect_error_naming([&] { (void)amax(m, {1}); }, "amax");
  expect_error_naming([&] { (void)max(m, 1); }, "max");
  expect_error_naming([&] { (void)argmax(m, 1); }, "argmax");
  // Still usable afterwards.
  EXPECT_EQ(ones({3}, d).sum().item<float>(), 3.0f);
}

TEST_P(ReductionBehaviour, BadDimsAreIndexErrors) {
  const Device d = device();
  auto x = ones({2, 3}, d);
  EXPECT_THROW(sum(x, {2}), IndexError);
  EXPECT_THROW(sum(x, {-3}), IndexError);
  EXPECT_THROW(mean(x, {0, 5}), IndexError);
  EXPECT_THROW(amax(x, {7}), IndexError);
  EXPECT_THROW(max(x, 7), IndexError);
  EXPECT_THROW(argmax(x, 2), IndexError);
  EXPECT_THROW(argmin(x, -3), IndexError);
  EXPECT_THROW(var(x, {3}), IndexError);
  EXPECT_THROW(logsumexp(x, {9}), IndexError);
  try {
    (void)sum(x, {4});
  } catch (const IndexError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("sum"), std::string::npos) << m;
    EXPECT_NE(m.find("4"), std::string::npos) << m;
  }
}

// PyTorch 1.13: a slice that is all -inf has logsumexp -inf (exp(-inf) must
// be exactly 0; the CPU once gave -102.59 from a denormal), all +inf gives
// +inf, and -inf entries next to finite ones drop out.
TEST_P(ReductionBehaviour, LogsumexpOfInfiniteSlices) {
  const Device d = device();
  const float inf = std::numeric_limits<float>::infinity();
  for (DType t : {f32, f64}) {
    if (t == f64 && !properties(d).fp64) continue;
    SCOPED_TRACE(to_string(t));
    const Tensor x = tensor(std::vector<float>{-inf, -inf, -inf, -inf, inf, inf, -inf, 0.0f, 0.0f}, {3, 3}, d).to(t);
    const auto r = logsumexp(x, {1}).to(f64).to_vector<double>();
    ASSERT_EQ(r.size(), 3u);
    EXPECT_EQ(r[0], -std::numeric_limits<double>::infinity());
    EXPECT_EQ(r[1], std::numeric_limits<double>::infinity());
    EXPECT_NEAR(r[2], std::log(2.0), 1e-6);
    const auto all = logsumexp(full({1000}, -inf, d, t), {0}).to(f64).item<double>();
    EXPECT_EQ(all, -std::numeric_limits<double>::infinity());
  }
}

TEST_P(ReductionBehaviour, VarOfOneElementIsNaNUnbiased) {
  const Device d = device();
  auto x = ones({1}, d);
  EXPECT_TRUE(std::isnan(var(x).item<float>()));  // torch: nan (division by n - 1 = 0)
  EXPECT_EQ(var(x, {}, false, 0).item<float>(), 0.0f);
  auto y = tensor(std::vector<double>{1, 2, 3, 4}, d);
  EXPECT_DOUBLE_EQ(var(y).item<double>(), 5.0 / 3.0);
  EXPECT_DOUBLE_EQ(anvil::std(y, {}, false, 0).item<double>(), std::sqrt(1.25));
}

ANVIL_INSTANTIATE_DEVICE_TEST(ReductionBehaviour);

}  // namespace
